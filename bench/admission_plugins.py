"""Admission latency: the static CPU policy built in vs the same policy out of process (plugin API v1).

Usage: python bench/admission_plugins.py [--quick] [--shared DIR]

Same node (the 256-CPU, 8-NUMA fixture, single-numa-node, 2 reserved CPUs, 40 pods already
admitted), same pod (one container, 4 CPUs), admitted and removed in a loop:

* ``builtin``: the default plugins (static CPU policy in process);
* ``remote``: CPU manager ``none`` in process plus ``examples/plugins/cpu_static_plugin.py`` running
  as its own process over a unix socket, reached through ``GrpcResourcePlugin``: the manager's asks
  (hints, allocate) answered by the asynchronous driver (``grpcapi/pluginapi/asking.py``), the
  release sent by its flush (not timed);
* ``plain_while_hung``: the built-in static CPU policy plus ``examples/plugins/accelerator_plugin.py``
  sleeping in Allocate (60 s, behind a 30 s deadline): one pod asking for an accelerator waits on it
  while plain 4-CPU pods are admitted on the same event loop.

Prints p50/p99 of ``admit`` per variant as ``metric: value unit`` lines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from numaplane.grpcapi.pluginapi.adapter import GrpcResourcePlugin
from numaplane.grpcapi.pluginapi.asking import admit, flush, settle
from numaplane.policy.config import parse_config
from numaplane.policy.manager import ResourceManager
from numaplane.resources.pod import Pod, parse_pod

# The test harness (real control plane, kubelet, containerd) is not installed: it lives in harness/.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))
from numaplane.topology.document import topology_from_dict
from numaplane_harness.processes import terminate_process

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "plugins" / "cpu_static_plugin.py"
ACCELERATOR = REPO / "examples" / "plugins" / "accelerator_plugin.py"
CPU_CONFIG: dict[str, Any] = {"policy": "static", "reservedCPUCount": 2}


def _pod(uid: str, cpus: int, accelerators: int = 0) -> Pod:
    res = {"cpu": str(cpus), "memory": "1Gi"}
    if accelerators:
        res["example.com/accelerator"] = str(accelerators)
    spec = {"containers": [{"name": "c", "resources": {"requests": res, "limits": res}}]}
    return parse_pod({"metadata": {"name": uid, "uid": uid}, "spec": spec})


def _measure(manager: ResourceManager, cycles: int) -> list[float]:
    for i in range(40):
        manager.admit(_pod(f"base-{i}", 2 + (i % 3) * 2))
    pods = [_pod(f"probe-{i}", 4) for i in range(cycles)]  # built before timing, as bench/admission.py
    samples = []
    for pod in pods:
        started = time.perf_counter()
        admission = manager.admit(pod)
        samples.append(time.perf_counter() - started)
        assert admission.admitted, admission.message
        manager.remove(pod.uid)
    return samples


async def _measure_remote(manager: ResourceManager, cycles: int, *, releases: bool = True) -> list[float]:
    for i in range(40):
        await admit(manager, _pod(f"base-{i}", 2 + (i % 3) * 2))
    pods = [_pod(f"probe-{i}", 4) for i in range(cycles)]
    samples = []
    for pod in pods:
        started = time.perf_counter()
        admission = await admit(manager, pod)
        samples.append(time.perf_counter() - started)
        assert admission.admitted, admission.message
        manager.remove(pod.uid)
        if releases:
            await flush(manager)  # the release reaches the plugin
    return samples


async def _measure_while_hung(manager: ResourceManager, cycles: int) -> list[float]:
    run = manager.begin(_pod("hung", 2, accelerators=1))
    assert not run.done, "the accelerator pod must ask its plugin"
    hung = asyncio.get_running_loop().create_task(settle(run, manager.plugins))
    await asyncio.sleep(0.2)  # its Allocate is in flight
    try:
        samples = await _measure_remote(manager, cycles, releases=False)  # plain pods hold no accelerator
        assert not hung.done(), "the hung plugin answered during the measurement"
    finally:
        hung.cancel()
        run.abort()
    return samples


def _start(script: Path, sock: Path, *extra: str) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, str(script), "--socket", str(sock), "--no-register", *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not sock.is_socket():
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"{script.name} did not start")
        time.sleep(0.02)
    return process


def _report(name: str, samples: list[float]) -> None:
    q = statistics.quantiles(samples, n=100)
    print(f"admit_{name}_p50: {q[49] * 1e6:.0f} us")
    print(f"admit_{name}_p99: {q[98] * 1e6:.0f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    args = parser.parse_args()
    fixture = args.shared / "conformance" / "topologies" / "topoDualSocketMultiNumaPerSocketHTLarge.json"
    topology = topology_from_dict(json.loads(fixture.read_text()))
    cycles = 200 if args.quick else 2_000
    tm = {"policy": "single-numa-node"}

    builtin = ResourceManager(topology, {"topologyManager": tm, "cpuManager": CPU_CONFIG})
    _report("builtin", _measure(builtin, cycles))

    folder = Path(tempfile.mkdtemp(prefix="npb-", dir="/tmp"))
    processes = []
    try:
        processes.append(_start(EXAMPLE, folder / "cpu.sock"))
        config = parse_config({"topologyManager": tm, "cpuManager": {"policy": "none"}})
        remote = GrpcResourcePlugin(
            "example.numaplane.io/cpu-static",
            {"cpu"},
            str(folder / "cpu.sock"),
            topology=topology,
            config=config,
            timeout_seconds=5,
        )
        remote.config_doc = {"topologyManager": tm, "cpuManager": CPU_CONFIG}
        remote.connect()
        try:
            manager = ResourceManager(topology, config, extra_plugins=[remote])
            _report("remote", asyncio.run(_measure_remote(manager, cycles)))
        finally:
            remote.close()

        processes.append(_start(ACCELERATOR, folder / "acc.sock", "--allocate-delay", "60"))
        config = parse_config({"topologyManager": tm, "cpuManager": CPU_CONFIG})
        accelerators = GrpcResourcePlugin(
            "example.com/accelerators",
            {"example.com/accelerator"},
            str(folder / "acc.sock"),
            topology=topology,
            config=config,
            timeout_seconds=30,
        )
        accelerators.connect()
        try:
            manager = ResourceManager(topology, config, extra_plugins=[accelerators])
            _report("plain_while_hung", asyncio.run(_measure_while_hung(manager, cycles)))
        finally:
            accelerators.close()
    finally:
        for process in processes:
            terminate_process(process, 2.0)  # the hung one is killed
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
