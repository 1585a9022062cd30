"""A hung out-of-process plugin delays only the pods that need it.

The example accelerator plugin runs with a 3 s sleep in Allocate, reached with a 1 s deadline: a pod
asking for accelerators is rejected cleanly once the deadline passes (nothing is held anywhere), and
pods that do not ask for accelerators are admitted without the plugin ever being called, before,
while and after it hangs.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from accelerator_plugin import NAME, RESOURCE
from vendor_helpers import start_accelerator_plugin

from numaplane.grpcapi.pluginapi.adapter import GrpcResourcePlugin
from numaplane.policy.config import parse_config
from numaplane.policy.manager import ResourceManager
from numaplane.resources.pod import parse_pod
from numaplane.testing.containerd import terminate_process
from numaplane.topology.model import synthetic

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


def test_a_hung_plugin_delays_only_its_own_pods(slow_socket: Path) -> None:
    topo = synthetic(sockets=2, numa_per_socket=1, cores_per_numa=4, threads_per_core=2)
    config = parse_config({"topologyManager": {"policy": "single-numa-node"}, "cpuManager": {"reservedCPUCount": 2}})
    remote = GrpcResourcePlugin(NAME, {RESOURCE}, str(slow_socket), topology=topo, config=config, timeout_seconds=1.0)
    remote.connect()
    try:
        manager = ResourceManager(topo, config, extra_plugins=[remote])

        started = time.monotonic()
        assert manager.admit(_pod("plain-1", 0)).admitted
        assert time.monotonic() - started < 0.5  # the plugin was not asked

        started = time.monotonic()
        admission = manager.admit(_pod("needs-it", 1))
        elapsed = time.monotonic() - started
        assert not admission.admitted and 0.9 < elapsed < 2.9  # the deadline, not the plugin's 3 s
        assert manager.cpu.state.get("needs-it", "main") is None  # rejected cleanly: nothing held

        started = time.monotonic()
        assert manager.admit(_pod("plain-2", 0)).admitted
        assert time.monotonic() - started < 0.5
        manager.remove("plain-1")
        manager.remove("plain-2")
    finally:
        remote.close()
