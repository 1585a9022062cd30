"""Status of the custom resources, computed purely: conditions and per-node policy states.

Conditions (metav1.Condition shape). The base four are written together: exactly one of
``Available``, ``Progressing`` and ``Degraded`` is ``True``; ``Upgradeable`` is ``True`` exactly when
``Available`` is. A ``False`` condition's reason is its own type name, as upstream does, so the
active condition carries the story. ``lastTransitionTime`` changes only when a condition's status
changes; :func:`same_status` ignores it, so an unchanged state writes nothing.

Agent policy reports (the contract with ``numaplane agent``): the agent sets, on its own pod, the
condition :data:`POLICY_CONDITION` with ``status`` ``True`` (reason ``Applied``) or ``False`` (reason
``Rejected``) and ``message`` ``"revision <rev>"`` or ``"revision <rev>: <why>"``, where ``<rev>`` is
``metadata.revision`` of the config document it applied or rejected.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from numaplane.kube.conditions import condition
from numaplane.operator.api.meta import GROUP

__all__ = [
    "BASE_CONDITIONS",
    "POLICY_CONDITION",
    "NodePolicyState",
    "Phase",
    "State",
    "conditions",
    "node_policy_state",
    "same_status",
]

BASE_CONDITIONS = ("Available", "Progressing", "Degraded", "Upgradeable")
POLICY_CONDITION = f"{GROUP}/PolicyApplied"


class Phase(enum.StrEnum):
    AVAILABLE = "Available"
    PROGRESSING = "Progressing"
    DEGRADED = "Degraded"


@dataclass(frozen=True, slots=True)
class State:
    """The resource's overall state: which base condition is True, and why."""

    phase: Phase
    reason: str = ""
    message: str = ""

    @classmethod
    def available(cls, message: str = "") -> State:
        return cls(Phase.AVAILABLE, "Available", message)

    @classmethod
    def progressing(cls, reason: str, message: str) -> State:
        return cls(Phase.PROGRESSING, reason, message)

    @classmethod
    def degraded(cls, reason: str, message: str) -> State:
        return cls(Phase.DEGRADED, reason, message)


def conditions(previous: Sequence[Mapping[str, Any]], state: State, generation: int, now: str) -> list[dict[str, Any]]:
    """The base conditions for ``state``, keeping other condition types and unchanged transition times."""
    old = {str(c.get("type")): c for c in previous}
    wanted: dict[str, tuple[str, str, str]] = {}
    for ctype in BASE_CONDITIONS[:3]:
        if ctype == state.phase.value:
            wanted[ctype] = ("True", state.reason or ctype, state.message)
        else:
            wanted[ctype] = ("False", ctype, "")
    if state.phase is Phase.AVAILABLE:
        wanted["Upgradeable"] = ("True", "Upgradeable", "")
    else:
        wanted["Upgradeable"] = ("False", "Upgradeable", "")
    out: list[dict[str, Any]] = []
    for ctype in BASE_CONDITIONS:
        status, reason, message = wanted[ctype]
        out.append(
            condition(ctype, status, reason, message, previous=old.get(ctype), now=now, observedGeneration=generation)
        )
    out += [dict(c) for t, c in old.items() if t not in BASE_CONDITIONS]
    return out


def _strip_times(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _strip_times(v) for k, v in value.items() if k != "lastTransitionTime"}
    if isinstance(value, list):
        return [_strip_times(v) for v in value]
    return value


def same_status(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Equal apart from ``lastTransitionTime`` values."""
    return bool(_strip_times(a or {}) == _strip_times(b or {}))


class NodePolicyState(enum.StrEnum):
    APPLIED = "Applied"
    PENDING = "Pending"
    REJECTED = "Rejected"


def parse_policy_condition(pod: Mapping[str, Any]) -> tuple[bool, str, str] | None:
    """``(applied, revision, why)`` from an agent pod's :data:`POLICY_CONDITION`, if it has one."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") != POLICY_CONDITION:
            continue
        message = str(cond.get("message", ""))
        if not message.startswith("revision "):
            return None
        revision, _, why = message[len("revision ") :].partition(": ")
        return cond.get("status") == "True", revision.strip(), why
    return None


def node_policy_state(pod: Mapping[str, Any], revision: str) -> tuple[NodePolicyState, str, str]:
    """``(state, reported revision, message)`` of one agent pod against the desired ``revision``."""
    report = parse_policy_condition(pod)
    if report is None:
        return NodePolicyState.PENDING, "", "the agent has not reported a policy yet"
    applied, reported, why = report
    if reported != revision:
        return NodePolicyState.PENDING, reported, f"the agent still runs revision {reported or '?'}"
    if applied:
        return NodePolicyState.APPLIED, reported, ""
    return NodePolicyState.REJECTED, reported, why or "rejected"


def policy_nodes(pods: Iterable[Mapping[str, Any]], revision: str) -> list[dict[str, Any]]:
    """``status.nodes`` entries (sorted by node) from the group's agent pods (unscheduled pods skipped).

    One entry per node (``name`` is the list's map key: the API server refuses a duplicate): while a
    DaemonSet replaces an agent pod the old one (being deleted, or terminated) and the new one are
    both on the node; the node's entry is the pod neither being deleted nor ended, else the newest."""
    current: dict[str, Mapping[str, Any]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and (node not in current or _newer(pod, current[node])):
            current[node] = pod
    out = []
    for node, pod in current.items():
        state, reported, message = node_policy_state(pod, revision)
        entry: dict[str, Any] = {"name": node, "state": state.value}
        if reported:
            entry["revision"] = reported
        if message:
            entry["message"] = message
        out.append(entry)
    return sorted(out, key=lambda e: str(e["name"]))


def _newer(pod: Mapping[str, Any], than: Mapping[str, Any]) -> bool:
    """Whether ``pod`` speaks for its node rather than ``than``: not being deleted first, then newer."""

    def rank(p: Mapping[str, Any]) -> tuple[bool, str]:
        meta = p.get("metadata") or {}
        ended = (p.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        return (not meta.get("deletionTimestamp") and not ended, str(meta.get("creationTimestamp") or ""))

    return rank(pod) > rank(than)
