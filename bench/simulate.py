"""Simulator throughput: N nodes × M pods with one NUMA-aware scheduler configuration.

Usage: python bench/simulate.py [--quick] [--nodes N] [--pods M] [--scheduler NAME] [--percentage P]

Prints ``metric: value unit`` lines. Target (issue "Simulator"): 5,000 nodes × 100,000 pods in
≤ 60 s on the 2-core machine, with one NUMA-aware scheduler configuration. The default is the
NodeResourceTopologyMatch plugin's own default configuration: LeastAllocated scoring, no reserve cache
(``cacheResyncPeriodSeconds`` unset: passthrough); ``--scheduler numa-LeastAllocated-overreserve``
adds the over-reserve cache (its periodic resync and per-bind reservations cost about a quarter more). ``--percentage`` is kube-scheduler's percentageOfNodesToScore (0, the
default: its adaptive default, 500 of 5,000 nodes; 100: filter and score every node).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

from numaplane.placement.arrays.sampling import num_feasible_nodes_to_find
from numaplane.sim.cluster import DEFAULT_CLUSTER, build_templates, scale_cluster
from numaplane.sim.engine import run_scheduler
from numaplane.sim.spec import SchedulerSpec, SimConfig
from numaplane.sim.workload import WorkloadMix, generate_workload


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="500 nodes × 10,000 pods")
    parser.add_argument("--nodes", type=int)
    parser.add_argument("--pods", type=int)
    parser.add_argument("--scheduler", default="numa-LeastAllocated-passthrough")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument(
        "--percentage", type=int, default=0, help="percentageOfNodesToScore (0: adaptive, 100: every node)"
    )
    args = parser.parse_args()
    nodes = args.nodes or (500 if args.quick else 5000)
    pods = args.pods or (10_000 if args.quick else 100_000)
    started = time.perf_counter()
    templates = build_templates(scale_cluster(DEFAULT_CLUSTER, nodes), policy="single-numa-node", scope="container")
    devices = tuple(sorted({r for t in templates for r, d in t.config.devices.items() if d}))
    rate = pods / 1000.0  # every pod arrives within 1,000 simulated seconds
    arrivals = generate_workload(
        7, WorkloadMix(pods=pods, arrival_rate_per_s=rate, mean_duration_s=900, device_resources=devices)
    )
    setup = time.perf_counter() - started
    spec = SchedulerSpec.parse(args.scheduler)
    profiler = cProfile.Profile() if args.profile else None
    if profiler:
        profiler.enable()
    config = SimConfig(samples=20, percentage_of_nodes_to_score=args.percentage)
    result = run_scheduler(spec, templates, arrivals, config)
    if profiler:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
    print(f"nodes: {nodes} count")
    print(f"pods: {pods} count")
    print(f"# scheduler {spec.name}")
    print(f"feasible_nodes_sought_per_cycle: {num_feasible_nodes_to_find(args.percentage, nodes)} count")
    print(f"setup_seconds: {setup:.2f} s")
    print(f"simulate_seconds: {result.wall_seconds:.2f} s")
    print(f"scheduling_attempts: {result.attempts} count")
    print(f"attempts_per_second: {result.attempts / result.wall_seconds:.0f} attempts/s")
    print(f"placed: {result.placed} count")
    print(f"rejected_at_node: {result.rejected} count")
    print(f"pending_at_end: {result.pending} count")


if __name__ == "__main__":
    main()
