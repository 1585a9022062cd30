"""Benchmark: Topology Manager merge and full admission (devices + CPU + memory) on the 8-NUMA fixture.

Usage: ``python bench/admission_tm.py [--quick] [--seed N]``. Prints ``metric: value unit`` lines:

* ``merge_preferred_p50/p99``: ``TopologyManager.merge`` of 3 providers (devices, CPU, memory with
  hugepages: 4 resource lists of up to 255 hints each, the kubelet's worst case on 8 nodes);
* ``merge_nonpreferred_p50/p99``: the same when the providers have no common preferred mask
  (the non-preferred search over achievable ANDs);
* ``memory_hints_p50/p99``, ``device_hints_p50/p99``: one provider's hint generation;
* ``admit_<policy>_p50/p99``: ``TopologyManager.admit`` of a one-container Guaranteed pod (CPU, memory,
  hugepages, GPU) through the three providers, container scope, on a node already partly filled,
  followed by removal (not timed);
* ``admit_pod_scope_p50/p99``: the same with a two-container pod and pod scope (best-effort).

Each figure is printed twice: wall-clock (``_p50``/``_p99``) and thread CPU time (``_cpu_p50``/
``_cpu_p99``), which is not inflated when other processes compete for the machine.

Fixture: ``topoDualSocketMultiNumaPerSocketHTLarge`` (256 CPUs, 8 NUMA nodes) from
``$NUMAPLANE_SHARED/conformance/topologies``; memory per node is synthetic (64 GiB, 16 x 1 GiB pages).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from numaplane.policy.cpu import StaticPolicy
from numaplane.policy.cpu_state import CPUState
from numaplane.policy.devices import DevicePolicy
from numaplane.policy.hints import NUMAMask, TopologyHint, all_masks
from numaplane.policy.memory import MemoryPolicy
from numaplane.policy.memory_state import NUMAMemory
from numaplane.policy.topology_manager import ProviderHints, TopologyManager
from numaplane.resources.pod import Container, Pod, parse_pod
from numaplane.topology.document import topology_from_dict
from numaplane.topology.model import Topology

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("NUMAPLANE_SHARED", str(REPO.parent / "shared")))
FIXTURE = "topoDualSocketMultiNumaPerSocketHTLarge"
GIB = 1 << 30


class CPUProvider:
    """Adapts the stateless CPU policy to the topology manager's provider protocol."""

    def __init__(self, policy: StaticPolicy) -> None:
        self.policy = policy
        self.state: CPUState = policy.new_state()

    def hints(self, pod: Pod, container: Container) -> ProviderHints:
        return self.policy.hints(self.state, pod, container)

    def pod_hints(self, pod: Pod) -> ProviderHints:
        return self.policy.pod_hints(self.state, pod)

    def allocate(self, pod: Pod, container: Container, hint: TopologyHint) -> object:
        return self.policy.allocate(self.state, pod, container, hint)


def load_fixture() -> Topology:
    with (SHARED / "conformance" / "topologies" / f"{FIXTURE}.json").open(encoding="utf-8") as fh:
        return topology_from_dict(json.load(fh))


def pod_doc(uid: str, containers: list[tuple[int, int, int, int]]) -> Pod:
    """Containers of (cpus, memory GiB, hugepages-1Gi GiB, gpus)."""
    specs = []
    for i, (cpus, mem, huge, gpus) in enumerate(containers):
        res: dict[str, str] = {"cpu": str(cpus), "memory": f"{mem}Gi"}
        if huge:
            res["hugepages-1Gi"] = f"{huge}Gi"
        if gpus:
            res["nvidia.com/gpu"] = str(gpus)
        specs.append({"name": f"c{i}", "resources": {"requests": res, "limits": res}})
    return parse_pod({"metadata": {"name": uid, "uid": uid}, "spec": {"containers": specs}})


def machine(topology: Topology) -> tuple[CPUProvider, MemoryPolicy, DevicePolicy]:
    nodes = topology.memory_numa_ids
    memory = MemoryPolicy([NUMAMemory(n, 64 * GIB, ((GIB, 16),)) for n in nodes], {n: {"memory": GIB} for n in nodes})
    memory.start()
    devices = DevicePolicy({"nvidia.com/gpu": [(f"gpu{i}", [nodes[i % len(nodes)]]) for i in range(8)]}, nodes)
    return CPUProvider(StaticPolicy(topology, 2)), memory, devices


Figures = tuple[float, float, float, float]


def quantiles(wall: list[float], cpu: list[float]) -> Figures:
    """(wall p50, wall p99, cpu p50, cpu p99) in microseconds."""

    def p99(samples: list[float]) -> float:
        samples = sorted(samples)
        return samples[min(len(samples) - 1, round(0.99 * (len(samples) - 1)))] * 1e6

    return statistics.median(wall) * 1e6, p99(wall), statistics.median(cpu) * 1e6, p99(cpu)


def timed(fn: Callable[[], object], rounds: int) -> Figures:
    wall: list[float] = []
    cpu: list[float] = []
    clock, cpu_clock = time.perf_counter, time.thread_time
    for _ in range(rounds):
        t0, c0 = clock(), cpu_clock()
        fn()
        wall.append(clock() - t0)
        cpu.append(cpu_clock() - c0)
    return quantiles(wall, cpu)


def bench_merge(nodes: tuple[int, ...], rounds: int) -> dict[str, Figures]:
    masks = all_masks(nodes)

    def full(pref_size: int, offset: int) -> list[TopologyHint]:
        # every mask; preferred = masks of the minimal size, rotated so providers can disagree
        return [TopologyHint(m, m.count() == pref_size and (m.bits >> offset) & 1 == 1) for m in masks]

    agreeing = [
        {"nvidia.com/gpu": full(1, 0)},
        {"cpu": full(1, 0)},
        {"memory": full(1, 0), "hugepages-1Gi": full(1, 0)},
    ]
    only = [TopologyHint(NUMAMask.of(nodes[0]), True)] + [TopologyHint(m, False) for m in masks if m.count() >= 2]
    other = [TopologyHint(NUMAMask.of(nodes[-1]), True)] + [TopologyHint(m, False) for m in masks if m.count() >= 2]
    disagreeing = [{"nvidia.com/gpu": only}, {"cpu": other}, {"memory": full(2, 1), "hugepages-1Gi": full(2, 2)}]
    tm = TopologyManager("restricted", "container", {}, nodes)
    return {
        "merge_preferred": timed(lambda: tm.merge(agreeing), rounds),
        "merge_nonpreferred": timed(lambda: tm.merge(disagreeing), rounds),
    }


def fill(
    cpu: CPUProvider, memory: MemoryPolicy, devices: DevicePolicy, tm: TopologyManager, rng: random.Random
) -> None:
    for i in range(24):
        pod = pod_doc(
            f"fill-{i}", [(rng.choice([2, 4, 6]), rng.choice([2, 4]), rng.choice([0, 1]), rng.choice([0, 0, 1]))]
        )
        result = tm.admit(pod, [devices, cpu, memory])
        if not result.admitted:
            release(pod, cpu, memory, devices, tm)


def release(pod: Pod, cpu: CPUProvider, memory: MemoryPolicy, devices: DevicePolicy, tm: TopologyManager) -> None:
    for c in pod.all_containers():
        cpu.policy.remove_container(cpu.state, pod.uid, c.name)
    memory.remove_pod(pod.uid)
    devices.remove_pod(pod.uid)
    tm.remove_pod(pod.uid)


def bench_admit(topology: Topology, policy: str, scope: str, rounds: int, rng: random.Random) -> Figures:
    cpu, memory, devices = machine(topology)
    tm = TopologyManager.from_topology(topology, policy, scope)
    fill(cpu, memory, devices, tm, rng)
    wall: list[float] = []
    cpu_time: list[float] = []
    clock, cpu_clock = time.perf_counter, time.thread_time
    for i in range(rounds):
        shape = (rng.choice([1, 2, 4, 8]), rng.choice([1, 2, 4]), rng.choice([0, 1, 2]), rng.choice([0, 1, 2]))
        pod = pod_doc(f"probe-{i}", [shape, (2, 1, 0, 0)] if scope == "pod" else [shape])
        t0, c0 = clock(), cpu_clock()
        tm.admit(pod, [devices, cpu, memory])
        wall.append(clock() - t0)
        cpu_time.append(cpu_clock() - c0)
        release(pod, cpu, memory, devices, tm)
    return quantiles(wall, cpu_time)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (CI smoke run)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rounds = 200 if args.quick else 2000
    rng = random.Random(args.seed)
    topology = load_fixture()
    nodes = topology.memory_numa_ids
    results = bench_merge(nodes, rounds)
    cpu, memory, devices = machine(topology)
    tm = TopologyManager.from_topology(topology, "best-effort")
    fill(cpu, memory, devices, tm, rng)
    probe = pod_doc("probe", [(4, 2, 1, 1)])
    results["memory_hints"] = timed(lambda: memory.hints(probe, probe.containers[0]), rounds)
    fresh = machine(topology)[2]  # all 8 GPUs free: every mask is scored
    results["device_hints"] = timed(lambda: fresh.hints(probe, probe.containers[0]), rounds)
    for policy in ("best-effort", "restricted", "single-numa-node"):
        results[f"admit_{policy}"] = bench_admit(topology, policy, "container", rounds, rng)
    results["admit_pod_scope"] = bench_admit(topology, "best-effort", "pod", rounds, rng)
    for name, (p50, p99, cpu50, cpu99) in results.items():
        print(f"{name}_p50: {p50:.1f} us")
        print(f"{name}_p99: {p99:.1f} us")
        print(f"{name}_cpu_p50: {cpu50:.1f} us")
        print(f"{name}_cpu_p99: {cpu99:.1f} us")


if __name__ == "__main__":
    main()
