"""Benchmark: static CPU policy admission (hints + allocate) on the 256-CPU, 8-NUMA fixture.

Usage: ``python bench/admission_cpu.py [--quick] [--seed N]``. Prints ``metric: value unit`` lines:

* ``admit_p50`` / ``admit_p99``: one ``hints`` + ``allocate`` call pair for a one-container Guaranteed
  pod (1–16 CPUs, topology hint = the first preferred hint) on a node that is already partly filled;
* ``admit_remove_rate``: admit + remove cycles per second;
* ``take_<mode>_rate``: raw ``takeByTopology`` calls per second with random free sets (the modes of
  kubelet-managers.md §I, to compare with upstream's Go figures).

The fixture comes from ``$NUMAPLANE_SHARED/conformance/topologies`` (default ``../shared`` next to the repo).
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
from numaplane.policy.cpu_assignment import index_for, take_distributed, take_packed
from numaplane.policy.errors import AdmissionError
from numaplane.policy.hints import TopologyHint
from numaplane.resources.pod import Pod, parse_pod
from numaplane.topology.document import topology_from_dict
from numaplane.topology.model import Topology, synthetic

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("NUMAPLANE_SHARED", str(REPO.parent / "shared")))
FIXTURE = "topoDualSocketMultiNumaPerSocketHTLarge"


def load_fixture(name: str) -> Topology:
    with (SHARED / "conformance" / "topologies" / f"{name}.json").open(encoding="utf-8") as fh:
        return topology_from_dict(json.load(fh))


def guaranteed_pod(uid: str, cpus: int) -> Pod:
    res = {"cpu": str(cpus), "memory": "1Gi"}
    return parse_pod(
        {
            "metadata": {"name": uid, "uid": uid},
            "spec": {"containers": [{"name": "main", "resources": {"requests": res, "limits": res}}]},
        }
    )


def pick_hint(hints: dict[str, list[TopologyHint]] | None) -> TopologyHint | None:
    if not hints or not hints["cpu"]:
        return None
    preferred = [h for h in hints["cpu"] if h.preferred]
    return (preferred or hints["cpu"])[0]


def bench_admission(topology: Topology, rounds: int, rng: random.Random) -> dict[str, float]:
    policy = StaticPolicy(topology, 2)
    state = policy.new_state()
    # Fill about half of the machine with long-lived pods so the allocator works on fragmented state.
    for i in range(60):
        pod = guaranteed_pod(f"fill-{i}", rng.choice([1, 2, 3, 4]))
        try:
            policy.allocate(state, pod, "main", pick_hint(policy.hints(state, pod, "main")))
        except AdmissionError:
            break
    pods = [guaranteed_pod(f"probe-{i}", rng.choice([1, 2, 4, 6, 8, 16])) for i in range(rounds)]
    samples: list[float] = []
    clock = time.perf_counter
    cycle_start = clock()
    for pod in pods:
        t0 = clock()
        hint = pick_hint(policy.hints(state, pod, "main"))
        policy.allocate(state, pod, "main", hint)
        samples.append(clock() - t0)
        policy.remove_container(state, pod.uid, "main")
    cycles = len(pods) / (clock() - cycle_start)
    samples.sort()
    return {
        "admit_p50": statistics.median(samples) * 1e6,
        "admit_p99": samples[min(len(samples) - 1, int(len(samples) * 0.99))] * 1e6,
        "admit_remove_rate": cycles,
    }


def bench_take(topology: Topology, calls: int, rng: random.Random) -> dict[str, float]:
    idx = index_for(topology)
    cpus = topology.all_cpus.sorted()
    frees = []
    for _ in range(calls):
        free = 0
        for c in rng.sample(cpus, rng.randint(len(cpus) // 4, len(cpus))):
            free |= 1 << c
        frees.append((free, rng.randint(1, min(64, free.bit_count()))))
    modes: dict[str, Callable[[int, int], int]] = {
        "packed": lambda f, n: take_packed(idx, f, n),
        "spread": lambda f, n: take_packed(idx, f, n, spread=True),
        "distributed_g1": lambda f, n: take_distributed(idx, f, n, 1),
        "distributed_g2": lambda f, n: take_distributed(idx, f, n - n % 2 or 2, 2),
    }
    out = {}
    for name, fn in modes.items():
        t0 = time.perf_counter()
        for free, n in frees:
            fn(free, n)
        out[f"take_{name}_rate"] = calls / (time.perf_counter() - t0)
    uncore = synthetic(sockets=2, numa_per_socket=1, cores_per_numa=64, threads_per_core=2, uncore_per_numa=8)
    uidx = index_for(uncore)
    ucpus = uncore.all_cpus.sorted()
    ufrees = []
    for _ in range(calls):
        free = 0
        for c in rng.sample(ucpus, rng.randint(len(ucpus) // 4, len(ucpus))):
            free |= 1 << c
        ufrees.append((free, rng.randint(1, min(64, free.bit_count()))))
    for name, flag in (("packed_uncore_machine", False), ("packed_uncore_aligned", True)):
        t0 = time.perf_counter()
        for free, n in ufrees:
            take_packed(uidx, free, n, uncore=flag)
        out[f"take_{name}_rate"] = calls / (time.perf_counter() - t0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (smoke run)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    topology = load_fixture(FIXTURE)
    rounds, calls = (500, 200) if args.quick else (5000, 1000)
    bench_admission(topology, 50, random.Random(0))  # warm caches
    results = bench_admission(topology, rounds, rng)
    units = {"admit_p50": "us", "admit_p99": "us", "admit_remove_rate": "cycles/s"}
    for key, value in results.items():
        print(f"{key}: {value:.1f} {units[key]}")
    for key, value in bench_take(topology, calls, rng).items():
        print(f"{key}: {value:.0f} calls/s")


if __name__ == "__main__":
    main()
