"""The resource manager's admissions as the agent's state machine asks for them, parked ones included.

:class:`ManagerAdmissions` wraps a :class:`~numaplane.policy.manager.ResourceManager`: it admits a pod
(answering the asks of in-process plugins at once), parks an admission that waits for out-of-process
plugins (``parked``, by manager pod uid; the call gets a :class:`~numaplane.agent.records.Pending`
value) and refuses the call that waited for an abandoned one; it
admits a container alone (the one-at-a-time path of ``containers.py``) and reads what an admission
gave a container (pinned memory nodes, environment). It holds no container registry: that is
:class:`~numaplane.agent.state.NodeAgentState`'s. No I/O.
"""

from __future__ import annotations

from numaplane.agent.containers import ContainerInfo
from numaplane.agent.errors import AdmissionRejected
from numaplane.agent.records import ContainerRecord, Pending
from numaplane.policy.asks import AdmissionRun, answer_in_process, answers_in_process
from numaplane.policy.errors import AdmissionError
from numaplane.policy.manager import Admission, ResourceManager
from numaplane.policy.preferences import parse_preferences
from numaplane.resources.pod import Pod
from numaplane.topology.cpuset import CPUSet

__all__ = ["ManagerAdmissions"]


_ABANDONED = "the admission was abandoned while plugins were asked"


class ManagerAdmissions:
    """Admissions of one resource manager. Only CreateContainer and RUN_POD_SANDBOX may wait for
    plugins' answers (``park=True``); elsewhere such an admission is refused at once."""

    def __init__(self, manager: ResourceManager) -> None:
        self.manager = manager
        # admissions waiting for out-of-process plugins' answers, by manager pod (see admit)
        self.parked: dict[str, AdmissionRun[Admission]] = {}

    def admit_alone(self, info: ContainerInfo, *, park: bool = False) -> ContainerRecord | Pending[ContainerRecord]:
        """Admit ``info`` alone (raises :class:`AdmissionRejected`); the record is not registered yet.
        With ``park``, an admission waiting for out-of-process plugins comes back :class:`Pending`."""
        record = ContainerRecord(
            container_id=info.container_id,
            sandbox_id=info.sandbox_id,
            pod_uid=info.pod_uid,
            pod_name=info.pod_name,
            namespace=info.namespace,
            name=info.name,
            qos=info.qos,
        )
        where = {"pod": f"{info.namespace}/{info.pod_name}", "container": info.name}
        if not info.needs_manager:
            if info.preferences:
                try:
                    parse_preferences(info.preferences, self.manager.config.topology_policy)
                except AdmissionError as exc:
                    raise AdmissionRejected(exc.reason, exc.message, **where) from None
            return record
        admission = self.admit(info.pod, where, park=park)
        if isinstance(admission, Pending):
            pending = admission
            return Pending(pending.run, lambda: self._fill(record, pending.resume()))
        return self._fill(record, admission)

    @staticmethod
    def _fill(record: ContainerRecord, admission: Admission) -> ContainerRecord:
        """``record`` with what ``admission`` gave its one container."""
        record.managed = True
        (container,) = admission.containers
        record.exclusive = container.exclusive_cpus  # whichever plugin gave them
        numa = container.memory_numa
        if numa:
            record.mems = CPUSet(numa)
        return record

    def admit(self, pod: Pod, where: dict[str, str], *, park: bool = False) -> Admission | Pending[Admission]:
        """The manager's admission of ``pod``, a rejection raised as :class:`AdmissionRejected` (nothing held then).

        Asks of in-process plugins are answered here. An admission that asks an out-of-process plugin
        is *parked* (``parked[pod uid]``) and returned as :class:`Pending` when ``park`` (CreateContainer,
        RUN_POD_SANDBOX): once its run is answered, ``resume()`` (:meth:`finish`) gives the decision. A
        call that meets a parked admission of the same pod waits for that run too. Without ``park``
        (Synchronize, retries of waiting containers) such an admission is given up and refused with
        ``PluginUnavailable``.
        """
        parked = self.parked.get(pod.uid)
        if parked is not None:
            if not park:
                raise AdmissionRejected("PluginUnavailable", "its admission waits for out-of-process plugins", **where)
            return Pending(parked, lambda: self.finish(parked, pod.uid, where))
        run: AdmissionRun[Admission] | None = None
        try:
            run = self.manager.begin(pod)
            plugins = {p.name: p for p in self.manager.plugins}
            while not run.done and all(answers_in_process(plugins[a.plugin]) for a in run.asks):
                run.answer([answer_in_process(plugins, a) for a in run.asks])
        except AdmissionError as exc:
            raise AdmissionRejected(exc.reason, exc.message, **where) from None
        except Exception as exc:  # a plugin bug must not take the agent down; the pod is refused
            if run is not None:
                run.abort()
            raise AdmissionRejected("UnexpectedAdmissionError", f"{type(exc).__name__}: {exc}", **where) from None
        if not run.done:
            if not park:
                run.abort()
                names = sorted({a.plugin for a in run.asks} or {"?"})
                message = f"plugin(s) {', '.join(names)} run out of process and are asked only at creation"
                raise AdmissionRejected("PluginUnavailable", message, **where)
            self.parked[pod.uid] = run
            done = run
            return Pending(done, lambda: self.finish(done, pod.uid, where))
        return self._decided(run, where)

    def finish(self, run: AdmissionRun[Admission], pod_uid: str, where: dict[str, str]) -> Admission:
        """The decision of the parked ``run``, now answered (it leaves ``parked``); a run given up
        meanwhile (:meth:`abandon`: its pod went, or its caller) is refused with ``PluginUnavailable``."""
        if self.parked.get(pod_uid) is not run:
            raise AdmissionRejected("PluginUnavailable", _ABANDONED, **where)
        del self.parked[pod_uid]
        return self._decided(run, where)

    @staticmethod
    def _decided(run: AdmissionRun[Admission], where: dict[str, str]) -> Admission:
        admission = run.result
        if admission is None:
            raise AdmissionRejected("PluginUnavailable", _ABANDONED, **where)
        if not admission.admitted:
            where = {**where, "container": admission.container or where.get("container", "")}
            raise AdmissionRejected(admission.reason, admission.message, **where)
        return admission

    def abandon(self, pod_uid: str) -> bool:
        """Give up the parked admission of ``pod_uid`` (its pod went, or its caller): what it holds is
        released, and a call still waiting for it is refused when it resumes. Whether there was one."""
        run = self.parked.pop(pod_uid, None)
        if run is not None:
            run.abort()
            return True
        return False

    def mems(self, pod_uid: str, name: str) -> CPUSet | None:
        admission = self.manager.admissions.get(pod_uid)
        if admission is not None:
            for c in admission.containers:
                if c.name == name:
                    numa = c.memory_numa
                    return CPUSet(numa) if numa else None
        return None

    def env(self, record: ContainerRecord) -> tuple[tuple[str, str], ...]:
        """Environment the plugins asked for this container (``PluginAllocation.extra["env"]``): a
        vendor plugin's allocation is enforced through the same NRI adjustment as the cpuset. The
        manager knows the container under its own key, or under its pod's uid when admitted whole."""
        admissions = self.manager.admissions
        admission = admissions.get(record.key) if record.key in admissions else admissions.get(record.pod_uid)
        env: dict[str, str] = {}
        if admission is not None:
            for c in admission.containers:
                if c.name == record.name:
                    for alloc in c.allocations:
                        wanted = alloc.extra.get("env")
                        if isinstance(wanted, dict):
                            env.update({str(k): str(v) for k, v in wanted.items()})
        return tuple(sorted(env.items()))
