"""Benchmark: event-to-published latency of the exporter (target p99 < 200 ms).

Everything real but the cluster: the exporter (default options: 10 scans/s at most, inotify on the
notify file) reads a gRPC PodResources server on a unix socket and a synthetic sysfs tree (4 NUMA
nodes x 16 CPUs), and publishes through lightkube to the project's fake API server on 127.0.0.1;
all in one process and one event loop, as on a 2-core node.

Each round changes one pod's exclusive CPUs in the PodResources server, touches the notify file
(t0), and waits until the API server's store holds the new object (t1, seen by a direct watch on
the store). Rounds are spaced 150 ms apart so that the rate limit does not delay them (it would add
up to 100 ms by design). Then as many touches without any change measure what an unchanged event
costs (no write expected).

Prints ``metric: value unit`` lines. ``--quick`` runs 30 rounds instead of 200.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))

from numaplane.exporter.daemon import Exporter
from numaplane.exporter.options import ExporterOptions, NotifyBackend, RefreshMode
from numaplane.grpcapi.podresources.server import PodResourcesServer, StaticProvider
from numaplane.kube.port import EventType
from numaplane.kube.resources import CRD, NODE, NODE_RESOURCE_TOPOLOGY
from numaplane.nrt.crd import crd_manifest
from numaplane.nrt.podresources import AllocatableResources, ContainerMemory, ContainerResources, PodResources
from numaplane.observability.logs import configure_logging
from numaplane.testing.fakeapi import FakeApiServer
from numaplane_harness.sysfs import write_uniform_sysfs

NODE_NAME = "bench-node"
NUMA = 4
CPUS_PER_NUMA = 16
GAP_SECONDS = 0.15
GiB = 1 << 30


def pods_for(round_no: int) -> list[PodResources]:
    """40 pods with one exclusive CPU and 1 GiB each; pod 0 moves between NUMA nodes 2 and 3 every round."""
    pods = []
    for i in range(40):
        cpu = 1 + i if i else (41, 50)[round_no % 2]
        numa = cpu // CPUS_PER_NUMA
        memory = (ContainerMemory("memory", GiB, (numa,)),)
        pods.append(PodResources(f"pod-{i}", f"ns-{i % 5}", (ContainerResources("main", (), (cpu,), memory),)))
    return pods


def _mean_ms(registry: Any, name: str, labels: dict[str, str]) -> float:
    total = registry.get_sample_value(f"{name}_sum", labels) or 0.0
    count = registry.get_sample_value(f"{name}_count", labels) or 1.0
    return float(total) / float(count) * 1000


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def run(rounds: int, backend: NotifyBackend) -> None:
    work = Path(tempfile.mkdtemp(prefix="npb-", dir="/tmp"))
    try:
        sysfs = write_uniform_sysfs(work / "host", nodes=NUMA, cpus_per_node=CPUS_PER_NUMA, mem_gib=32)
        reserved = {0, CPUS_PER_NUMA, 2 * CPUS_PER_NUMA, 3 * CPUS_PER_NUMA}
        allocatable = AllocatableResources(
            cpu_ids=tuple(c for c in range(NUMA * CPUS_PER_NUMA) if c not in reserved),
            memory=tuple(ContainerMemory("memory", 30 * GiB, (n,)) for n in range(NUMA)),
        )
        provider = StaticProvider(allocatable, pods_for(0))
        async with FakeApiServer() as api, PodResourcesServer(provider, work / "pr.sock") as podres:
            await api.store.create(CRD, crd_manifest())
            await api.store.create(NODE, {"metadata": {"name": NODE_NAME}})
            options = ExporterOptions(
                node_name=NODE_NAME,
                podresources_socket=str(podres.path),
                sysfs_root=sysfs,
                topology_manager_policy="single-numa-node",
                topology_manager_scope="pod",
                refresh_mode=RefreshMode.BOTH,
                period_seconds=3600.0,
                notify_file=work / "notify",
                notify_backend=backend,
            )
            kube = api.port_client()
            exporter = Exporter(options, kube=kube)
            await exporter.start()
            store = api.store
            stream = store.watch(NODE_RESOURCE_TOPOLOGY)
            try:
                first = await asyncio.wait_for(anext(stream), 10)  # the initial create
                assert first.type is EventType.ADDED
                latencies: list[float] = []
                requests_before = len(api.requests)
                for round_no in range(1, rounds + 1):
                    provider.update(allocatable, pods_for(round_no))
                    start = time.perf_counter()
                    (work / "notify").write_text("")
                    event = await asyncio.wait_for(anext(stream), 5)
                    latencies.append((time.perf_counter() - start) * 1000)
                    assert event.type is EventType.MODIFIED
                    await asyncio.sleep(GAP_SECONDS)
                requests = len(api.requests) - requests_before
                writes_before = exporter.status.outcomes.get("update", 0)
                cycles_before = exporter.status.cycles
                for _ in range(rounds):
                    (work / "notify").write_text("")
                    await asyncio.sleep(GAP_SECONDS)
                unchanged_writes = exporter.status.outcomes.get("update", 0) - writes_before
                unchanged_cycles = exporter.status.cycles - cycles_before
                registry = exporter.metrics.registry
                scan_ms = _mean_ms(registry, "numaplane_exporter_scan_duration_seconds", {})
                write_ms = _mean_ms(registry, "numaplane_exporter_write_duration_seconds", {"operation": "update"})
            finally:
                with contextlib.suppress(Exception):
                    await stream.aclose()  # type: ignore[attr-defined]
                await exporter.close()
                await kube.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    p99 = percentile(latencies, 0.99)
    print(f"notify_backend: {exporter.notify.backend if exporter.notify else 'none'} name")
    print(f"rounds: {rounds} count")
    print("pods: 40 count")
    print(f"numa_zones: {NUMA} count")
    print(f"event_to_published_p50: {statistics.median(latencies):.2f} ms")
    print(f"event_to_published_p90: {percentile(latencies, 0.90):.2f} ms")
    print(f"event_to_published_p99: {p99:.2f} ms")
    print(f"event_to_published_max: {max(latencies):.2f} ms")
    print("target_p99: 200 ms")
    print(f"target_met: {int(p99 < 200)} bool")
    print(f"scan_mean: {scan_ms:.2f} ms")
    print(f"write_mean: {write_ms:.2f} ms")
    print(f"api_requests_per_update: {requests / rounds:.2f} count")
    print(f"unchanged_events_scanned: {unchanged_cycles} count")
    print(f"unchanged_events_written: {unchanged_writes} count")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="30 rounds instead of 200")
    parser.add_argument("--notify-backend", choices=[b.value for b in NotifyBackend], default="auto")
    args = parser.parse_args()
    configure_logging("json", "warning")  # stderr; stdout carries only the metric lines
    asyncio.run(run(30 if args.quick else 200, NotifyBackend(args.notify_backend)))


if __name__ == "__main__":
    main()
