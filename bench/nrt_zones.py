"""Benchmark: per-zone computation for a node with 500 exclusive containers (target < 5 ms).

Machine: 4 NUMA nodes × 64 CPUs (256 CPUs), Static memory policy (memory + 1Gi hugepages blocks),
two device resources per node. 500 containers in 250 pods: every fourth one holds 2 exclusive CPUs
and a memory block, every container one device; some memory blocks span two nodes.

Prints ``metric: value unit`` lines. ``--quick`` runs fewer rounds.
"""

from __future__ import annotations

import argparse
import statistics
import time

from numaplane.nrt.fingerprint import compute_fingerprint, select_pods
from numaplane.nrt.podresources import (
    AllocatableResources,
    ContainerDevices,
    ContainerMemory,
    ContainerResources,
    PodResources,
)
from numaplane.nrt.zones import MachineView, NUMANodeView, compute_zones
from numaplane.topology.cpuset import CPUSet

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


if __name__ == "__main__":
    main()
