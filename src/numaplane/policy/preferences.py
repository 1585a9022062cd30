"""Per-pod allocation preferences, chosen by users through annotations (no admin needed).

All keys live under the ``numaplane.io/`` prefix. Every key under the prefix must be known and every
value valid: an invalid one rejects the pod with reason ``InvalidPreference`` and a message naming
the annotation and the accepted values — a preference is never ignored silently.

=========================================  =====================================================
annotation                                 values and meaning
=========================================  =====================================================
``numaplane.io/cpu-strategy``              ``packed`` (node default: the kubelet's packing),
                                           ``spread-cores`` (one thread per core first, like
                                           ``distribute-cpus-across-cores``),
                                           ``distribute-numa`` (even split across NUMA nodes, like
                                           ``distribute-cpus-across-numa``)
``numaplane.io/topology-policy``           ``restricted`` or ``single-numa-node``: a policy at least
                                           as strict as the node's, for this pod only
                                           (``none``/``best-effort`` are accepted only where the node
                                           is not stricter)
``numaplane.io/topology-scope``            ``container`` or ``pod``
``numaplane.io/full-pcpus``                ``true``/``false``: whole physical cores only for this pod
``numaplane.io/isolated-cpus``             ``prefer`` (take isolated CPUs first when they suffice),
                                           ``require`` (only isolated CPUs; reject otherwise),
                                           ``avoid`` (never isolated CPUs), ``none`` (default)
``numaplane.io/memory-pinning``            ``true`` (pin memory to the NUMA nodes of the pod's
                                           exclusive CPUs; default for Guaranteed pods on a node
                                           with the static memory policy), ``false`` (never)
=========================================  =====================================================

A pod's *allocation request* (:class:`AllocationRequest`, :func:`allocation_request`) is the one
notion every decision about the pod reads: its QoS class, its effective requests and its parsed
preferences (or the message that refuses them), computed once per pod. The node's admission
(``manager.py``, the built-in CPU and memory plugins) and the NUMA-aware scheduler's judgement
(``placement/model/effective.py``: the filter and score, the over-reserve cache, the extender, the
standalone scheduler, the simulator and ``numaplane explain``) all read it; only the check against a
node's own topology policy (:func:`policy_conflict`) depends on the node.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from numaplane.policy.errors import AdmissionError
from numaplane.resources.pod import Pod, QOSClass
from numaplane.resources.quantity import Quantity

__all__ = [
    "PREFIX",
    "AllocationRequest",
    "InvalidPreferenceError",
    "PodPreferences",
    "allocation_request",
    "parse_preferences",
    "policy_conflict",
    "policy_strictness",
]

PREFIX = "numaplane.io/"
CPU_STRATEGIES = ("packed", "spread-cores", "distribute-numa")
TOPOLOGY_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
SCOPES = ("container", "pod")
ISOLATED = ("none", "prefer", "require", "avoid")
BOOLEANS = {"true": True, "false": False}

_KEYS = {
    "cpu-strategy": CPU_STRATEGIES,
    "topology-policy": TOPOLOGY_POLICIES,
    "topology-scope": SCOPES,
    "full-pcpus": tuple(BOOLEANS),
    "isolated-cpus": ISOLATED,
    "memory-pinning": tuple(BOOLEANS),
}


class InvalidPreferenceError(AdmissionError):
    """A ``numaplane.io/`` annotation is unknown or has an invalid value."""

    reason = "InvalidPreference"


@dataclass(frozen=True, slots=True)
class PodPreferences:
    """Parsed preferences; ``None`` fields mean "node default"."""

    cpu_strategy: str | None = None
    topology_policy: str | None = None
    topology_scope: str | None = None
    full_pcpus: bool | None = None
    isolated_cpus: str = "none"
    memory_pinning: bool | None = None

    @property
    def is_default(self) -> bool:
        return self == PodPreferences()


def policy_strictness(policy: str) -> int:
    """Order of topology policies from laxest (0) to strictest (3)."""
    return TOPOLOGY_POLICIES.index(policy)


def policy_conflict(asked: str | None, node_policy: str) -> str | None:
    """The problem, if a pod asking topology policy ``asked`` would relax the node's ``node_policy``."""
    if (
        asked is not None
        and node_policy in TOPOLOGY_POLICIES
        and policy_strictness(asked) < policy_strictness(node_policy)
    ):
        return (
            f"annotation {PREFIX}topology-policy={asked!r} would relax the node's policy {node_policy!r}; "
            "a pod may only ask for a stricter one"
        )
    return None


def parse_preferences(annotations: Mapping[str, str], node_policy: str = "none") -> PodPreferences:
    """Parse the ``numaplane.io/`` annotations; raise :class:`InvalidPreferenceError` listing every problem."""
    problems: list[str] = []
    values: dict[str, str] = {}
    for key, value in annotations.items():
        if not key.startswith(PREFIX):
            continue
        short = key.removeprefix(PREFIX)
        allowed = _KEYS.get(short)
        if allowed is None:
            problems.append(f"unknown annotation {key!r} (known: {', '.join(PREFIX + k for k in _KEYS)})")
        elif value not in allowed:
            problems.append(f"annotation {key}={value!r}: expected one of {', '.join(allowed)}")
        else:
            values[short] = value
    policy = values.get("topology-policy")
    conflict = policy_conflict(policy, node_policy)
    if conflict is not None:
        problems.append(conflict)
    if values.get("cpu-strategy") == "spread-cores" and values.get("full-pcpus") == "true":
        problems.append("cpu-strategy spread-cores cannot be combined with full-pcpus true")
    if problems:
        raise InvalidPreferenceError("; ".join(problems))
    return PodPreferences(
        cpu_strategy=values.get("cpu-strategy"),
        topology_policy=policy,
        topology_scope=values.get("topology-scope"),
        full_pcpus=BOOLEANS[values["full-pcpus"]] if "full-pcpus" in values else None,
        isolated_cpus=values.get("isolated-cpus", "none"),
        memory_pinning=BOOLEANS[values["memory-pinning"]] if "memory-pinning" in values else None,
    )


@dataclass(frozen=True, slots=True)
class AllocationRequest:
    """What a pod asks of a node's resource managers, from the pod alone (module docstring).

    ``qos``: the QoS class; ``requests``: the pod's effective requests (kube-scheduler's and the
    kubelet's accounting, overhead included); ``preferences``: the parsed ``numaplane.io/``
    annotations, the defaults when ``invalid`` holds the :class:`InvalidPreferenceError` message (a
    pod every node refuses, whatever its state). Whether the asked ``topology-policy`` relaxes a
    node's is the node's question: :meth:`conflict`."""

    qos: QOSClass
    requests: Mapping[str, Quantity]
    preferences: PodPreferences = field(default_factory=PodPreferences)
    invalid: str | None = None

    def conflict(self, node_policy: str) -> str | None:
        """The admission's ``InvalidPreference`` message for a node whose policy is ``node_policy``:
        the annotations' own problem, or a ``topology-policy`` laxer than the node's; ``None`` if valid there."""
        return self.invalid or policy_conflict(self.preferences.topology_policy, node_policy)

    def policy_for(self, node_policy: str) -> str:
        """The topology policy the node admits this pod at (its own when it asks one)."""
        return self.preferences.topology_policy or node_policy

    def scope_for(self, node_scope: str) -> str:
        """The topology scope the node admits this pod at (its own when it asks one)."""
        return self.preferences.topology_scope or node_scope


_MEMO = "_allocation_request"


def allocation_request(pod: Pod) -> AllocationRequest:
    """The pod's :class:`AllocationRequest`, computed once per pod (kept in the pod's ``__dict__``
    with the fields it was computed from, so a pod changed by ``Pod.with_changes`` computes its own)."""
    memo = pod.__dict__.get(_MEMO)
    if (
        memo is not None
        and memo[0] is pod.annotations
        and memo[1] is pod.containers
        and memo[2] is pod.init_containers
        and memo[3] is pod.overhead
        and memo[4] is pod.pod_requests_spec
        and memo[5] is pod.status_qos_class
    ):
        request: AllocationRequest = memo[6]
        return request
    try:
        prefs, invalid = (parse_preferences(pod.annotations) if pod.annotations else PodPreferences()), None
    except InvalidPreferenceError as exc:
        prefs, invalid = PodPreferences(), str(exc)
    request = AllocationRequest(pod.qos_class, pod.effective_requests(), prefs, invalid)
    inputs = (pod.annotations, pod.containers, pod.init_containers, pod.overhead, pod.pod_requests_spec)
    pod.__dict__[_MEMO] = (*inputs, pod.status_qos_class, request)
    return request
