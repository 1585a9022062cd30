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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from numaplane.policy.errors import AdmissionError

__all__ = ["PREFIX", "InvalidPreferenceError", "PodPreferences", "parse_preferences", "policy_strictness"]

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
    if (
        policy is not None
        and node_policy in TOPOLOGY_POLICIES
        and policy_strictness(policy) < policy_strictness(node_policy)
    ):
        problems.append(
            f"annotation {PREFIX}topology-policy={policy!r} would relax the node's policy {node_policy!r}; "
            "a pod may only ask for a stricter one"
        )
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
