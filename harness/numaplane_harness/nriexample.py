"""A tiny example NRI handler (``nri/stub.py``): pins every container to one fixed cpuset.

Used by the tests and the benchmark; also the smallest illustration of the handler protocol — plain
methods over ``nri/events.py`` values, no protobuf, the subscription derived from the methods:

* ``create_container`` answers with an :class:`~numaplane.nri.events.Adjustment` setting the cpuset
  (and memory nodes if given) — or fails the creation for containers named in ``reject``;
* ``synchronize`` re-pins every existing container whose cpuset differs (e.g. after a reconnect);
* with an ``updater`` (e.g. ``plugin.update_containers``), a container seen at POST_START_CONTAINER with
  another cpuset, or whose creation we did not adjust, is re-pinned through ``Runtime.UpdateContainers`` — the way to catch a container that
  was created without our adjustment (we answered too late) and whose Synchronize update raced its
  start. The call runs in a task *after* the event is answered: never call the runtime from inside a
  handler and wait for it;
* every call is recorded in ``calls`` as ``(method, pod name, container name)``; it implements every
  event, so it subscribes to all of them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence

from numaplane.nri.errors import StatusCode, StatusError
from numaplane.nri.events import Adjustment, CgroupResources, CpusetUpdate, RuntimeContainer, RuntimeInfo, Sandbox
from numaplane.topology.cpuset import CPUSet

__all__ = ["FixedCpusetHandler", "Updater", "cpuset_update"]

log = logging.getLogger(__name__)

#: ``NRIPlugin.update_containers``-shaped: apply updates, return the ids of the failed ones.
Updater = Callable[[list[CpusetUpdate]], Awaitable[list[str]]]


def _cpus(value: CPUSet | str) -> CPUSet:
    return value if isinstance(value, CPUSet) else CPUSet.parse(value)


def cpuset_update(container_id: str, cpus: CPUSet | str, mems: CPUSet | str | None = None) -> CpusetUpdate:
    """An update of an existing container's cpuset (for ``UpdateContainers`` or an answer's updates)."""
    return CpusetUpdate(container_id, _cpus(cpus), None if mems is None else _cpus(mems))


class FixedCpusetHandler:
    """Pins every container to ``cpus`` (and ``mems``); fails creation of containers named in ``reject``."""

    def __init__(
        self,
        cpus: CPUSet | str,
        mems: CPUSet | str | None = None,
        reject: Iterable[str] = (),
        updater: Updater | None = None,
    ) -> None:
        self.cpus = _cpus(cpus)
        self.mems = None if mems is None else _cpus(mems)
        self.updater = updater
        self.repinned: list[str] = []  # names of containers re-pinned through the updater
        self.adjusted: set[str] = set()  # ids of containers whose CreateContainer we answered
        self._tasks: set[asyncio.Task[None]] = set()
        self.reject = frozenset(reject)
        self.calls: list[tuple[str, str, str]] = []
        self.configured = 0
        self.synchronized = 0
        self.last_sync_cpus: dict[str, str] = {}  # container name → cpuset seen in the latest Synchronize

    def _mine(self, container: RuntimeContainer) -> bool:
        return container.resources.cpus == self.cpus.format()

    async def configure(self, info: RuntimeInfo) -> None:
        self.configured += 1
        self.calls.append(("Configure", info.runtime, info.version))

    async def synchronize(self, pods: Sequence[Sandbox], containers: Sequence[RuntimeContainer]) -> list[CpusetUpdate]:
        self.synchronized += 1
        self.calls.append(("Synchronize", "", ""))
        self.last_sync_cpus = {c.name: c.resources.cpus for c in containers}
        return [CpusetUpdate(c.id, self.cpus, self.mems) for c in containers if not self._mine(c)]

    async def create_container(
        self, pod: Sandbox, container: RuntimeContainer
    ) -> tuple[Adjustment, list[CpusetUpdate]]:
        self.calls.append(("CreateContainer", pod.name, container.name))
        if container.name in self.reject:
            raise StatusError(
                StatusCode.FAILED_PRECONDITION, f"numaplane example: container {container.name!r} rejected"
            )
        self.adjusted.add(container.id)  # no await after this: the answer goes out now
        return Adjustment(self.cpus, self.mems), []

    async def update_container(
        self, pod: Sandbox, container: RuntimeContainer, resources: CgroupResources
    ) -> list[CpusetUpdate]:
        self.calls.append(("UpdateContainer", pod.name, container.name))
        return []

    async def stop_container(self, pod: Sandbox, container: RuntimeContainer) -> list[CpusetUpdate]:
        self.calls.append(("StopContainer", pod.name, container.name))
        return []

    async def _pod_event(self, name: str, pod: Sandbox) -> None:
        self.calls.append((name, pod.name, ""))

    async def run_pod_sandbox(self, pod: Sandbox) -> None:
        await self._pod_event("RUN_POD_SANDBOX", pod)

    async def stop_pod_sandbox(self, pod: Sandbox) -> None:
        await self._pod_event("STOP_POD_SANDBOX", pod)

    async def remove_pod_sandbox(self, pod: Sandbox) -> None:
        await self._pod_event("REMOVE_POD_SANDBOX", pod)

    async def post_create_container(self, pod: Sandbox, container: RuntimeContainer) -> None:
        self.calls.append(("POST_CREATE_CONTAINER", pod.name, container.name))

    async def start_container(self, pod: Sandbox, container: RuntimeContainer) -> None:
        self.calls.append(("START_CONTAINER", pod.name, container.name))

    async def post_update_container(self, pod: Sandbox, container: RuntimeContainer) -> None:
        self.calls.append(("POST_UPDATE_CONTAINER", pod.name, container.name))

    async def remove_container(self, pod: Sandbox, container: RuntimeContainer) -> None:
        self.calls.append(("REMOVE_CONTAINER", pod.name, container.name))

    async def post_start_container(self, pod: Sandbox, container: RuntimeContainer) -> None:
        self.calls.append(("POST_START_CONTAINER", pod.name, container.name))
        # Containerd's own view (container.linux) can already show our cpuset — a Synchronize update
        # that raced the start lands in the spec but not in the running cgroup — so re-pin every
        # container whose creation we did not adjust ourselves, whatever it claims.
        if self.updater is not None and (container.id not in self.adjusted or not self._mine(container)):
            task = asyncio.create_task(self._repin(container.id, container.name))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _repin(self, container_id: str, name: str) -> None:
        assert self.updater is not None
        try:
            failed = await self.updater([CpusetUpdate(container_id, self.cpus, self.mems)])
        except Exception as exc:  # the next Synchronize gets another chance
            log.warning("example handler: re-pinning %s failed: %s", name, exc)
            return
        if failed:
            log.warning("example handler: the runtime could not re-pin %s", name)
        else:
            self.repinned.append(name)

    async def shutdown(self) -> None:
        self.calls.append(("Shutdown", "", ""))
