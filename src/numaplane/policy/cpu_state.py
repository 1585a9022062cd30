"""State of the static CPU policy: the shared (default) CPU set and the exclusive assignments.

Plain values, no I/O. The persistent part has the shape of the kubelet's ``cpu_manager_state``
checkpoint, format v2 (kubelet-managers.md E.1)::

    {"policyName": "static", "defaultCpuSet": "0,2-12", "entries": {"<pod uid>": {"<container>": "1,13"}}}

(``entries`` omitted when empty; map keys sorted, as Go's JSON encoder writes them). The ``checksum``
field is computed and verified by the checkpoint adapter, not here; :meth:`CPUState.from_dict` ignores it.

The transient part is the init-container reuse bookkeeping (the kubelet's ``cpusToReuse``, which keeps
only the most recent pod): ``reuse_pod`` and ``reuse``. The kubelet keeps it in memory only; here it
lives in the state so that :meth:`CPUState.copy` and :meth:`CPUState.snapshot` / :meth:`CPUState.restore`
capture a policy's whole decision state exactly.

Invariants are *not* enforced on mutation (the kubelet validates only at ``Start``); ``StaticPolicy.start``
checks them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from numaplane.policy.errors import StateError
from numaplane.topology.cpuset import CPUSet
from numaplane.topology.errors import CPUSetParseError

__all__ = ["CPUState"]

_EMPTY = CPUSet.from_mask(0)


@dataclass(slots=True)
class CPUState:
    """Mutable CPU manager state. ``assignments[pod uid][container name]`` is an exclusive CPU set."""

    default: CPUSet = _EMPTY
    assignments: dict[str, dict[str, CPUSet]] = field(default_factory=dict)
    policy_name: str = "static"
    reuse_pod: str | None = None
    reuse: CPUSet = _EMPTY

    # -- queries ----------------------------------------------------------------------------------
    def get(self, pod_uid: str, container: str) -> CPUSet | None:
        """The container's exclusive set, or ``None`` when it has no assignment."""
        containers = self.assignments.get(pod_uid)
        return None if containers is None else containers.get(container)

    def assigned(self) -> CPUSet:
        """Union of every exclusive assignment."""
        mask = 0
        for containers in self.assignments.values():
            for cpus in containers.values():
                mask |= cpus.mask
        return CPUSet.from_mask(mask)

    def pod_cpus(self, pod_uid: str, *, exclude: str | None = None) -> CPUSet:
        """Union of the pod's assignments, leaving out container ``exclude``."""
        mask = 0
        for name, cpus in self.assignments.get(pod_uid, {}).items():
            if name != exclude:
                mask |= cpus.mask
        return CPUSet.from_mask(mask)

    def reusable(self, pod_uid: str) -> CPUSet:
        """CPUs of this pod's finished init containers that later containers may take again."""
        return self.reuse if self.reuse_pod == pod_uid else _EMPTY

    # -- mutation ---------------------------------------------------------------------------------
    def set(self, pod_uid: str, container: str, cpus: CPUSet) -> None:
        self.assignments.setdefault(pod_uid, {})[container] = cpus

    def delete(self, pod_uid: str, container: str) -> None:
        """Drop the assignment (and the pod entry once it has none left); unknown names are ignored."""
        containers = self.assignments.get(pod_uid)
        if containers is None:
            return
        containers.pop(container, None)
        if not containers:
            del self.assignments[pod_uid]

    def set_reuse(self, pod_uid: str, cpus: CPUSet) -> None:
        """Replace the reuse bookkeeping (only one pod is remembered, as in the kubelet)."""
        self.reuse_pod = pod_uid
        self.reuse = cpus

    # -- copies and serialisation -----------------------------------------------------------------
    def copy(self) -> CPUState:
        """An independent copy (CPU sets are immutable, so only the dicts are copied)."""
        return CPUState(
            default=self.default,
            assignments={pod: dict(containers) for pod, containers in self.assignments.items()},
            policy_name=self.policy_name,
            reuse_pod=self.reuse_pod,
            reuse=self.reuse,
        )

    def to_dict(self) -> dict[str, Any]:
        """The checkpoint document (v2), without ``checksum``."""
        doc: dict[str, Any] = {"policyName": self.policy_name, "defaultCpuSet": self.default.format()}
        entries = {
            pod: {name: cpus.format() for name, cpus in sorted(containers.items())}
            for pod, containers in sorted(self.assignments.items())
        }
        if entries:
            doc["entries"] = entries
        return doc

    @staticmethod
    def from_dict(doc: Mapping[str, Any]) -> CPUState:
        """Read a v2 checkpoint document; raise :class:`StateError` on anything else (v1 needs migration)."""
        if not isinstance(doc, Mapping):
            raise StateError("cpu manager checkpoint must be a JSON object")
        policy = doc.get("policyName", "")
        if not isinstance(policy, str):
            raise StateError("cpu manager checkpoint: policyName must be a string")
        default = _parse(doc.get("defaultCpuSet", ""), "defaultCpuSet")
        raw_entries = doc.get("entries") or {}
        if not isinstance(raw_entries, Mapping):
            raise StateError("cpu manager checkpoint: entries must be an object")
        assignments: dict[str, dict[str, CPUSet]] = {}
        for pod, containers in raw_entries.items():
            if not isinstance(containers, Mapping):
                raise StateError(
                    f"cpu manager checkpoint: entry {pod!r} is not a map of containers "
                    "(a v1 checkpoint keyed by container id needs migration)"
                )
            assignments[str(pod)] = {
                str(name): _parse(cpus, f"entries.{pod}.{name}") for name, cpus in containers.items()
            }
        return CPUState(default=default, assignments=assignments, policy_name=policy)

    def snapshot(self) -> dict[str, Any]:
        """:meth:`to_dict` plus the reuse bookkeeping under ``"reuse"``; JSON-ready."""
        doc = self.to_dict()
        if self.reuse_pod is not None:
            doc["reuse"] = {"podUID": self.reuse_pod, "cpus": self.reuse.format()}
        return doc

    @staticmethod
    def restore(doc: Mapping[str, Any]) -> CPUState:
        """Inverse of :meth:`snapshot`: ``CPUState.restore(s.snapshot()) == s``."""
        state = CPUState.from_dict(doc)
        reuse = doc.get("reuse")
        if isinstance(reuse, Mapping):
            state.reuse_pod = str(reuse.get("podUID", ""))
            state.reuse = _parse(reuse.get("cpus", ""), "reuse.cpus")
        return state


def _parse(text: object, where: str) -> CPUSet:
    if not isinstance(text, str):
        raise StateError(f"cpu manager checkpoint: {where} must be a cpuset string")
    try:
        return CPUSet.parse(text)
    except CPUSetParseError as exc:
        raise StateError(f"cpu manager checkpoint: {where}: {exc}") from exc
