"""Translation between NRI's protobuf messages and the agent's plain values (``nri/events.py``).

Inbound: :func:`sandbox_from_pb` and :func:`container_from_pb` copy what the agent reads (ids, names,
annotations, cgroup parent, state, Linux CPU/memory/hugepage resources) into frozen values; a wrapped
scalar the runtime did not send becomes ``None``. Outbound: :func:`update_to_pb` and :func:`linux_cpu`
build the messages that carry the agent's cpuset decisions. Pure: no I/O.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from numaplane.nri.events import CgroupResources, ContainerState, CpusetUpdate, RuntimeContainer, Sandbox, cpuset_text
from numaplane.nri.proto import api_pb2
from numaplane.topology.cpuset import CPUSet

__all__ = ["container_from_pb", "linux_cpu", "sandbox_from_pb", "update_to_pb"]


def _opt(msg: Any, name: str) -> int | None:
    return int(getattr(msg, name).value) if msg.HasField(name) else None


def sandbox_from_pb(pod: api_pb2.PodSandbox) -> Sandbox:
    """The :class:`Sandbox` of a ``PodSandbox`` message."""
    return Sandbox(
        id=pod.id,
        uid=pod.uid,
        name=pod.name,
        namespace=pod.namespace,
        annotations=MappingProxyType(dict(pod.annotations)),
        cgroup_parent=pod.linux.cgroup_parent,
    )


def container_from_pb(container: api_pb2.Container) -> RuntimeContainer:
    """The :class:`RuntimeContainer` of a ``Container`` message (a state number NRI may add later
    reads as UNKNOWN, which counts as live)."""
    res = container.linux.resources
    has_cpu = res.HasField("cpu")
    try:
        state = ContainerState(int(container.state))
    except ValueError:
        state = ContainerState.UNKNOWN
    return RuntimeContainer(
        id=container.id,
        pod_sandbox_id=container.pod_sandbox_id,
        name=container.name,
        state=state,
        resources=CgroupResources(
            cpu_shares=_opt(res.cpu, "shares") if has_cpu else None,
            cpu_quota=_opt(res.cpu, "quota") if has_cpu else None,
            cpu_period=_opt(res.cpu, "period") if has_cpu else None,
            memory_limit=_opt(res.memory, "limit") if res.HasField("memory") else None,
            cpus=res.cpu.cpus if has_cpu else "",
            mems=res.cpu.mems if has_cpu else "",
            hugepage_limits=tuple((hp.page_size, int(hp.limit)) for hp in res.hugepage_limits),
        ),
    )


def linux_cpu(cpus: CPUSet, mems: CPUSet | None) -> api_pb2.LinuxCPU:
    """The ``LinuxCPU`` that sets ``cpuset.cpus`` (and ``cpuset.mems`` unless ``None``)."""
    if mems is None:
        return api_pb2.LinuxCPU(cpus=cpuset_text(cpus))
    return api_pb2.LinuxCPU(cpus=cpuset_text(cpus), mems=cpuset_text(mems))


def update_to_pb(update: CpusetUpdate) -> api_pb2.ContainerUpdate:
    """The ``ContainerUpdate`` of one cpuset decision (failures ignored: the container may have gone meanwhile)."""
    return api_pb2.ContainerUpdate(
        container_id=update.container_id,
        ignore_failure=True,
        linux=api_pb2.LinuxContainerUpdate(resources=api_pb2.LinuxResources(cpu=linux_cpu(update.cpus, update.mems))),
    )
