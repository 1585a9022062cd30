"""A hung out-of-process plugin delays only the pods that need it.

The example accelerator plugin runs with a 3 s sleep in Allocate, reached with a 1 s deadline: a pod
asking for accelerators is rejected cleanly once the deadline passes (nothing is held here; the
release is queued for the plugin), and pods that do not ask for accelerators are admitted at once,
without the plugin ever being called, while it hangs (the asynchronous driver of ``policy/asks.py``).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from accelerator_plugin import NAME, RESOURCE
from vendor_helpers import start_accelerator_plugin

from numaplane.grpcapi.pluginapi.adapter import GrpcResourcePlugin
from numaplane.grpcapi.pluginapi.asking import admit
from numaplane.policy.config import parse_config
from numaplane.policy.manager import ResourceManager
from numaplane.resources.pod import parse_pod
from numaplane.topology.model import synthetic
from numaplane_harness.containerd import terminate_process

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def slow_socket() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="npv-", dir="/tmp"))
    sock = folder / "acc.sock"
    process = start_accelerator_plugin(sock, "--allocate-delay", "3")
    try:
        yield sock
    finally:
        terminate_process(process)
        if process.stdout is not None:
            process.stdout.close()
        shutil.rmtree(folder, ignore_errors=True)


def _pod(uid: str, accelerators: int) -> Any:
    res = {"cpu": "2", "memory": "1Gi"}
    if accelerators:
        res[RESOURCE] = str(accelerators)
    spec = {"containers": [{"name": "main", "resources": {"requests": res, "limits": res}}]}
    return parse_pod({"metadata": {"name": uid, "uid": uid}, "spec": spec})


async def test_a_hung_plugin_delays_only_its_own_pods(slow_socket: Path) -> None:
    topo = synthetic(sockets=2, numa_per_socket=1, cores_per_numa=4, threads_per_core=2)
    config = parse_config({"topologyManager": {"policy": "single-numa-node"}, "cpuManager": {"reservedCPUCount": 2}})
    remote = GrpcResourcePlugin(NAME, {RESOURCE}, str(slow_socket), topology=topo, config=config, timeout_seconds=1.0)
    await asyncio.to_thread(remote.connect)
    try:
        manager = ResourceManager(topo, config, extra_plugins=[remote])
        loop = asyncio.get_running_loop()
        started = loop.time()
        hung = asyncio.create_task(admit(manager, _pod("needs-it", 1)))
        await asyncio.sleep(0.05)  # it asked the plugin and waits
        latencies = []
        for i in range(20):  # plain pods meanwhile: decided at once, never asking the plugin
            t = loop.time()
            admission = await admit(manager, _pod(f"plain-{i}", 0))
            latencies.append(loop.time() - t)
            assert admission.admitted
            manager.remove(admission.pod_uid)
        assert not hung.done() and max(latencies) < 0.1
        admission = await hung
        elapsed = loop.time() - started
        assert not admission.admitted and 0.9 < elapsed < 2.9  # the deadline, not the plugin's 3 s
        assert admission.reason == "PluginUnavailable" and "DEADLINE_EXCEEDED" in admission.message
        assert manager.cpu.state.get("needs-it", "main") is None  # rejected cleanly: nothing held
        assert remote.pending_releases == [("needs-it", "main")]  # sent when the plugin is back
    finally:
        await remote.aclose()
