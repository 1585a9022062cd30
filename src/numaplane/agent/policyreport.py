"""Report which policy revision the agent applied or rejected, as a condition on its own pod.

The contract with the operator (``numaplane.operator.status``, which fills ``NodeResourcePolicy``
``status.nodes`` from it): condition type :data:`CONDITION_TYPE` with ``status`` ``"True"`` and reason
``Applied``, or ``"False"`` and reason ``Rejected``; ``message`` is ``"revision <rev>"`` or
``"revision <rev>: <why>"``, where ``<rev>`` is ``metadata.revision`` of the config document (the
operator writes it into the ConfigMap the agent reads). Documents without a revision (a hand-written
``--config`` file) are not reported. Components do not import each other, so the condition type is
spelled here too; ``tests/agent/test_agent_policy_report.py`` checks it against the operator's.

Writes happen in a background task, never on the NRI path: read the pod, replace only this
condition (``lastTransitionTime`` moves only when the status flips), write the status back with the
read ``resourceVersion``. A conflict re-reads at once; any other API error is logged and retried
with a back-off (``retry_initial_seconds`` doubling to ``retry_max_seconds``). Reports are coalesced:
only the latest one is ever written. Needs ``get`` on ``pods`` and ``update`` on ``pods/status``
(the agent's RBAC grants both).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import structlog

from numaplane.agent.background import BackgroundLoop
from numaplane.kube.clock import Clock, SystemClock, format_time
from numaplane.kube.conditions import condition
from numaplane.kube.errors import Conflict, KubeError
from numaplane.kube.port import KubePort
from numaplane.kube.resources import POD

__all__ = ["CONDITION_TYPE", "PolicyReport", "PolicyReporter", "document_revision"]

log = structlog.get_logger("numaplane.agent")

CONDITION_TYPE: Final = "numaplane.io/PolicyApplied"


def document_revision(doc: Mapping[str, Any] | None) -> str | None:
    """``metadata.revision`` of a config document, if it has a non-empty one."""
    meta = (doc or {}).get("metadata")
    revision = meta.get("revision") if isinstance(meta, Mapping) else None
    return str(revision) if revision not in (None, "") else None


@dataclass(frozen=True, slots=True)
class PolicyReport:
    """One report: the revision, whether it is in force, and why not."""

    revision: str
    applied: bool
    why: str = ""

    def condition(self, previous: Mapping[str, Any] | None, now: str) -> dict[str, Any]:
        status = "True" if self.applied else "False"
        message = f"revision {self.revision}" + ("" if self.applied or not self.why else f": {self.why}")
        reason = "Applied" if self.applied else "Rejected"
        return condition(CONDITION_TYPE, status, reason, message[:32768], previous=previous, now=now)


class PolicyReporter(BackgroundLoop):
    """Writes :class:`PolicyReport` values onto pod ``namespace/pod_name`` (see the module docstring)."""

    task_name = "policy-reporter"

    def __init__(
        self,
        kube: KubePort,
        namespace: str,
        pod_name: str,
        *,
        clock: Clock | None = None,
        retry_initial_seconds: float = 0.2,
        retry_max_seconds: float = 10.0,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.pod_name = pod_name
        self.clock: Clock = clock or SystemClock()
        self.retry_initial_seconds = retry_initial_seconds
        self.retry_max_seconds = retry_max_seconds
        self.written: PolicyReport | None = None
        self._wanted: PolicyReport | None = None
        self._wake = asyncio.Event()

    def report(self, doc: Mapping[str, Any] | None, applied: bool, why: str = "") -> None:
        """Report the document's revision as applied or rejected (no-op without a revision)."""
        revision = document_revision(doc)
        if revision is None:
            return
        self._wanted = PolicyReport(revision, applied, why)
        self._wake.set()

    async def _run(self) -> None:
        delay = self.retry_initial_seconds
        while True:
            await self._wake.wait()
            self._wake.clear()
            wanted = self._wanted
            if wanted is None or wanted == self.written:
                continue
            try:
                await self._write(wanted)
            except KubeError as exc:
                log.warning("cannot report the policy on the agent's pod; retrying", error=str(exc), seconds=delay)
                await self.clock.sleep(delay)
                delay = min(delay * 2, self.retry_max_seconds)
                self._wake.set()
                continue
            delay = self.retry_initial_seconds
            self.written = wanted

    async def _write(self, report: PolicyReport) -> None:
        for _ in range(5):  # conflicts: someone (the kubelet) wrote the status in between; read again
            pod = await self.kube.get(POD, self.pod_name, namespace=self.namespace)
            status = dict(pod.get("status") or {})
            conditions = [dict(c) for c in status.get("conditions") or []]
            previous = next((c for c in conditions if c.get("type") == CONDITION_TYPE), None)
            wanted = report.condition(previous, format_time(self.clock.now()))
            if previous is not None and previous == wanted:
                return
            status["conditions"] = [c for c in conditions if c.get("type") != CONDITION_TYPE] + [wanted]
            try:
                await self.kube.update_status(POD, {**pod, "status": status})
            except Conflict:
                continue
            log.info("policy reported", revision=report.revision, applied=report.applied)
            return
        raise Conflict(f"pod {self.namespace}/{self.pod_name}: status kept changing")
