"""The exporter's inputs: the PodResources API (fast, read every scan) and sysfs (slow, re-read on ticks).

PodResources sources implement :class:`PodResourcesSource`:

* :class:`GrpcPodResources` — the kubelet's socket, or numaplane's agent's (same v1 API), through
  :class:`~numaplane.grpcapi.podresources.client.PodResourcesClient`. gRPC failures become
  :class:`~numaplane.exporter.errors.PodResourcesSourceError` (kind ``podresources_unavailable``
  for an unreachable or slow server, ``podresources_unsupported`` for a method the server lacks,
  ``podresources_call`` otherwise); an answer that cannot be
  decoded becomes :class:`~numaplane.exporter.errors.MalformedPodResources`.
* :class:`FakeDirPodResources` — ``fake://<dir>``: ``list.json`` and ``get_allocatable_resources.json``
  (proto3 JSON or snake_case), read on every call, like the upstream exporter's fake client.

:func:`check_consistency` rejects answers that contradict the machine (a CPU id sysfs does not show
online, a memory block or device on a NUMA node that does not exist, a pod without a name): the
kubelet never sends these, so they mean a broken producer or a stale machine view, and publishing
zones computed from them would mislead the scheduler.

:class:`MachineSource` discovers the topology under a sysfs root and keeps it as a
:class:`~numaplane.nrt.zones.MachineView`; :class:`~numaplane.exporter.errors.SysfsSourceError`
names the failing file.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final, Protocol

from numaplane import boundedjson
from numaplane.exporter.errors import MalformedPodResources, PodResourcesSourceError, SysfsSourceError
from numaplane.grpcapi.errors import (
    PodResourcesError,
    PodResourcesMalformed,
    PodResourcesUnavailable,
    PodResourcesUnsupported,
)
from numaplane.grpcapi.podresources.client import MAX_MESSAGE_BYTES, PodResourcesClient
from numaplane.nrt.errors import NRTError
from numaplane.nrt.podresources import (
    AllocatableResources,
    ContainerMemory,
    PodResources,
    allocatable_from_dict,
    list_from_dict,
)
from numaplane.nrt.zones import MachineView
from numaplane.topology.errors import TopologyError
from numaplane.topology.sysfs import discover

__all__ = [
    "FAKE_SCHEME",
    "FakeDirPodResources",
    "GrpcPodResources",
    "MachineSource",
    "PodResourcesSource",
    "check_consistency",
    "open_podresources",
]

FAKE_SCHEME: Final = "fake://"


class PodResourcesSource(Protocol):
    """Where the exporter reads allocations from (one event loop; :meth:`close` when done)."""

    description: str

    async def list_pods(self) -> Sequence[PodResources]:
        """``List``: every pod's exclusively assigned resources."""
        ...

    async def allocatable(self) -> AllocatableResources:
        """``GetAllocatableResources``: the node's allocatable CPUs, devices and memory blocks."""
        ...

    async def close(self) -> None: ...


def _source_error(error: PodResourcesError) -> PodResourcesSourceError:
    if isinstance(error, PodResourcesUnavailable):
        kind = "podresources_unavailable"
    elif isinstance(error, PodResourcesUnsupported):
        kind = "podresources_unsupported"
    else:
        kind = "podresources_call"
    wrapped = PodResourcesSourceError(str(error), kind=kind)
    wrapped.__cause__ = error
    return wrapped


class GrpcPodResources:
    """The PodResources v1 gRPC API on a unix socket; ``timeout_seconds`` is the per-call deadline.

    After an "unavailable" failure the channel is replaced by a fresh one for the next call: a gRPC
    channel whose server went away backs off its reconnection attempts up to two minutes, while a
    restarted kubelet should be read again at the next scan.
    """

    def __init__(self, socket: str, *, timeout_seconds: float = 10.0) -> None:
        self._socket = socket
        self._timeout = timeout_seconds
        self._client = PodResourcesClient(socket, timeout_seconds=timeout_seconds)
        self.description = self._client.target

    async def _renew(self) -> None:
        old, self._client = self._client, PodResourcesClient(self._socket, timeout_seconds=self._timeout)
        await old.close()

    async def list_pods(self) -> Sequence[PodResources]:
        try:
            return await self._client.list()
        except PodResourcesUnavailable as error:
            await self._renew()
            raise _source_error(error) from error
        except PodResourcesError as error:
            raise _decode_or_source_error(error, "List") from error
        except Exception as error:  # grpc.aio hands an undecodable message over as None: the converter fails
            raise MalformedPodResources(f"podresources List: undecodable answer: {error!r}") from error

    async def allocatable(self) -> AllocatableResources:
        try:
            return await self._client.get_allocatable_resources()
        except PodResourcesUnavailable as error:
            await self._renew()
            raise _source_error(error) from error
        except PodResourcesError as error:
            raise _decode_or_source_error(error, "GetAllocatableResources") from error
        except Exception as error:
            raise MalformedPodResources(
                f"podresources GetAllocatableResources: undecodable answer: {error!r}"
            ) from error

    async def close(self) -> None:
        await self._client.close()


def _decode_or_source_error(error: PodResourcesError, method: str) -> PodResourcesSourceError | MalformedPodResources:
    # the client reports an undecodable answer as PodResourcesMalformed; older grpc versions as
    # INTERNAL "Exception deserializing response!"
    if isinstance(error, PodResourcesMalformed) or "deserializ" in (error.details or str(error)).lower():
        return MalformedPodResources(f"podresources {method}: undecodable answer ({error.details or error})")
    return _source_error(error)


class FakeDirPodResources:
    """``fake://<dir>``: answers read from JSON files in ``dir`` on every call.

    The files are untrusted input like the socket's answers: each is read through the project's bounded
    JSON reader (:func:`numaplane.boundedjson.loads`) with the gRPC client's answer limit
    (:data:`~numaplane.grpcapi.podresources.client.MAX_MESSAGE_BYTES`, bytes) and nesting bounded; a file
    over it is refused after reading at most one byte more than the limit."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.description = f"{FAKE_SCHEME}{self.directory}"

    def _load(self, name: str) -> object:
        path = self.directory / name
        try:
            with path.open("rb") as file:
                data = file.read(MAX_MESSAGE_BYTES + 1)
        except OSError as error:
            raise PodResourcesSourceError(f"{path}: cannot read: {error}", kind="podresources_unavailable") from error
        try:
            return boundedjson.loads(data, max_bytes=MAX_MESSAGE_BYTES)
        except boundedjson.JSONInputError as error:
            raise MalformedPodResources(f"{path}: {error}") from error

    async def list_pods(self) -> Sequence[PodResources]:
        try:
            return list_from_dict(self._load("list.json"), "$.list")
        except NRTError as error:
            raise MalformedPodResources(f"{self.directory / 'list.json'}: {error}") from error

    async def allocatable(self) -> AllocatableResources:
        try:
            return allocatable_from_dict(self._load("get_allocatable_resources.json"), "$.allocatable")
        except NRTError as error:
            raise MalformedPodResources(f"{self.directory / 'get_allocatable_resources.json'}: {error}") from error

    async def close(self) -> None:
        return None


def open_podresources(spec: str, *, timeout_seconds: float = 10.0) -> PodResourcesSource:
    """The source for ``--podresources-socket``: ``fake://<dir>`` or a socket path / ``unix:`` target."""
    if spec.startswith(FAKE_SCHEME):
        return FakeDirPodResources(spec[len(FAKE_SCHEME) :])
    return GrpcPodResources(spec, timeout_seconds=timeout_seconds)


def _check_blocks(blocks: Iterable[ContainerMemory], numa_ids: set[int], where: str) -> None:
    for block in blocks:
        unknown = [n for n in block.numa_nodes if n >= 0 and n not in numa_ids]
        if unknown:
            raise MalformedPodResources(f"{where}: {block.memory_type} block on unknown NUMA node(s) {unknown}")


def check_consistency(machine: MachineView, allocatable: AllocatableResources, pods: Sequence[PodResources]) -> None:
    """Raise :class:`MalformedPodResources` if the answers contradict the machine (see the module doc).

    NUMA id ``-1`` (a device plugin's "no affinity") is accepted everywhere.
    """
    online = 0
    for node in machine.numa_nodes:
        online |= node.cpus.mask
    numa_ids = {node.id for node in machine.numa_nodes}
    stray = sorted(cpu for cpu in allocatable.cpu_ids if not online >> cpu & 1)
    if stray:
        raise MalformedPodResources(f"allocatable CPUs {stray} are not online CPUs of the machine")
    for dev in allocatable.devices:
        unknown = [n for n in dev.numa_nodes if n >= 0 and n not in numa_ids]
        if unknown:
            raise MalformedPodResources(f"allocatable device {dev.resource_name} on unknown NUMA node(s) {unknown}")
    _check_blocks(allocatable.memory, numa_ids, "allocatable")
    for pod in pods:
        if not pod.name or not pod.namespace:
            raise MalformedPodResources(f"a pod without name or namespace: {pod.namespace!r}/{pod.name!r}")
        where = f"pod {pod.namespace}/{pod.name}"
        cpus = list(pod.cpu_ids)
        for container in pod.containers:
            cpus.extend(container.cpu_ids)
            _check_blocks(container.memory, numa_ids, f"{where} container {container.name}")
        stray = sorted({cpu for cpu in cpus if not online >> cpu & 1})
        if stray:
            raise MalformedPodResources(f"{where}: CPUs {stray} are not online CPUs of the machine")
        _check_blocks(pod.memory, numa_ids, where)


class MachineSource:
    """The machine's NUMA layout from the sysfs tree under ``root`` (the folder holding ``sys/``)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def read(self) -> MachineView:
        """Discover now (a few ms on large machines); :class:`SysfsSourceError` on any failure."""
        try:
            topology = discover(self.root)
        except TopologyError as error:
            raise SysfsSourceError(f"sysfs discovery under {self.root} failed: {error}") from error
        except (OSError, ValueError) as error:
            raise SysfsSourceError(f"sysfs discovery under {self.root} failed: {error}") from error
        view = MachineView.from_topology(topology)
        if not view.numa_nodes or not any(node.cpus for node in view.numa_nodes):
            raise SysfsSourceError(f"sysfs under {self.root} shows no NUMA node with online CPUs")
        return view
