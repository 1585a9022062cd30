"""A pod's effective placement request: what its own preferences change about where it may go.

The node's admission (``policy/manager.py``) admits a pod at its own topology scope and at a policy at
least as strict as the node's, from the pod's :class:`~numaplane.policy.preferences.AllocationRequest`
(QoS class, effective requests, parsed ``numaplane.io/`` preferences; computed once per pod). A
scheduler that judged the pod at the NRT's advertised scope and policy would send it to nodes that
then reject it (k/k#84869). This module derives, from that same allocation request, what the NUMA
filter and score (the vectorised pipeline and the per-node functions, hence the cycle, the extender,
the standalone scheduler, the simulator and ``explain``) judge the pod at. The over-reserve cache
charges a reserved pod's whole plugin request (``requests.pod_request``) to every zone of its node,
which is conservative at either scope, so no preference changes its accounting.

Reach of each preference in the scheduler (the node honours all of them):

* ``topology-scope``: the filter and the score judge the pod at this scope on every node.
* ``topology-policy``: ``single-numa-node`` makes the filter check the pod as on a single-numa-node
  node wherever the NRT says the node's policy is laxer. ``restricted`` cannot be judged from an
  NRT on a node whose policy is ``none``/``best-effort`` (the NRT carries no hint preference), so
  the scheduler errs towards "does not fit": it judges such a pod as ``single-numa-node`` would
  (every NUMA-affine request within one zone), which is stricter than restricted and therefore never
  sends the pod to a node that rejects it for alignment; the verdict's notes say so.
* ``memory-pinning: true``: on a pod that is not Guaranteed the node refuses it, so does the filter
  on every node. On a Guaranteed pod it needs the node's memory manager policy ``Static``; the NRT
  shows it: memory is listed per zone only under ``Static`` (the kubelet's ``GetAllocatableResources``,
  ``nrt/from_manager.py``), so a node whose readable NRT lists no memory in any zone does not fit
  (:data:`MSG_PREFERENCE_UNMET` and the reason), whatever its topology policy.
* ``cpu-strategy``, ``isolated-cpus: prefer/avoid``, ``full-pcpus: false``, ``memory-pinning: false``:
  they choose *which* CPUs and memory of a fitting zone set are used; they do not change the NRT's
  per-zone amounts the filter compares.
* ``full-pcpus: true`` and ``isolated-cpus: require`` depend on cores and isolated CPUs, which an NRT
  does not describe: the filter checks everything else and says in its verdict's notes that these
  were not judged (:attr:`EffectivePlacement.unjudged`); a node may refuse such a pod
  (``SMTAlignmentError``, no isolated CPUs). This is the documented exception: refusing them on every
  node instead would leave every such pod pending under a NUMA-aware scheduler.
* an invalid preference: the node rejects the pod with ``InvalidPreference``, so the filter rejects it
  on every node, with the annotation's message in the reason (:data:`MSG_INVALID_PREFERENCE`: the
  message); so does a ``topology-policy`` laxer than the node's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from numaplane.policy.preferences import PREFIX, AllocationRequest, PodPreferences, allocation_request
from numaplane.resources.pod import Pod

__all__ = [
    "MSG_INVALID_PREFERENCE",
    "MSG_PREFERENCE_UNMET",
    "PINNING_UNMET_SHORT",
    "EffectivePlacement",
    "effective_placement",
    "judged_policy",
    "judged_scope",
    "pinning_note",
    "relaxes",
]

MSG_INVALID_PREFERENCE = "invalid pod preference"
#: a valid preference this node cannot honour, as its NRT shows (the notes say which and why)
MSG_PREFERENCE_UNMET = "pod preference not met"

PINNING_UNMET_SHORT = f"{PREFIX}memory-pinning true needs the node's memory manager policy Static"
PINNING_UNMET = (
    f"annotation {PREFIX}memory-pinning='true' needs the node's memory manager policy Static; this node's "
    "NRT lists no memory in any NUMA zone (the kubelet reports memory per zone only under Static), so "
    "the node would refuse the pod (InvalidPreference)"
)


@dataclass(frozen=True, slots=True)
class EffectivePlacement:
    """The pod's preferences as the filter applies them; ``None`` fields mean "the node's value".

    ``invalid`` holds the admission's message when the annotations are refused by every node (then
    the pod fits no node). ``pins_memory``: the pod asks ``memory-pinning: true`` (Guaranteed), so
    only nodes whose NRT lists memory per zone fit. ``unjudged``: notes naming the preferences an NRT
    cannot judge (module docstring). ``request``: the pod's allocation request it derives from."""

    scope: str | None = None
    policy: str | None = None
    invalid: str | None = None
    preferences: PodPreferences = field(default_factory=PodPreferences)
    pins_memory: bool = False
    unjudged: tuple[str, ...] = ()

    @property
    def is_default(self) -> bool:
        """The pod is judged as upstream judges every pod (no preference changes a verdict or score)."""
        return self.scope is None and self.policy is None and self.invalid is None and not self.pins_memory

    def policy_note(self, node_policy: str) -> str | None:
        """Why the pod is judged at another policy than ``node_policy`` (``None``: it is not)."""
        asked = self.preferences.topology_policy
        if self.policy is None or self.policy == node_policy:
            return None
        if asked == "restricted":
            return (
                f"judged as single-numa-node: the pod asks {PREFIX}topology-policy restricted, which an NRT "
                f"cannot judge on a {node_policy!r} node; the scheduler errs towards 'does not fit'"
            )
        return f"judged at the pod's own {PREFIX}topology-policy {asked}"

    def scope_note(self, node_scope: str) -> str | None:
        """Why the pod is judged at another scope than ``node_scope`` (``None``: it is not)."""
        if self.scope is None or self.scope == node_scope:
            return None
        return f"judged at the pod's own {PREFIX}topology-scope {self.scope}"


_DEFAULT = EffectivePlacement()
_MEMO = "_effective_placement"


def _derive(request: AllocationRequest) -> EffectivePlacement:
    if request.invalid is not None:
        return EffectivePlacement(invalid=request.invalid)
    prefs = request.preferences
    if prefs.is_default:
        return _DEFAULT
    if prefs.memory_pinning and request.qos != "Guaranteed":  # the node refuses it whatever its state
        return EffectivePlacement(
            invalid=f"annotation {PREFIX}memory-pinning='true': only a Guaranteed pod's memory can be "
            f"pinned; this pod is {request.qos}",
            preferences=prefs,
        )
    policy = prefs.topology_policy
    if policy in ("none", "best-effort"):
        policy = None  # never relaxes a node (admission refuses a relaxing one; see judged_policy)
    elif policy == "restricted":
        policy = "single-numa-node"  # cannot be judged from an NRT: err towards "does not fit"
    unjudged = []
    if prefs.full_pcpus:
        unjudged.append(
            f"not judged: {PREFIX}full-pcpus true (an NRT does not describe cores; the node may refuse "
            "the pod with SMTAlignmentError)"
        )
    if prefs.isolated_cpus == "require":
        unjudged.append(
            f"not judged: {PREFIX}isolated-cpus require (an NRT does not describe isolated CPUs; the node "
            "refuses the pod if its isolated CPUs do not suffice)"
        )
    return EffectivePlacement(
        scope=prefs.topology_scope,
        policy=policy,
        preferences=prefs,
        pins_memory=bool(prefs.memory_pinning),
        unjudged=tuple(unjudged),
    )


def effective_placement(pod: Pod) -> EffectivePlacement:
    """The pod's :class:`EffectivePlacement`, derived from its allocation request (computed once per pod)."""
    request = allocation_request(pod)
    memo = pod.__dict__.get(_MEMO)
    if memo is not None and memo[0] is request:
        placement: EffectivePlacement = memo[1]
        return placement
    placement = _derive(request)
    pod.__dict__[_MEMO] = (request, placement)
    return placement


def judged_scope(pod: Pod, node_scope: str) -> str:
    """The scope the filter judges ``pod`` at on a node advertising ``node_scope``."""
    return effective_placement(pod).scope or node_scope


def judged_policy(pod: Pod, node_policy: str) -> str:
    """The policy the filter judges ``pod`` at on a node advertising ``node_policy``.

    A pod asking a laxer policy than the node's is rejected by the node (``InvalidPreference``); the
    filter keeps the node's policy then (the relaxing annotation is reported by :func:`relaxes`)."""
    wanted = effective_placement(pod).policy
    if wanted == "single-numa-node":
        return wanted
    return node_policy


def relaxes(pod: Pod, node_policy: str) -> str | None:
    """The admission's message if the pod's ``topology-policy`` would relax ``node_policy``, else ``None``."""
    request = allocation_request(pod)
    return None if request.invalid is not None else request.conflict(node_policy)


def pinning_note(pod: Pod, lists_memory: bool) -> str | None:
    """The reason a node whose NRT does (not) list memory per zone cannot honour the pod's
    ``memory-pinning: true`` (``None``: it can, or the pod does not ask it)."""
    return PINNING_UNMET if effective_placement(pod).pins_memory and not lists_memory else None
