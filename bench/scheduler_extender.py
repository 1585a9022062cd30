"""Benchmark: extender filter + prioritize latency through HTTP for 500 nodes (p50 / p99), or ``--nodes N``.

Setup: an in-process API store (``InMemoryKube``) with 500 (``--nodes``) Nodes and their NRTs (4 NUMA zones with cpu,
memory, hugepages-1Gi and a device; ``single-numa-node``, container scope; a third of the nodes with
zones already too full for the pod), the extender service (informers, over-reserve cache, vectorised
pipeline) on 127.0.0.1, and an aiohttp client on the same event loop posting kube-scheduler-shaped
requests for a Guaranteed pod (4 CPUs, 8 GiB, one device): ``NodeNames`` requests
(``nodeCacheCapable: true``) and full ``Nodes`` requests (``false``, ~3 KB per Node object).

A "cycle" is one filter followed by one prioritize on the nodes that passed, as kube-scheduler sends
them. Request bodies are encoded before timing and replies are read but not decoded, so the figures are
HTTP round trip plus the extender's own work (client and server share one process and core).

``<mode>_cycle_cpu``: the process's CPU time per cycle (client and server), which other processes'
load hardly changes, unlike the wall-clock figures.

Prints ``metric: value unit`` lines. ``--quick`` runs fewer rounds; ``--names-only`` measures only the
``NodeNames`` requests (at 5,000 nodes a full ``Nodes`` request is about 15 MB). Issue 18's target is
``--nodes 5000 --names-only``: ``names_cycle_p99`` at most 20 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

import aiohttp
from nrtdoc import nrt_document

from numaplane.kube.memory import InMemoryKube
from numaplane.kube.resources import CRD, NODE, NODE_RESOURCE_TOPOLOGY
from numaplane.nrt.crd import crd_manifest
from numaplane.observability.logs import configure_logging
from numaplane.scheduler.config import SchedulerConfig
from numaplane.scheduler.service import ExtenderService

NODES = 500
ZONES = 4
GI = 1 << 30


def node_doc(i: int) -> dict[str, Any]:
    name = f"worker-{i:04d}"
    alloc = {"cpu": "124", "memory": "500Gi", "hugepages-1Gi": "64Gi", "vendor.com/nic": "8", "pods": "250"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
                "node-role.kubernetes.io/worker": "",
                "topology.kubernetes.io/zone": f"zone-{i % 3}",
            },
            "annotations": {"volumes.kubernetes.io/controller-managed-attach-detach": "true"},
        },
        "spec": {"podCIDR": f"10.{i // 250}.{i % 250}.0/24"},
        "status": {
            "capacity": {**alloc, "cpu": "128", "memory": "512Gi"},
            "allocatable": alloc,
            "conditions": [
                {
                    "type": t,
                    "status": "False" if t != "Ready" else "True",
                    "lastHeartbeatTime": "2026-11-29T19:08:23Z",
                    "lastTransitionTime": "2026-11-29T19:08:23Z",
                    "reason": f"Kubelet{t}",
                    "message": f"kubelet reports {t}",
                }
                for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
            ],
            "addresses": [{"type": "InternalIP", "address": f"10.0.{i // 250}.{i % 250}"}],
            "nodeInfo": {"kubeletVersion": "v1.36.2", "containerRuntimeVersion": "containerd://1.7.24"},
            "images": [{"names": [f"registry.example/app-{k}:1"], "sizeBytes": 1000000 + k} for k in range(8)],
        },
    }


def nrt_doc(i: int) -> dict[str, Any]:
    full = i % 3 == 0
    zones = []
    for z in range(ZONES):
        cpu_free = 2 if full else 31 - (i + z) % 8
        rows = {
            "cpu": (31, cpu_free),
            "memory": (125 * GI, (20 if full else 100 - z) * GI),
            "hugepages-1Gi": (16 * GI, 16 * GI),
            "vendor.com/nic": (2, 1 + (i + z) % 2),
        }
        zones.append(rows)
    return nrt_document(f"worker-{i:04d}", zones, costs=True)


def pod_doc() -> dict[str, Any]:
    reqs = {"cpu": "4", "memory": "8Gi", "vendor.com/nic": "1"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bench", "namespace": "default", "uid": "00000000-0000-0000-0000-00000000beef"},
        "spec": {
            "schedulerName": "default-scheduler",
            "containers": [{"name": "app", "image": "app:1", "resources": {"requests": reqs, "limits": reqs}}],
        },
        "status": {"phase": "Pending", "qosClass": "Guaranteed"},
    }


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def run(rounds: int, count: int, names_only: bool) -> None:
    store = InMemoryKube()
    await store.create(CRD, crd_manifest())
    nodes = [node_doc(i) for i in range(count)]
    for i, node in enumerate(nodes):
        await store.create(NODE, node)
        await store.create(NODE_RESOURCE_TOPOLOGY, nrt_doc(i))
    service = ExtenderService(
        store, SchedulerConfig(scheduler_names=("default-scheduler",)), address="127.0.0.1:0", freeze_gc=True
    )
    await service.start()
    await service.informers.wait_for_sync()
    await asyncio.sleep(0.1)  # let the service freeze the start-up heap, as the CLI has it do
    served_nodes = list((await store.list(NODE)).items)
    base = f"http://127.0.0.1:{service.ports['extender']}"
    pod = pod_doc()
    by_names = json.dumps({"Pod": pod, "Nodes": None, "NodeNames": [n["metadata"]["name"] for n in nodes]}).encode()
    modes: tuple[tuple[str, bytes], ...] = (("names", by_names),)
    by_nodes = b""
    if not names_only:
        items = {"metadata": {}, "items": served_nodes}
        by_nodes = json.dumps({"Pod": pod, "Nodes": items, "NodeNames": None}).encode()
        modes += (("nodes", by_nodes),)
    results: dict[str, list[float]] = {}
    passing = 0
    async with aiohttp.ClientSession() as http:

        async def call(verb: str, body: bytes) -> bytes:
            async with http.post(f"{base}/{verb}", data=body, headers={"Content-Type": "application/json"}) as r:
                assert r.status == 200, await r.text()
                return await r.read()

        for mode, body in modes:
            # kube-scheduler sends prioritize the nodes that passed filter: build that body once, untimed
            reply = json.loads(await call("filter", body))
            if mode == "names":
                kept = reply["NodeNames"]
                prio = json.dumps({"Pod": pod, "Nodes": None, "NodeNames": kept}).encode()
            else:
                kept = [n["metadata"]["name"] for n in reply["Nodes"]["items"]]
                prio = json.dumps({"Pod": pod, "Nodes": reply["Nodes"], "NodeNames": None}).encode()
            passing = len(kept)
            for _ in range(3):  # warm up
                await call("filter", body)
                await call("prioritize", prio)
            for _ in range(rounds):
                cpu = time.process_time()
                start = time.perf_counter()
                await call("filter", body)
                mid = time.perf_counter()
                scores = await call("prioritize", prio)
                end = time.perf_counter()
                results.setdefault(f"{mode}_cycle_cpu", []).append((time.process_time() - cpu) * 1000)
                results.setdefault(f"{mode}_filter", []).append((mid - start) * 1000)
                results.setdefault(f"{mode}_prioritize", []).append((end - mid) * 1000)
                results.setdefault(f"{mode}_cycle", []).append((end - start) * 1000)
            assert len(json.loads(scores)) == passing
    await service.close()
    print(f"nodes: {count} count")
    print(f"zones_per_node: {ZONES} count")
    print(f"nodes_passing_filter: {passing} count")
    print(f"request_bytes_nodenames: {len(by_names)} bytes")
    if by_nodes:
        print(f"request_bytes_nodes: {len(by_nodes)} bytes")
    for key, samples in results.items():
        print(f"{key}_p50: {statistics.median(samples):.2f} ms")
        print(f"{key}_p99: {pct(samples, 0.99):.2f} ms")
    cycle = statistics.median(results["names_cycle"])
    print(f"names_cycles_per_second: {1000 / cycle:.0f} 1/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--nodes", type=int, default=NODES, help="cluster size (default %(default)s)")
    parser.add_argument("--names-only", action="store_true", help="only nodeCacheCapable (NodeNames) requests")
    args = parser.parse_args()
    configure_logging("json", "warning")  # as deployed: decision logs at debug level are filtered out
    asyncio.run(run(20 if args.quick else 200, args.nodes, args.names_only))


if __name__ == "__main__":
    main()
