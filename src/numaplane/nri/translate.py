"""The one translation between NRI's protobuf messages and the plain values of ``nri/events.py``.

Every protobuf a plugin receives or sends passes here and nowhere else on the plugin's side: the stub
(``nri/stub.py``) decodes each ``Plugin`` request into values, calls the handler, and encodes its answer
with these functions; the plugin runtime (``nri/plugin.py``) encodes its ``Runtime`` calls
(RegisterPlugin, UpdateContainers) with them too. Handlers never see a protobuf.

Inbound: a wrapped scalar the runtime did not send becomes ``None``, an absent message an empty value;
an undecodable payload raises :class:`~numaplane.nri.errors.StatusError` INVALID_ARGUMENT. Outbound:
the messages carry exactly what the values say (the wire form of the agent's answers is fixed by the
tests over ``wire/captures``). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from types import MappingProxyType
from typing import TypeVar

from google.protobuf.message import DecodeError, Message

from numaplane.nri.errors import StatusCode, StatusError
from numaplane.nri.events import (
    Adjustment,
    CgroupResources,
    ContainerState,
    CpusetUpdate,
    RuntimeContainer,
    RuntimeInfo,
    Sandbox,
    SyncPart,
    cpuset_text,
)
from numaplane.nri.proto import api_pb2
from numaplane.topology.cpuset import CPUSet

__all__ = [
    "EMPTY",
    "configure_from_pb",
    "configure_to_pb",
    "container_from_pb",
    "container_update_pb",
    "create_from_pb",
    "create_to_pb",
    "empty_from_pb",
    "failed_from_pb",
    "linux_cpu",
    "parse_message",
    "register_to_pb",
    "resources_from_pb",
    "sandbox_from_pb",
    "state_change_from_pb",
    "stop_from_pb",
    "stop_to_pb",
    "synchronize_from_pb",
    "synchronize_to_pb",
    "update_container_to_pb",
    "update_containers_to_pb",
    "update_from_pb",
]

#: The encoding of ``Empty`` (StateChange and Shutdown answers).
EMPTY = b""

_M = TypeVar("_M", bound=Message)


def parse_message(cls: type[_M], payload: bytes) -> _M:
    """Decode ``payload`` as ``cls``; an undecodable payload raises INVALID_ARGUMENT (:class:`StatusError`)."""
    msg = cls()
    try:
        msg.ParseFromString(payload)
    except DecodeError as exc:
        raise StatusError(StatusCode.INVALID_ARGUMENT, f"undecodable {cls.__name__}: {exc}") from None
    return msg


# -- values from messages -------------------------------------------------------------------------------


_STATES = tuple(ContainerState)  # by NRI's number


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


def resources_from_pb(res: api_pb2.LinuxResources) -> CgroupResources:
    """The :class:`CgroupResources` of a ``LinuxResources`` message (``cpus``/``mems`` empty without ``cpu``).

    On the CreateContainer path: each submessage is read once, each wrapper tested with ``HasField``."""
    if res.HasField("cpu"):
        cpu = res.cpu
        shares = cpu.shares.value if cpu.HasField("shares") else None
        quota = cpu.quota.value if cpu.HasField("quota") else None
        period = cpu.period.value if cpu.HasField("period") else None
        cpus, mems = cpu.cpus, cpu.mems
    else:
        shares = quota = period = None
        cpus = mems = ""
    memory = res.memory.limit.value if res.HasField("memory") and res.memory.HasField("limit") else None
    pages = res.hugepage_limits
    return CgroupResources(
        shares, quota, period, memory, cpus, mems, tuple((hp.page_size, hp.limit) for hp in pages) if pages else ()
    )


def container_from_pb(container: api_pb2.Container) -> RuntimeContainer:
    """The :class:`RuntimeContainer` of a ``Container`` message (a state number NRI may add later
    reads as UNKNOWN, which counts as live)."""
    number = container.state
    return RuntimeContainer(
        container.id,
        container.pod_sandbox_id,
        container.name,
        _STATES[number] if 0 <= number < len(_STATES) else ContainerState.UNKNOWN,
        resources_from_pb(container.linux.resources),
    )


# -- messages from values -------------------------------------------------------------------------------


def linux_cpu(cpus: CPUSet, mems: CPUSet | None) -> api_pb2.LinuxCPU:
    """The ``LinuxCPU`` that sets ``cpuset.cpus`` (and ``cpuset.mems`` unless ``None``)."""
    if mems is None:
        return api_pb2.LinuxCPU(cpus=cpuset_text(cpus))
    return api_pb2.LinuxCPU(cpus=cpuset_text(cpus), mems=cpuset_text(mems))


def container_update_pb(update: CpusetUpdate) -> api_pb2.ContainerUpdate:
    """The ``ContainerUpdate`` of one cpuset decision (failures ignored: the container may have gone meanwhile)."""
    return api_pb2.ContainerUpdate(
        container_id=update.container_id,
        ignore_failure=True,
        linux=api_pb2.LinuxContainerUpdate(resources=api_pb2.LinuxResources(cpu=linux_cpu(update.cpus, update.mems))),
    )


# -- the Plugin service: one decoder per request, one encoder per answer ---------------------------------


def configure_from_pb(payload: bytes) -> RuntimeInfo:
    msg = parse_message(api_pb2.ConfigureRequest, payload)
    return RuntimeInfo(msg.config, msg.runtime_name, msg.runtime_version)


def configure_to_pb(events: int) -> bytes:
    """``ConfigureResponse``: subscribe to the ``events`` bits."""
    return api_pb2.ConfigureResponse(events=events).SerializeToString()


def synchronize_from_pb(payload: bytes) -> SyncPart:
    msg = parse_message(api_pb2.SynchronizeRequest, payload)
    return SyncPart(
        tuple(sandbox_from_pb(p) for p in msg.pods), tuple(container_from_pb(c) for c in msg.containers), msg.more
    )


def synchronize_to_pb(updates: Iterable[CpusetUpdate], more: bool = False) -> bytes:
    """``SynchronizeResponse``: the updates (none for a part flagged ``more``, which is answered ``more``)."""
    return api_pb2.SynchronizeResponse(update=[container_update_pb(u) for u in updates], more=more).SerializeToString()


def create_from_pb(payload: bytes) -> tuple[Sandbox, RuntimeContainer]:
    msg = parse_message(api_pb2.CreateContainerRequest, payload)
    return sandbox_from_pb(msg.pod), container_from_pb(msg.container)


def create_to_pb(adjust: Adjustment, updates: Sequence[CpusetUpdate]) -> bytes:
    """``CreateContainerResponse``: the adjustment (cpuset, then environment) and the updates, in order."""
    response = api_pb2.CreateContainerResponse()
    if adjust.cpus is not None:
        response.adjust.linux.resources.cpu.CopyFrom(linux_cpu(adjust.cpus, adjust.mems))
    for key, value in adjust.env:
        response.adjust.env.add(key=key, value=value)
    response.update.extend(container_update_pb(u) for u in updates)
    return response.SerializeToString()


def update_from_pb(payload: bytes) -> tuple[Sandbox, RuntimeContainer, CgroupResources]:
    """UpdateContainer: the pod, the container, and the resources the runtime is asked to set."""
    msg = parse_message(api_pb2.UpdateContainerRequest, payload)
    return sandbox_from_pb(msg.pod), container_from_pb(msg.container), resources_from_pb(msg.linux_resources)


def update_container_to_pb(updates: Iterable[CpusetUpdate]) -> bytes:
    """``UpdateContainerResponse`` with ``updates`` in order."""
    return api_pb2.UpdateContainerResponse(update=[container_update_pb(u) for u in updates]).SerializeToString()


def stop_from_pb(payload: bytes) -> tuple[Sandbox, RuntimeContainer]:
    msg = parse_message(api_pb2.StopContainerRequest, payload)
    return sandbox_from_pb(msg.pod), container_from_pb(msg.container)


def stop_to_pb(updates: Iterable[CpusetUpdate]) -> bytes:
    """``StopContainerResponse`` with ``updates`` in order."""
    return api_pb2.StopContainerResponse(update=[container_update_pb(u) for u in updates]).SerializeToString()


def state_change_from_pb(payload: bytes) -> tuple[int, Sandbox, RuntimeContainer]:
    """``StateChangeEvent``: the event number (possibly one this version does not know), pod, container
    (an empty one for pod events)."""
    msg = parse_message(api_pb2.StateChangeEvent, payload)
    return int(msg.event), sandbox_from_pb(msg.pod), container_from_pb(msg.container)


def empty_from_pb(payload: bytes) -> None:
    parse_message(api_pb2.Empty, payload)


# -- the Runtime service (the plugin's own calls) -------------------------------------------------------


def register_to_pb(name: str, idx: str) -> bytes:
    return api_pb2.RegisterPluginRequest(plugin_name=name, plugin_idx=idx).SerializeToString()


def update_containers_to_pb(updates: Iterable[CpusetUpdate]) -> bytes:
    """``UpdateContainersRequest`` (unsolicited updates, no evictions)."""
    return api_pb2.UpdateContainersRequest(update=[container_update_pb(u) for u in updates]).SerializeToString()


def failed_from_pb(payload: bytes) -> list[str]:
    """The ids of the containers whose update failed, from an ``UpdateContainersResponse``."""
    return [u.container_id for u in parse_message(api_pb2.UpdateContainersResponse, payload).failed]
