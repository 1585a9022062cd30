"""The take-over switch: a node runs either the kubelet's CPU / Memory Managers or numaplane's, never both.

Before it enforces anything the agent reads the kubelet's configuration — its ``KubeletConfiguration``
file, or the live ``/configz`` answer (``{"kubeletconfig": {...}}``, same field names) — and decides:

* ``cpuManagerPolicy: static`` — the kubelet pins exclusive CPUs itself: two writers of cpusets would
  fight (NRI: "two plugins set CPU pinning" fails container creation; kubelet vs NRI adjustment: the
  last writer wins at random) — **refused**;
* ``memoryManagerPolicy: Static`` — the kubelet pins memory nodes itself — **refused**;
* ``topologyManagerPolicy`` other than ``none`` with both managers off only aligns devices from
  device plugins: allowed, with a warning (numaplane's own topology manager decides for its plugins).

The verdict is also a condition on the agent's own pod (:func:`report_condition`, type
:data:`CONDITION_TYPE`: ``True``/``TakenOver`` or ``False``/``KubeletStaticPolicy`` with the reasons),
written when the agent has API access (``--watch-pods``), so ``kubectl describe pod`` shows why an
agent refused; a refusal is also posted as a ``Warning`` Event on that pod (:func:`post_event`,
reason ``KubeletStaticPolicy``), which ``kubectl get events`` lists for the namespace.
:func:`report_verdict` does both.

A file must be a ``KubeletConfiguration`` (``kind``, and ``apiVersion`` ``kubelet.config.k8s.io/...`` when
given, as the kubelet itself requires): an empty file, a Pod manifest or any other document is an
error, never a verdict. Absent fields take the kubelet's defaults (``none`` / ``None`` / ``none``). :func:`check` gathers the
verdict; :func:`read_kubelet_config` reads a file or a ``/configz`` URL (blocking: used once at
start-up and by ``numaplane agent --check``). Running pods are not touched by the switch: when the
agent starts it adopts the allocations the runtime reports (NRI Synchronize), it does not reallocate.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from numaplane.agent.errors import AgentConfigError
from numaplane.kube.clock import format_time
from numaplane.kube.conditions import condition, find_condition
from numaplane.kube.errors import Conflict, KubeError
from numaplane.kube.events import make_event
from numaplane.kube.kubeletconfig import (
    KIND,
    MAX_KUBELET_CONFIG_BYTES,
    KubeletConfigurationError,
    parse_kubelet_configuration,
    read_kubelet_configuration,
)
from numaplane.kube.port import JsonObj, KubePort
from numaplane.kube.resources import POD

__all__ = [
    "CONDITION_TYPE",
    "TakeoverCheck",
    "check",
    "check_source",
    "post_event",
    "read_kubelet_config",
    "report_condition",
    "report_verdict",
]

CONDITION_TYPE: Final = "numaplane.io/TakeOver"
KUBELET_CONFIG_KIND: Final = KIND


@dataclass(frozen=True)
class TakeoverCheck:
    """What was found and whether the agent may enforce. ``reasons`` explain a refusal."""

    source: str
    cpu_manager_policy: str
    memory_manager_policy: str
    topology_manager_policy: str
    reasons: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    may_take_over: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "may_take_over", not self.reasons)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "kubelet": {
                "cpuManagerPolicy": self.cpu_manager_policy,
                "memoryManagerPolicy": self.memory_manager_policy,
                "topologyManagerPolicy": self.topology_manager_policy,
            },
            "mayTakeOver": self.may_take_over,
            "reasons": list(self.reasons),
            "warnings": list(self.warnings),
        }

    def message(self) -> str:
        """One line for logs, events and the refusal error."""
        if self.may_take_over:
            return f"the kubelet's static managers are off ({self.source}): numaplane enforces"
        return f"refusing to enforce ({self.source}): " + "; ".join(self.reasons)


def _field(doc: Mapping[str, Any], key: str, default: str) -> str:
    value = doc.get(key, default)
    return value if isinstance(value, str) and value else default


def check(doc: Mapping[str, Any], source: str) -> TakeoverCheck:
    """The verdict for one ``KubeletConfiguration`` document (module docstring)."""
    cpu = _field(doc, "cpuManagerPolicy", "none")
    memory = _field(doc, "memoryManagerPolicy", "None")
    topology = _field(doc, "topologyManagerPolicy", "none")
    reasons = []
    warnings = []
    if cpu.lower() == "static":
        reasons.append(
            "the kubelet's CPU manager policy is 'static' (set cpuManagerPolicy: none and remove "
            "/var/lib/kubelet/cpu_manager_state, then restart the kubelet)"
        )
    if memory.lower() == "static":
        reasons.append(
            "the kubelet's Memory Manager policy is 'Static' (set memoryManagerPolicy: None and remove "
            "/var/lib/kubelet/memory_manager_state, then restart the kubelet)"
        )
    if topology != "none" and not reasons:
        warnings.append(
            f"the kubelet's Topology Manager policy is {topology!r}: it still aligns device-plugin devices; "
            "numaplane's topology manager decides for numaplane's plugins"
        )
    return TakeoverCheck(source, cpu, memory, topology, tuple(reasons), tuple(warnings))


def read_kubelet_config(where: str, *, timeout_seconds: float = 5.0) -> tuple[Mapping[str, Any], str]:
    """``(KubeletConfiguration document, source)`` from a file path or an ``http(s)://`` ``/configz`` URL
    (e.g. ``http://127.0.0.1:8001/api/v1/nodes/NODE/proxy/configz`` through ``kubectl proxy``), read by
    the project's one strict reader (:mod:`numaplane.kube.kubeletconfig`; a URL may answer the kubelet's
    ``{"kubeletconfig": ...}`` envelope). Raises :class:`AgentConfigError` naming the source."""
    try:
        if where.startswith(("http://", "https://")):
            with urllib.request.urlopen(where, timeout=timeout_seconds) as answer:
                data = answer.read(MAX_KUBELET_CONFIG_BYTES + 1)
            config = parse_kubelet_configuration(data.decode(), where, envelope=True)
        else:
            config = read_kubelet_configuration(where)
    except KubeletConfigurationError as exc:
        reason = f"{exc.field}: {exc.reason}" if exc.field else exc.reason
        raise AgentConfigError(f"kubelet configuration {where}: {reason}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise AgentConfigError(f"kubelet configuration {where}: {exc}") from None
    return config.document, where


def check_source(where: str) -> TakeoverCheck:
    """:func:`check` of what :func:`read_kubelet_config` reads from ``where``."""
    doc, source = read_kubelet_config(where)
    return check(doc, source)


def _condition(verdict: TakeoverCheck, previous: Mapping[str, Any] | None, now: str) -> dict[str, Any]:
    status = "True" if verdict.may_take_over else "False"
    return condition(CONDITION_TYPE, status, _reason(verdict), verdict.message()[:32768], previous=previous, now=now)


def _reason(verdict: TakeoverCheck) -> str:
    return "TakenOver" if verdict.may_take_over else "KubeletStaticPolicy"


async def report_verdict(
    kube: KubePort, namespace: str, pod_name: str, verdict: TakeoverCheck, now: Any, *, node_name: str = ""
) -> None:
    """The verdict as the pod's condition and as an Event on it; both are tried, the first error raised.
    ``now`` is a ``datetime``; ``node_name`` is the agent's node (the Event's ``source.host`` and
    ``reportingInstance``, which the API server's admission policy compares with the token's node); the
    caller logs the error (best effort)."""
    errors: list[KubeError] = []
    pod: JsonObj | None = None
    try:
        pod = await report_condition(kube, namespace, pod_name, verdict, now)
    except KubeError as error:
        errors.append(error)
    try:
        involved = pod or {"metadata": {"name": pod_name, "namespace": namespace}}
        await post_event(kube, involved, verdict, now, node_name=node_name)
    except KubeError as error:
        errors.append(error)
    if errors:
        raise errors[0]


async def post_event(kube: KubePort, pod: JsonObj, verdict: TakeoverCheck, now: Any, *, node_name: str = "") -> JsonObj:
    """The verdict as an Event on the agent's pod ``pod`` (``Warning`` for a refusal), reported from node
    ``node_name``; the created Event."""
    involved = {"apiVersion": "v1", "kind": "Pod", "metadata": pod.get("metadata") or {}}
    event = make_event(
        involved,
        reason=_reason(verdict),
        message=verdict.message()[:1024],
        now=now,
        event_type="Normal" if verdict.may_take_over else "Warning",
        component="numaplane-agent",
        host=node_name or None,
    )
    return await kube.create_event(event)


async def report_condition(kube: KubePort, namespace: str, pod_name: str, verdict: TakeoverCheck, now: Any) -> JsonObj:
    """Write the verdict as :data:`CONDITION_TYPE` on pod ``namespace/pod_name`` (re-read on conflicts);
    the pod as written. ``now`` is a ``datetime``. Raises the port's errors (the caller logs them)."""
    for _ in range(5):
        pod = await kube.get(POD, pod_name, namespace=namespace)
        status = dict(pod.get("status") or {})
        conditions = [dict(c) for c in status.get("conditions") or []]
        wanted = _condition(verdict, find_condition(conditions, CONDITION_TYPE), format_time(now))
        status["conditions"] = [c for c in conditions if c.get("type") != CONDITION_TYPE] + [wanted]
        try:
            return await kube.update_status(POD, {**pod, "status": status})
        except Conflict:
            continue
    raise Conflict(f"pod {namespace}/{pod_name}: status kept changing")
