"""What the agent's state machine records and answers: container records and decisions (plain values).

:class:`ContainerRecord` is one container the agent tracks (with its JSON form for the checkpoint);
:class:`CreateDecision`, :class:`PodStarted` and :class:`SyncResult` are what the calls of
:class:`~numaplane.agent.state.NodeAgentState` answer, or :class:`Pending` when an admission waits for
out-of-process plugins; cpuset changes travel as :class:`~numaplane.nri.events.CpusetUpdate`. No I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from numaplane.agent.errors import AdmissionRejected
from numaplane.nri.events import CpusetUpdate
from numaplane.policy.asks import AdmissionRun
from numaplane.policy.manager import Admission
from numaplane.resources.pod import Pod
from numaplane.topology.cpuset import CPUSet

__all__ = ["ContainerRecord", "CreateDecision", "Pending", "PodLookup", "PodStarted", "SyncResult", "settled"]

_T = TypeVar("_T")
_T_co = TypeVar("_T_co", covariant=True)

#: pod uid → the Pod from the Kubernetes API (or ``None`` when unknown).
PodLookup = Callable[[str], Pod | None]


@dataclass(frozen=True, slots=True)
class CreateDecision:
    """The answer to one CreateContainer: the new container's cpuset and updates of others."""

    cpus: CPUSet
    mems: CPUSet | None
    exclusive: bool
    updates: tuple[CpusetUpdate, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # from the plugins' allocations (``extra["env"]``), sorted


@dataclass(frozen=True, slots=True)
class Pending(Generic[_T_co]):
    """A call whose admission waits for out-of-process plugins: the answer is ``resume()``, once
    ``run``'s asks are answered (``policy/asks.py``; the agent's runner does it, ``asking.py``).

    ``resume`` continues the call from where it parked — it takes the run's decision and finishes
    (binds, registers, decides); it never parks again and never repeats what came before. It raises
    :class:`AdmissionRejected` when the run rejected the pod or was given up meanwhile (its pod went).
    Several calls may wait for one run (RUN_POD_SANDBOX and the pod's first CreateContainer): the first
    to resume takes the decision, the others find its result (the pod entry, the container record).
    """

    run: AdmissionRun[Admission]
    resume: Callable[[], _T_co]


def settled(result: _T | Pending[_T]) -> _T:
    """The result of a call made without ``park`` (it refuses instead of parking, so never :class:`Pending`)."""
    assert not isinstance(result, Pending), "an admission without park never parks"
    return result


@dataclass(frozen=True, slots=True)
class SyncResult:
    """What :meth:`NodeAgentState.synchronize` did. ``failed`` lists ``(container id, reason, message)``."""

    updates: tuple[CpusetUpdate, ...]
    adopted: tuple[str, ...]
    dropped: tuple[str, ...]
    failed: tuple[tuple[str, str, str], ...]


@dataclass(frozen=True, slots=True)
class PodStarted:
    """What :meth:`NodeAgentState.run_pod` did: ``admitted`` when the pod was admitted as a whole now;
    ``rejection`` when that admission failed (it is retried, and reported, at CreateContainer)."""

    updates: tuple[CpusetUpdate, ...] = ()
    admitted: bool = False
    rejection: AdmissionRejected | None = None


@dataclass
class ContainerRecord:
    """A container the agent tracks. ``applied`` is the cpuset string the runtime was last told.

    ``whole_pod``: admitted with its whole pod (manager pod = ``pod_uid``), else one at a time
    (manager pod = :attr:`key`, when ``managed``). ``stopped``: a one-at-a-time container that
    stopped; it keeps its allocation (the kubelet's rule: an allocation is keyed by pod uid and
    container name and lives until the container is removed or its sandbox stops), so a restart
    of the container under the same pod and name gets it again.
    """

    container_id: str
    sandbox_id: str
    pod_uid: str
    pod_name: str
    namespace: str
    name: str
    qos: str
    managed: bool = False
    exclusive: CPUSet | None = None
    mems: CPUSet | None = None
    applied: str = ""
    adjusted: bool = False
    error: str = ""
    whole_pod: bool = False
    stopped: bool = False

    @property
    def key(self) -> str:
        return f"{self.pod_uid}/{self.name}"

    @property
    def unadmitted(self) -> bool:
        """A running container Synchronize could not admit (a placeholder in the shared pool)."""
        return bool(self.error) and not self.error.startswith("Released:") and not self.managed

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "id": self.container_id,
            "sandbox": self.sandbox_id,
            "podUID": self.pod_uid,
            "pod": self.pod_name,
            "namespace": self.namespace,
            "name": self.name,
            "qos": self.qos,
            "managed": self.managed,
            "applied": self.applied,
        }
        if self.exclusive is not None:
            doc["exclusive"] = self.exclusive.format()
        if self.mems is not None:
            doc["mems"] = self.mems.format()
        if self.error:
            doc["error"] = self.error
        if self.whole_pod:
            doc["wholePod"] = True
        if self.stopped:
            doc["stopped"] = True
        return doc

    @staticmethod
    def from_dict(doc: Mapping[str, Any]) -> ContainerRecord:
        exclusive = doc.get("exclusive")
        mems = doc.get("mems")
        return ContainerRecord(
            container_id=str(doc["id"]),
            sandbox_id=str(doc.get("sandbox", "")),
            pod_uid=str(doc["podUID"]),
            pod_name=str(doc.get("pod", "")),
            namespace=str(doc.get("namespace", "")),
            name=str(doc["name"]),
            qos=str(doc.get("qos", "")),
            managed=bool(doc.get("managed", False)),
            exclusive=None if exclusive is None else CPUSet.parse(str(exclusive)),
            mems=None if mems is None else CPUSet.parse(str(mems)),
            applied=str(doc.get("applied", "")),
            error=str(doc.get("error", "")),
            whole_pod=bool(doc.get("wholePod", False)),
            stopped=bool(doc.get("stopped", False)),
        )
