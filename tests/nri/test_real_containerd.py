"""End to end: our NRI plugin against a real containerd 1.7 (Debian's), driven through CRI.

Needs root and a cpuset cgroup; the ``containerd`` fixture skips loudly where the machine cannot run it.
Each test uses its own plugin name, and removes its pods, so the session's containerd stays clean.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from numaplane.nri.events import Adjustment, CpusetUpdate, RuntimeContainer, Sandbox
from numaplane.nri.plugin import NRIPlugin
from numaplane.topology.cpuset import CPUSet
from numaplane_harness.containerd import BUSYBOX_IMAGE, ContainerdInstance, cpuset_of_container
from numaplane_harness.cri import CRIError
from numaplane_harness.nriexample import FixedCpusetHandler

pytestmark = pytest.mark.timeout(120)


def machine_cpus() -> CPUSet:
    for path in ("/sys/fs/cgroup/cpuset/cpuset.effective_cpus", "/sys/fs/cgroup/cpuset.cpus.effective"):
        with contextlib.suppress(OSError):
            return CPUSet.parse(Path(path).read_text().strip())
    return CPUSet.parse(Path("/sys/devices/system/cpu/online").read_text().strip())


def target_cpus() -> str:
    """The CPU the example handler pins to: the last one (differs from "all" on any multi-CPU machine)."""
    return str(CPUSet([machine_cpus().last()]))


@contextlib.asynccontextmanager
async def plugin_running(
    containerd: ContainerdInstance, handler: FixedCpusetHandler, name: str
) -> AsyncIterator[NRIPlugin]:
    plugin = NRIPlugin(handler, name=name, idx="10", socket_path=containerd.nri_socket, backoff_initial_seconds=0.05)
    handler.updater = plugin.update_containers
    task = asyncio.create_task(plugin.run())
    try:
        await plugin.wait_registered(10)
        async with asyncio.timeout(10):  # containerd answers RegisterPlugin before Configure + Synchronize
            while handler.synchronized < 1:
                await asyncio.sleep(0.01)
        yield plugin
    finally:
        await plugin.stop()
        await asyncio.wait_for(task, 10)


class Pods:
    """Pods created through CRI (in a worker thread: containerd waits on our plugin inside CreateContainer)."""

    def __init__(self, containerd: ContainerdInstance) -> None:
        self.containerd = containerd
        self.cri = containerd.cri()
        self.pod_ids: list[str] = []

    async def pod(self, name: str) -> tuple[str, Any, str]:
        config, cgroup_parent = self.containerd.new_pod(name)
        pod_id = await asyncio.to_thread(self.cri.run_pod_sandbox, config)
        self.pod_ids.append(pod_id)
        return pod_id, config, cgroup_parent

    async def container(self, pod_id: str, pod_config: Any, name: str) -> str:
        config = self.cri.container_config(
            name, BUSYBOX_IMAGE, ["sleep", "3600"], cpuset_cpus=str(machine_cpus()), cpu_shares=1024
        )
        container_id = await asyncio.to_thread(self.cri.create_container, pod_id, config, pod_config)
        await asyncio.to_thread(self.cri.start_container, container_id)
        return container_id

    async def close(self) -> None:
        for pod_id in self.pod_ids:
            with contextlib.suppress(CRIError):
                await asyncio.to_thread(self.cri.stop_pod_sandbox, pod_id)
            with contextlib.suppress(CRIError):
                await asyncio.to_thread(self.cri.remove_pod_sandbox, pod_id)
        self.cri.close()


@pytest.fixture
async def pods(containerd: ContainerdInstance) -> AsyncIterator[Pods]:
    p = Pods(containerd)
    try:
        yield p
    finally:
        await p.close()


def cpus_allowed(cgroup_parent: str, container_id: str) -> str:
    """``Cpus_allowed_list`` of the container's first process, from the host's /proc."""
    for hierarchy in (Path("/sys/fs/cgroup/cpuset"), Path("/sys/fs/cgroup")):
        procs = hierarchy / cgroup_parent.strip("/") / container_id / "cgroup.procs"
        if procs.exists():
            pid = procs.read_text().split()[0]
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("Cpus_allowed_list:"):
                    return line.split(":", 1)[1].strip()
    raise AssertionError("container process not found")


async def wait_for_cpuset(cgroup_parent: str, container_id: str, want: str, timeout_seconds: float = 10) -> None:
    deadline = time.monotonic() + timeout_seconds
    while True:
        got = cpuset_of_container(cgroup_parent, container_id)[0]
        if got == want:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"cpuset.cpus of {container_id[:12]} is {got!r}, want {want!r}")
        await asyncio.sleep(0.05)


async def test_container_created_through_cri_gets_pinned(containerd: ContainerdInstance, pods: Pods) -> None:
    want = target_cpus()
    handler = FixedCpusetHandler(want)
    async with plugin_running(containerd, handler, "numaplane-e2e-pin"):
        assert ("Configure", "containerd", "1.7.24~ds1") in handler.calls
        pod_id, pod_config, cgroup_parent = await pods.pod("pinned")
        container_id = await pods.container(pod_id, pod_config, "main")
        assert ("CreateContainer", "pinned", "main") in handler.calls
        cpus, _mems = cpuset_of_container(cgroup_parent, container_id)
        assert cpus == want
        assert cpus_allowed(cgroup_parent, container_id) == want
        assert ("RUN_POD_SANDBOX", "pinned", "") in handler.calls


async def test_create_container_error_fails_the_creation(containerd: ContainerdInstance, pods: Pods) -> None:
    handler = FixedCpusetHandler(target_cpus(), reject=["doomed"])
    async with plugin_running(containerd, handler, "numaplane-e2e-reject"):
        pod_id, pod_config, _ = await pods.pod("rejecting")
        with pytest.raises(CRIError) as info:
            await pods.container(pod_id, pod_config, "doomed")
        assert "container 'doomed' rejected" in info.value.details
        # The plugin stays registered and the next container is fine.
        await pods.container(pod_id, pod_config, "fine")


async def test_disconnect_and_reconnect(containerd: ContainerdInstance, pods: Pods) -> None:
    want = target_cpus()
    handler = FixedCpusetHandler(want)
    async with plugin_running(containerd, handler, "numaplane-e2e-reconnect") as plugin:
        async with asyncio.timeout(10):
            while handler.synchronized < 1:
                await asyncio.sleep(0.02)
        plugin.disconnect()
        async with asyncio.timeout(10):
            while handler.synchronized < 2 or not plugin.registered:
                await asyncio.sleep(0.02)
        assert plugin.registrations == 2 and handler.configured == 2
        pod_id, pod_config, cgroup_parent = await pods.pod("after-reconnect")
        container_id = await pods.container(pod_id, pod_config, "main")
        assert cpuset_of_container(cgroup_parent, container_id)[0] == want


async def test_missed_deadline_then_resync_repins(containerd: ContainerdInstance, pods: Pods) -> None:
    """A plugin too slow for containerd's 2 s request timeout is dropped and the container is created
    without the adjustment; after the reconnect, Synchronize's updates pin it."""
    want = target_cpus()
    slow_once = asyncio.Event()

    class SlowOnce(FixedCpusetHandler):
        async def create_container(
            self, pod: Sandbox, container: RuntimeContainer
        ) -> tuple[Adjustment, list[CpusetUpdate]]:
            if container.name == "late" and not slow_once.is_set():
                slow_once.set()
                await asyncio.sleep(3)
            return await super().create_container(pod, container)

    handler = SlowOnce(want)
    async with plugin_running(containerd, handler, "numaplane-e2e-late") as plugin:
        pod_id, pod_config, cgroup_parent = await pods.pod("late-pod")
        container_id = await pods.container(pod_id, pod_config, "late")
        async with asyncio.timeout(15):
            while plugin.registrations < 2 or handler.synchronized < 2:
                await asyncio.sleep(0.05)
        # containerd created it without our adjustment (the cpuset CRI asked for) ...
        assert handler.last_sync_cpus["late"] == str(machine_cpus())
        # ... and it gets pinned after the reconnect: by the update in our Synchronize answer, or (when
        # that races the container's start inside containerd) by UpdateContainers at POST_START.
        await wait_for_cpuset(cgroup_parent, container_id, want)
        assert cpus_allowed(cgroup_parent, container_id) == want
