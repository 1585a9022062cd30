"""Benchmark: per-zone computation for a node with 500 exclusive containers (target < 5 ms).

Machine: 4 NUMA nodes × 64 CPUs (256 CPUs), Static memory policy (memory + 1Gi hugepages blocks),
two device resources per node. 500 containers in 250 pods: every fourth one holds 2 exclusive CPUs
and a memory block, every container one device; some memory blocks span two nodes.

``publish_*``: the agent/simulator's incremental :class:`~numaplane.nrt.from_manager.NRTPublisher`
on a :class:`~numaplane.policy.manager.ResourceManager` (4 NUMA nodes × 16 cores × 2 threads, static
CPU and memory policies, 8 NICs) holding 40 guaranteed pods; each round admits or removes one pod and
times one ``publish()`` (one or two zones change per round).

Prints ``metric: value unit`` lines. ``--quick`` runs fewer rounds.
"""

from __future__ import annotations

import argparse
import statistics
import time

from numaplane.nrt.fingerprint import compute_fingerprint, select_pods
from numaplane.nrt.from_manager import NRTPublisher
from numaplane.nrt.podresources import (
    AllocatableResources,
    ContainerDevices,
    ContainerMemory,
    ContainerResources,
    PodResources,
)
from numaplane.nrt.zones import MachineView, NUMANodeView, compute_zones
from numaplane.policy.manager import ResourceManager
from numaplane.resources.pod import Pod, parse_pod
from numaplane.topology.cpuset import CPUSet
from numaplane.topology.model import synthetic

GI = 1 << 30
NUMA = 4
CPUS_PER_NUMA = 64
CONTAINERS = 500


def build() -> tuple[MachineView, AllocatableResources, list[PodResources]]:
    nodes = tuple(
        NUMANodeView(
            n,
            CPUSet.range(n * CPUS_PER_NUMA, (n + 1) * CPUS_PER_NUMA - 1),
            {d: 10 if d == n else 21 for d in range(NUMA)},
            256 * GI,
            {"hugepages-1Gi": 16 * GI},
        )
        for n in range(NUMA)
    )
    devices = tuple(
        ContainerDevices(f"vendor.com/dev{k}", tuple(f"d{k}-{n}-{i}" for i in range(128)), (n,))
        for n in range(NUMA)
        for k in range(2)
    )
    memory = tuple(
        ContainerMemory(t, s, (n,)) for n in range(NUMA) for t, s in (("memory", 250 * GI), ("hugepages-1Gi", 16 * GI))
    )
    allocatable = AllocatableResources(devices, tuple(range(2, NUMA * CPUS_PER_NUMA)), memory)
    pods = []
    next_cpu = 2
    for p in range(CONTAINERS // 2):
        containers = []
        for c in range(2):
            idx = p * 2 + c
            numa = idx % NUMA
            cpu_ids: tuple[int, ...] = ()
            mem: tuple[ContainerMemory, ...] = ()
            if idx % 4 == 0 and next_cpu + 2 < NUMA * CPUS_PER_NUMA:
                cpu_ids = (next_cpu, next_cpu + 1)
                next_cpu += 2
                span = (numa, (numa + 1) % NUMA) if idx % 40 == 0 else (numa,)
                mem = (ContainerMemory("memory", GI, span), ContainerMemory("hugepages-1Gi", GI // 8, (numa,)))
            dev = (ContainerDevices(f"vendor.com/dev{idx % 2}", (f"d{idx % 2}-{numa}-{idx // 8}",), (numa,)),)
            containers.append(ContainerResources(f"c{c}", dev, cpu_ids, mem))
        pods.append(PodResources(f"pod-{p}", f"ns-{p % 7}", tuple(containers)))
    return MachineView(nodes), allocatable, pods


def _pod(i: int) -> Pod:
    res = {"cpu": str(1 + i % 3), "memory": f"{1 + i % 2}Gi", "example.com/nic": str(i % 2)}
    if i % 5 == 0:
        res["hugepages-1Gi"] = "1Gi"
    return parse_pod(
        {
            "metadata": {"name": f"p{i}", "namespace": f"ns-{i % 3}", "uid": f"u{i}"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": res, "limits": res}}]},
        }
    )


def publisher_rounds(rounds: int) -> list[float]:
    """Milliseconds per ``publish()`` after one admission or removal (see the module docstring)."""
    topo = synthetic(
        sockets=2, numa_per_socket=2, cores_per_numa=16, memory_per_numa_bytes=64 * GI, hugepages_1g_per_numa=8
    )
    config = {
        "topologyManager": {"policy": "single-numa-node"},
        "cpuManager": {"reservedCPUCount": 2},
        "memoryManager": {"policy": "Static", "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}]},
        "devices": {"example.com/nic": [{"id": f"nic{i}", "numa": [i % 4]} for i in range(8)]},
    }
    manager = ResourceManager(topo, config)
    publisher = NRTPublisher(manager, "bench-node")
    live = [f"u{i}" for i in range(40) if manager.admit(_pod(i)).admitted]
    publisher.publish()
    samples = []
    for r in range(rounds):
        if r % 2:
            manager.remove(live.pop(0))
        elif manager.admit(_pod(40 + r)).admitted:
            live.append(f"u{40 + r}")
        start = time.perf_counter()
        publisher.publish()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def timed(fn: object, rounds: int) -> list[float]:
    assert callable(fn)
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    args = parser.parse_args()
    rounds = 30 if args.quick else 300
    machine, allocatable, pods = build()
    zones_ms = timed(lambda: compute_zones("bench-node", machine, allocatable, pods), rounds)
    fp_ms = timed(lambda: compute_fingerprint(select_pods(pods, "with-exclusive-resources")), rounds)
    print(f"containers: {CONTAINERS} count")
    print(f"numa_zones: {NUMA} count")
    print(f"zones_median: {statistics.median(zones_ms):.3f} ms")
    print(f"zones_p95: {sorted(zones_ms)[int(0.95 * (len(zones_ms) - 1))]:.3f} ms")
    print(f"fingerprint_median: {statistics.median(fp_ms):.3f} ms")
    publish_ms = publisher_rounds(rounds * 10)
    print(f"publish_median: {statistics.median(publish_ms):.4f} ms")
    print(f"publish_p95: {sorted(publish_ms)[int(0.95 * (len(publish_ms) - 1))]:.4f} ms")


if __name__ == "__main__":
    main()
