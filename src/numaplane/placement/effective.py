"""A pod's effective placement request: what its own preferences change about where it may go.

The node's admission (``policy/manager.py``) reads the pod's ``numaplane.io/`` annotations
(:mod:`numaplane.policy.preferences`) and admits at the pod's topology scope and at a policy at least
as strict as the node's. A scheduler that judged the pod at the NRT's advertised scope and policy
would send it to nodes that then reject it (k/k#84869). This module is the one place the NUMA
filter and score (the vectorised pipeline and the per-node functions, hence the cycle, the
extender, the standalone scheduler, the simulator and ``explain``) derive the scope and policy a pod
is judged at.

Reach of each preference in the scheduler (the node honours all of them):

* ``topology-scope``: the filter and the score judge the pod at this scope on every node.
* ``topology-policy``: ``single-numa-node`` makes the filter check the pod as on a single-numa-node
  node wherever the NRT says the node's policy is laxer. ``restricted`` cannot be judged from an
  NRT on a node whose policy is ``none``/``best-effort`` (the NRT carries no hint preference), so
  the scheduler errs towards "does not fit" there only when it must: it judges such a pod as
  ``single-numa-node`` would (every NUMA-affine request within one zone), which is stricter than
  restricted and therefore never sends the pod to a node that rejects it for alignment.
* ``cpu-strategy``, ``full-pcpus``, ``isolated-cpus``, ``memory-pinning``: they choose *which* CPUs
  and memory of a fitting zone set are used; they do not change the NRT's per-zone amounts the filter
  compares. ``full-pcpus``/``isolated-cpus: require`` can make a node reject a pod that the NRT says
  fits (the NRT does not describe cores or isolation); this is a documented exception.
* ``memory-pinning: true`` on a pod that is not Guaranteed: the node refuses it, so does the filter.
  On a Guaranteed pod it needs the node's memory manager policy ``Static``, which an NRT does not
  state: the second documented exception (a node with memory manager ``None`` refuses the pod).
* an invalid preference: the node rejects the pod with ``InvalidPreference``, so the filter rejects it
  on every node, with the annotation's message.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from numaplane.policy.preferences import InvalidPreferenceError, PodPreferences, parse_preferences
from numaplane.resources.pod import Pod

__all__ = [
    "MSG_INVALID_PREFERENCE",
    "EffectivePlacement",
    "effective_placement",
    "judged_policy",
    "judged_scope",
    "relaxes",
]

MSG_INVALID_PREFERENCE = "invalid pod preference"


@dataclass(frozen=True, slots=True)
class EffectivePlacement:
    """The pod's preferences as the filter applies them; ``None`` fields mean "the node's value".

    ``invalid`` holds the :class:`InvalidPreferenceError` message when the annotations do not parse
    (then the pod fits no node)."""

    scope: str | None = None
    policy: str | None = None
    invalid: str | None = None
    preferences: PodPreferences = field(default_factory=PodPreferences)

    @property
    def is_default(self) -> bool:
        return self.scope is None and self.policy is None and self.invalid is None


_DEFAULT = EffectivePlacement()


def effective_placement(pod: Pod) -> EffectivePlacement:
    """The pod's :class:`EffectivePlacement`, computed from its annotations."""
    if not pod.annotations:
        return _DEFAULT
    try:
        prefs = parse_preferences(pod.annotations)
    except InvalidPreferenceError as exc:
        return EffectivePlacement(invalid=str(exc))
    if prefs.memory_pinning and pod.qos_class != "Guaranteed":  # the node refuses it whatever its state
        return EffectivePlacement(
            invalid=f"annotation numaplane.io/memory-pinning='true': only a Guaranteed pod's memory can be "
            f"pinned; this pod is {pod.qos_class}",
            preferences=prefs,
        )
    policy = prefs.topology_policy
    if policy in ("none", "best-effort"):
        policy = None  # never relaxes a node (admission refuses a relaxing one; see judged_policy)
    elif policy == "restricted":
        policy = "single-numa-node"  # cannot be judged from an NRT: err towards "does not fit"
    return EffectivePlacement(scope=prefs.topology_scope, policy=policy, preferences=prefs)


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
    if not pod.annotations:
        return None
    try:
        parse_preferences(pod.annotations, node_policy)
    except InvalidPreferenceError as exc:
        return str(exc)
    return None
