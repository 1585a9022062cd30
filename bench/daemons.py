"""Benchmark: resident memory (RSS) of every daemon, idle and under a standard load.

Each daemon runs for real, as ``numaplane <command>`` in a child process, against the project's fake
API server (:class:`numaplane.testing.fakeapi.FakeApiServer`, in this process):

* ``operator``  — idle only (no custom resources);
* ``extender``  — idle (empty cluster); loaded: 5,000 Nodes with their NRTs (4 zones) in its informers
  and cache, then filter + prioritize cycles for a Guaranteed pod over every node's name;
* ``scheduler`` — standalone (``scheduler run``): idle (empty cluster); loaded: the same 5,000 Nodes and
  NRTs, then 1,000 pending pods that it schedules and binds;
* ``exporter``  — PodResources answers from ``fake://DIR`` and a generated 4-NUMA-node, 256-CPU sysfs
  tree: idle with no pods, loaded with 200 pods (one exclusive CPU each), periodic refresh every second;
* ``agent``     — behind a fake NRI runtime that speaks the real wire protocol on a unix socket (the
  private containerd fixture needs images for real containers; the agent's side is the same): idle
  after registration and Synchronize, loaded after 200 CreateContainer calls (a third Guaranteed).

Prints ``metric: value unit`` lines: ``<daemon>_idle_rss`` and ``<daemon>_loaded_rss`` (VmRSS after
the load was handled), ``<daemon>_idle_peak_rss`` / ``<daemon>_loaded_peak_rss`` (VmHWM), all in MB
(10**6 bytes), and whether the idle daemon had imported numpy, matplotlib or rich
(``<daemon>_imports_numpy`` ...: 1 or 0; the child reports its ``sys.modules`` on SIGUSR1, then exits).
Targets (issue "Performance"): <= 80 MB idle each, <= 150 MB for the scheduler holding 5,000 nodes'
NRTs.

Usage: ``python bench/daemons.py [--quick] [--distinct-zones] [--only NAME ...]`` (``--quick``: 500
nodes, 100 pods; ``--distinct-zones``: no two NRT zones alike, so the schedulers share none of them —
the default cluster has 32 distinct zones, as many identical idle nodes would).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))

import aiohttp
from nrtdoc import nrt_document

from numaplane.kube.resources import CRD, NODE, NODE_RESOURCE_TOPOLOGY, POD
from numaplane.nri.proto import api_pb2
from numaplane.nrt.crd import crd_manifest
from numaplane.operator.crds import all_crds
from numaplane.testing.fakeapi import FakeApiServer
from numaplane.topology.document import topology_to_dict
from numaplane.topology.model import synthetic
from numaplane_harness.nrifake import FakeRuntime
from numaplane_harness.sysfs import write_uniform_sysfs

GI = 1 << 30
HEAVY = ("numpy", "matplotlib", "rich", "grpc", "lightkube", "aiohttp", "jsonschema")
# Runs the CLI; on SIGTERM prints which heavy libraries were imported (last stderr line).
_RUN = (
    "import signal, sys\n"
    "from numaplane.cli import main\n"
    "def report(*_):\n"
    f"    heavy = {HEAVY!r}\n"
    "    print('imported', ','.join(h for h in heavy if h in sys.modules), file=sys.stderr, flush=True)\n"
    "    raise SystemExit(0)\n"
    "signal.signal(signal.SIGUSR1, lambda *_: report())\n"
    "main()\n"
)


def report(metric: str, value: float, unit: str) -> None:
    print(f"{metric}: {value:.1f} {unit}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Daemon:
    """One ``numaplane`` command in a child process, with its health address on 127.0.0.1."""

    def __init__(self, name: str, args: list[str], workdir: Path, health_port: int) -> None:
        self.name, self.args, self.health_port = name, args, health_port
        self.log = workdir / f"{name}.log"
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        env = {**os.environ, "NODE_NAME": "bench-node"}
        with self.log.open("wb") as log:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", _RUN, *self.args, stdout=log, stderr=log, env=env
            )

    def status(self, key: str) -> float:
        """A ``/proc/PID/status`` memory figure in MB (10**6 bytes)."""
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024 / 1e6
        return 0.0

    async def ready(self, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        url = f"http://127.0.0.1:{self.health_port}/readyz"
        async with aiohttp.ClientSession() as http:
            while time.monotonic() < deadline:
                assert self.proc is not None
                if self.proc.returncode is not None:
                    raise SystemExit(f"{self.name} exited:\n{self.log.read_text()[-3000:]}")
                try:
                    async with http.get(url) as r:
                        if r.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.2)
        raise SystemExit(f"{self.name} not ready after {timeout_s} s:\n{self.log.read_text()[-3000:]}")

    async def stop(self) -> str:
        """Stop the daemon; return the heavy libraries it had imported."""
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(10)  # SIGUSR1: report imports and exit
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
                await self.proc.wait()
        lines = [line for line in self.log.read_text(errors="replace").splitlines() if line.startswith("imported")]
        return lines[-1].split(" ", 1)[1] if lines and " " in lines[-1] else ""


async def measure(
    daemon: Daemon, load: Callable[[], Awaitable[None]] | None, settle_s: float = 2.0, start_ready: bool = True
) -> None:
    await daemon.start()
    try:
        if start_ready:
            await daemon.ready()
        await asyncio.sleep(settle_s)
        if load is None:
            report(f"{daemon.name}_idle_rss", daemon.status("VmRSS"), "MB")
        else:
            await load()
            await asyncio.sleep(settle_s)
            report(f"{daemon.name}_loaded_rss", daemon.status("VmRSS"), "MB")
        report(f"{daemon.name}_{'idle' if load is None else 'loaded'}_peak_rss", daemon.status("VmHWM"), "MB")
    finally:
        imported = await daemon.stop()
    for lib in ("numpy", "matplotlib", "rich"):
        if load is None:
            report(f"{daemon.name}_imports_{lib}", 1.0 if lib in imported.split(",") else 0.0, "bool")


# --- cluster content ----------------------------------------------------------------------------------


def node_doc(i: int) -> dict[str, Any]:
    name = f"worker-{i:05d}"
    alloc = {"cpu": "252", "memory": "1000Gi", "hugepages-1Gi": "64Gi", "vendor.com/nic": "16", "pods": "250"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "capacity": alloc,
            "allocatable": alloc,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def nrt_doc(i: int, distinct: bool = False) -> dict[str, Any]:
    """Node ``i``'s NRT: 4 zones; 32 distinct zone contents among all nodes, or with ``distinct``
    every zone of every node different (its free memory), the worst case for sharing equal zones."""
    zones = [
        {
            "cpu": (31, 31 - (i + z) % 8),
            "memory": (125 * GI, (100 - z) * GI - (4 * i + z + 1) * (1 << 20) * distinct),
            "hugepages-1Gi": (8 * GI, 8 * GI),
            "vendor.com/nic": (2, 1 + (i + z) % 2),
        }
        for z in range(4)
    ]
    return nrt_document(f"worker-{i:05d}", zones, costs=True)


def pod_doc(i: int, scheduler: str) -> dict[str, Any]:
    reqs = {"cpu": "2", "memory": "4Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"bench-{i:05d}", "namespace": "default", "uid": f"{i:08d}-0000-4000-8000-00000000beef"},
        "spec": {
            "schedulerName": scheduler,
            "containers": [{"name": "app", "image": "app:1", "resources": {"requests": reqs, "limits": reqs}}],
        },
        "status": {"phase": "Pending"},
    }


async def fill_nodes(server: FakeApiServer, nodes: int, distinct: bool = False) -> None:
    for i in range(nodes):
        await server.store.create(NODE, node_doc(i))
        await server.store.create(NODE_RESOURCE_TOPOLOGY, nrt_doc(i, distinct))


# --- daemons ------------------------------------------------------------------------------------------


async def bench_operator(server: FakeApiServer, work: Path) -> None:
    port = free_port()
    args = ["operator", "--api-server", server.url, "--image", "numaplane:bench", "--no-leader-elect"]
    args += ["--metrics-address", ""]
    args += ["--health-address", f"127.0.0.1:{port}"]
    await measure(Daemon("operator", args, work, port), None)


def scheduler_args(kind: str, server: FakeApiServer, port: int) -> list[str]:
    args = ["scheduler", kind, "--api-server", server.url, "--log-level", "warning"]
    if kind == "extender":
        return [*args, "--address", f"127.0.0.1:{port}"]
    return [*args, "--no-leader-elect", "--metrics-address", "", "--health-address", f"127.0.0.1:{port}"]


async def bench_schedulers(server: FakeApiServer, work: Path, nodes: int, pods: int, distinct: bool) -> None:
    for name, kind in (("extender", "extender"), ("scheduler", "run")):
        port = free_port()
        await measure(Daemon(name, scheduler_args(kind, server, port), work, port), None)
    started = time.perf_counter()
    await fill_nodes(server, nodes, distinct)
    report("cluster_nodes", nodes, "nodes")
    report("cluster_fill_seconds", time.perf_counter() - started, "s")

    port = free_port()
    names = [f"worker-{i:05d}" for i in range(nodes)]

    async def extender_load() -> None:
        reqs = {"cpu": "4", "memory": "8Gi"}
        pod = pod_doc(0, "default-scheduler")
        pod["spec"]["containers"][0]["resources"] = {"requests": reqs, "limits": reqs}
        body = json.dumps({"Pod": pod, "Nodes": None, "NodeNames": names}).encode()
        async with aiohttp.ClientSession() as http:
            for _ in range(20):
                async with http.post(f"http://127.0.0.1:{port}/filter", data=body) as r:
                    kept = (await r.json())["NodeNames"]
                prio = json.dumps({"Pod": pod, "Nodes": None, "NodeNames": kept}).encode()
                async with http.post(f"http://127.0.0.1:{port}/prioritize", data=prio) as r:
                    await r.read()

    await measure(Daemon("extender", scheduler_args("extender", server, port), work, port), extender_load, 5.0)

    port = free_port()

    async def scheduler_load() -> None:
        for i in range(pods):
            await server.store.create(POD, pod_doc(i, "numaplane-scheduler"))
        deadline = time.monotonic() + 300
        started = time.perf_counter()
        bound = 0
        while time.monotonic() < deadline:
            items = (await server.store.list(POD, namespace="default")).items
            bound = sum(1 for p in items if p.get("spec", {}).get("nodeName"))
            if bound >= pods:
                break
            await asyncio.sleep(0.5)
        report("scheduler_pods_bound", bound, "pods")
        report("scheduler_bind_seconds", time.perf_counter() - started, "s")

    await measure(Daemon("scheduler", scheduler_args("run", server, port), work, port), scheduler_load, 5.0)


async def bench_exporter(server: FakeApiServer, work: Path, pods: int) -> None:
    await server.store.create(NODE, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bench-node"}})
    sysfs = write_uniform_sysfs(work / "host", nodes=4, cpus_per_node=64, mem_gib=64)
    fake = work / "podres"
    fake.mkdir()
    (fake / "get_allocatable_resources.json").write_text(json.dumps({"cpu_ids": list(range(1, 256))}))

    def write_pods(count: int) -> None:
        listed = [
            {"name": f"p{i}", "namespace": "default", "containers": [{"name": "c", "cpu_ids": [1 + i]}]}
            for i in range(count)
        ]
        tmp = fake / "list.json.tmp"
        tmp.write_text(json.dumps({"pod_resources": listed}))
        tmp.replace(fake / "list.json")

    def args(port: int) -> list[str]:
        return [
            "exporter", "--api-server", server.url, "--node-name", "bench-node", "--podresources-socket",
            f"fake://{fake}", "--sysfs-root", str(sysfs), "--period", "1", "--topology-manager-policy",
            "single-numa-node", "--topology-manager-scope", "container", "--metrics-address", "",
            "--health-address", f"127.0.0.1:{port}", "--log-level", "warning",
        ]  # fmt: skip

    write_pods(0)
    port = free_port()
    await measure(Daemon("exporter", args(port), work, port), None)

    async def load() -> None:
        write_pods(pods)
        await asyncio.sleep(3)  # three periodic refreshes

    port = free_port()
    await measure(Daemon("exporter", args(port), work, port), load)


async def bench_agent(server: FakeApiServer, work: Path, containers: int) -> None:
    topo = work / "topology.json"
    machine = synthetic(sockets=2, numa_per_socket=2, cores_per_numa=32, threads_per_core=2)
    topo.write_text(json.dumps(topology_to_dict(machine)))
    config = work / "node.yaml"
    config.write_text(
        json.dumps(
            {
                "apiVersion": "numaplane.io/v1",
                "kind": "NodeResourceConfig",
                "topologyManager": {"policy": "single-numa-node"},
                "cpuManager": {"policy": "static", "reservedCPUs": "0,128"},
            }
        )
    )
    sock_dir = Path(tempfile.mkdtemp(prefix="npd-", dir="/tmp"))  # unix socket paths are short
    try:
        for loaded in (False, True):
            runtime = FakeRuntime(request_timeout_seconds=10.0)
            nri = sock_dir / "nri.sock"
            nri.unlink(missing_ok=True)
            await runtime.listen(str(nri))
            state = work / f"state-{int(loaded)}"
            state.mkdir()
            port = free_port()
            args = [
                "agent", "--nri-socket", str(nri), "--state-dir", str(state), "--topology", str(topo),
                "--config", str(config), "--node-name", "bench-node", "--podresources-socket",
                str(sock_dir / f"pr{int(loaded)}.sock"), "--metrics-address", "",
                "--health-address", f"127.0.0.1:{port}", "--log-level", "warning",
            ]  # fmt: skip

            async def load(rt: FakeRuntime = runtime) -> None:
                for i in range(containers):
                    guaranteed = i % 3 == 0
                    uid = f"{i:08d}-0000-4000-8000-000000000000"
                    pod = api_pb2.PodSandbox(id=f"{i:064x}", name=f"pod-{i}", uid=uid, namespace="bench")
                    parent = "/kubepods" if guaranteed else "/kubepods/besteffort"
                    pod.linux.cgroup_parent = f"{parent}/pod{uid}"
                    c = api_pb2.Container(id=f"c{i:063x}", pod_sandbox_id=pod.id, name="main")
                    res = c.linux.resources
                    res.cpu.period.value = 100000
                    if guaranteed:
                        res.cpu.shares.value = 1024
                        res.cpu.quota.value = 100000
                        res.memory.limit.value = 256 << 20
                    else:
                        res.cpu.shares.value = 2
                    await rt.create_container(pod, c)

            daemon = Daemon("agent", args, work, port)
            try:
                await measure(daemon, load if loaded else None)
            finally:
                await runtime.close()
    finally:
        shutil.rmtree(sock_dir, ignore_errors=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="500 nodes and 100 pods for the schedulers")
    parser.add_argument(
        "--distinct-zones", action="store_true", help="every NRT zone different (no two nodes share a zone)"
    )
    parser.add_argument("--only", action="append", choices=["operator", "schedulers", "exporter", "agent"])
    opts = parser.parse_args()
    nodes, pods = (500, 100) if opts.quick else (5000, 1000)
    only = set(opts.only or ["operator", "schedulers", "exporter", "agent"])
    print(f"# load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        async with FakeApiServer() as server:
            for crd in [crd_manifest(), *all_crds()]:
                await server.store.create(CRD, crd)
            if "operator" in only:
                await bench_operator(server, work)
            if "agent" in only:
                await bench_agent(server, work, 200)
            if "exporter" in only:
                await bench_exporter(server, work, 200)
            if "schedulers" in only:
                await bench_schedulers(server, work, nodes, pods, opts.distinct_zones)
    print(f"# load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
