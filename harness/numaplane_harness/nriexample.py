"""A tiny example :class:`~numaplane.nri.service.Handler`: pins every container to one fixed cpuset.

Used by the tests and the benchmark; also the smallest illustration of the handler contract:

* ``create_container`` answers with a ``ContainerAdjustment`` setting ``linux.resources.cpu.cpus``
  (and ``mems`` if given) — or fails the creation for containers named in ``reject``;
* ``synchronize`` re-pins every existing container whose cpuset differs (e.g. after a reconnect);
* with an ``updater`` (e.g. ``plugin.update_containers``), a container seen at POST_START_CONTAINER with
  another cpuset, or whose creation we did not adjust, is re-pinned through ``Runtime.UpdateContainers`` — the way to catch a container that
  was created without our adjustment (we answered too late) and whose Synchronize update raced its
  start. The call runs in a task *after* the event is answered: never call the runtime from inside a
  handler and wait for it;
* every call is recorded in ``calls`` as ``(method, pod name, container name)``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

from numaplane.nri.errors import StatusCode, StatusError
from numaplane.nri.proto import api_pb2
from numaplane.nri.service import BaseHandler
from numaplane.topology.cpuset import CPUSet

__all__ = ["FixedCpusetHandler", "Updater", "cpuset_adjustment", "cpuset_update"]

log = logging.getLogger(__name__)

#: ``NRIPlugin.update_containers``-shaped: apply updates, return the failed ones.
Updater = Callable[[list[api_pb2.ContainerUpdate]], Awaitable[list[api_pb2.ContainerUpdate]]]


def _resources(cpus: CPUSet | str, mems: CPUSet | str | None) -> api_pb2.LinuxResources:
    resources = api_pb2.LinuxResources()
    resources.cpu.cpus = str(cpus)
    if mems is not None:
        resources.cpu.mems = str(mems)
    return resources


def cpuset_adjustment(cpus: CPUSet | str, mems: CPUSet | str | None = None) -> api_pb2.ContainerAdjustment:
    """A creation-time adjustment that sets the container's cpuset (and memory nodes, if given)."""
    adjust = api_pb2.ContainerAdjustment()
    adjust.linux.resources.CopyFrom(_resources(cpus, mems))
    return adjust


def cpuset_update(container_id: str, cpus: CPUSet | str, mems: CPUSet | str | None = None) -> api_pb2.ContainerUpdate:
    """An update of an existing container's cpuset (for ``UpdateContainers`` or a ``*Response.update``)."""
    update = api_pb2.ContainerUpdate(container_id=container_id)
    update.linux.resources.CopyFrom(_resources(cpus, mems))
    return update


class FixedCpusetHandler(BaseHandler):
    """Pins every container to ``cpus`` (and ``mems``); fails creation of containers named in ``reject``."""

    events = 0  # all events

    def __init__(
        self,
        cpus: CPUSet | str,
        mems: CPUSet | str | None = None,
        reject: Iterable[str] = (),
        updater: Updater | None = None,
    ) -> None:
        self.cpus = str(cpus)
        self.updater = updater
        self.repinned: list[str] = []  # names of containers re-pinned through the updater
        self.adjusted: set[str] = set()  # ids of containers whose CreateContainer we answered
        self._tasks: set[asyncio.Task[None]] = set()
        self.mems = None if mems is None else str(mems)
        self.reject = frozenset(reject)
        self.calls: list[tuple[str, str, str]] = []
        self.configured = 0
        self.synchronized = 0
        self.last_sync_cpus: dict[str, str] = {}  # container name → cpuset seen in the latest Synchronize

    async def configure(self, request: api_pb2.ConfigureRequest) -> api_pb2.ConfigureResponse:
        self.configured += 1
        self.calls.append(("Configure", request.runtime_name, request.runtime_version))
        return api_pb2.ConfigureResponse(events=self.events)

    async def synchronize(self, request: api_pb2.SynchronizeRequest) -> api_pb2.SynchronizeResponse:
        self.synchronized += 1
        self.calls.append(("Synchronize", "", ""))
        response = api_pb2.SynchronizeResponse()
        self.last_sync_cpus = {c.name: c.linux.resources.cpu.cpus for c in request.containers}
        for container in request.containers:
            if container.linux.resources.cpu.cpus != self.cpus:
                response.update.append(cpuset_update(container.id, self.cpus, self.mems))
        return response

    async def create_container(self, request: api_pb2.CreateContainerRequest) -> api_pb2.CreateContainerResponse:
        self.calls.append(("CreateContainer", request.pod.name, request.container.name))
        if request.container.name in self.reject:
            raise StatusError(
                StatusCode.FAILED_PRECONDITION, f"numaplane example: container {request.container.name!r} rejected"
            )
        response = api_pb2.CreateContainerResponse(adjust=cpuset_adjustment(self.cpus, self.mems))
        self.adjusted.add(request.container.id)  # no await after this: the answer goes out now
        return response

    async def update_container(self, request: api_pb2.UpdateContainerRequest) -> api_pb2.UpdateContainerResponse:
        self.calls.append(("UpdateContainer", request.pod.name, request.container.name))
        return api_pb2.UpdateContainerResponse()

    async def stop_container(self, request: api_pb2.StopContainerRequest) -> api_pb2.StopContainerResponse:
        self.calls.append(("StopContainer", request.pod.name, request.container.name))
        return api_pb2.StopContainerResponse()

    async def state_change(self, event: api_pb2.StateChangeEvent) -> None:
        self.calls.append((api_pb2.Event.Name(event.event), event.pod.name, event.container.name))
        container = event.container
        # Containerd's own view (container.linux) can already show our cpuset — a Synchronize update
        # that raced the start lands in the spec but not in the running cgroup — so re-pin every
        # container whose creation we did not adjust ourselves, whatever it claims.
        if (
            event.event == api_pb2.POST_START_CONTAINER
            and self.updater is not None
            and (container.id not in self.adjusted or container.linux.resources.cpu.cpus != self.cpus)
        ):
            task = asyncio.create_task(self._repin(container.id, container.name))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _repin(self, container_id: str, name: str) -> None:
        assert self.updater is not None
        try:
            failed = await self.updater([cpuset_update(container_id, self.cpus, self.mems)])
        except Exception as exc:  # the next Synchronize gets another chance
            log.warning("example handler: re-pinning %s failed: %s", name, exc)
            return
        if failed:
            log.warning("example handler: the runtime could not re-pin %s", name)
        else:
            self.repinned.append(name)

    async def shutdown(self) -> None:
        self.calls.append(("Shutdown", "", ""))
