"""Admission latency: the static CPU policy built in vs the same policy out of process (plugin API v1).

Usage: python bench/admission_plugins.py [--quick] [--shared DIR]

Same node (the 256-CPU, 8-NUMA fixture, single-numa-node, 2 reserved CPUs, 40 pods already
admitted), same pod (one container, 4 CPUs), admitted and removed in a loop:

* ``builtin``: the default plugins (static CPU policy in process);
* ``remote``: CPU manager ``none`` in process plus ``examples/plugins/cpu_static_plugin.py`` running
  as its own process over a unix socket, reached through ``GrpcResourcePlugin`` (hints, allocate and
  release are gRPC calls).

Prints p50/p99 of ``admit`` per variant as ``metric: value unit`` lines.
"""

from __future__ import annotations

import argparse
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
from numaplane.policy.config import parse_config
from numaplane.policy.manager import ResourceManager
from numaplane.resources.pod import Pod, parse_pod
from numaplane.topology.model import Topology

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "plugins" / "cpu_static_plugin.py"
CPU_CONFIG: dict[str, Any] = {"policy": "static", "reservedCPUCount": 2}


def _pod(uid: str, cpus: int) -> Pod:
    res = {"cpu": str(cpus), "memory": "1Gi"}
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
    topology = Topology.from_dict(json.loads(fixture.read_text()))
    cycles = 200 if args.quick else 2_000
    tm = {"policy": "single-numa-node"}

    builtin = ResourceManager(topology, {"topologyManager": tm, "cpuManager": CPU_CONFIG})
    _report("builtin", _measure(builtin, cycles))

    folder = Path(tempfile.mkdtemp(prefix="npb-", dir="/tmp"))
    sock = folder / "cpu.sock"
    process = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--socket", str(sock), "--no-register"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not sock.is_socket():
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the example CPU plugin did not start")
            time.sleep(0.02)
        config = parse_config({"topologyManager": tm, "cpuManager": {"policy": "none"}})
        remote = GrpcResourcePlugin(
            "example.numaplane.io/cpu-static", {"cpu"}, str(sock), topology=topology, config=config, timeout_seconds=5
        )
        remote.config_doc = {"topologyManager": tm, "cpuManager": CPU_CONFIG}
        remote.connect()
        try:
            manager = ResourceManager(topology, config, extra_plugins=[remote])
            _report("remote", _measure(manager, cycles))
        finally:
            remote.close()
    finally:
        process.terminate()
        process.wait(10)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
