"""Simulator throughput: N nodes × M pods with one NUMA-aware scheduler configuration.

Usage: python bench/simulate.py [--quick] [--nodes N] [--pods M] [--scheduler NAME] [--percentage P]
[--digest] [--progress] [--profile]

Prints ``metric: value unit`` lines. Target (issue "Simulator"): 5,000 nodes × 100,000 pods in
≤ 60 s on the 2-core machine, with one NUMA-aware scheduler configuration. The default is the
NodeResourceTopologyMatch plugin's own default configuration: LeastAllocated scoring, no reserve cache
(``cacheResyncPeriodSeconds`` unset: passthrough); ``--scheduler numa-LeastAllocated-overreserve``
adds the over-reserve cache (its periodic resync and per-bind reservations cost about a quarter more). ``--percentage`` is kube-scheduler's percentageOfNodesToScore (0, the
default: its adaptive default, 500 of 5,000 nodes; 100: filter and score every node).

``--digest`` prints ``# outcome_sha256 <hex>``: a hash of everything the run decided (every binding
and admission verdict in order, the counts, the sampled series; not the timings), so that two
revisions can be checked bit-identical on the same workload (run the bench with each one's ``src`` on
``PYTHONPATH``). ``max_rss`` is the process's peak resident memory; ``simulate_cpu_seconds`` the
process's CPU time over the simulation (a busy shared machine disturbs it less than wall time).
``--progress`` reports each 5 % of simulated time on stderr, so a very long run (20,000 × 400,000)
says how far it got.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import json
import pstats
import resource
import sys
import time
from collections.abc import Callable

from numaplane.placement.arrays.sampling import num_feasible_nodes_to_find
from numaplane.sim.cluster import DEFAULT_CLUSTER, build_templates, scale_cluster
from numaplane.sim.engine import run_scheduler
from numaplane.sim.spec import SchedulerSpec, SimConfig
from numaplane.sim.workload import WorkloadMix, generate_workload


def _progress_printer() -> Callable[[float], None]:
    """A progress callback printing each further 5 % of simulated time to stderr (a long run says how far it got)."""
    started = time.perf_counter()
    cpu = time.process_time()
    shown = [0]

    def show(fraction: float) -> None:
        step = int(fraction * 20)
        if step > shown[0]:
            shown[0] = step
            wall, used = time.perf_counter() - started, time.process_time() - cpu
            print(f"# progress {step * 5} % of simulated time, {wall:.0f} s wall, {used:.0f} s CPU", file=sys.stderr)

    return show


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="500 nodes × 10,000 pods")
    parser.add_argument("--nodes", type=int)
    parser.add_argument("--pods", type=int)
    parser.add_argument("--scheduler", default="numa-LeastAllocated-passthrough")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument(
        "--progress", action="store_true", help="report each 5 % of simulated time on stderr (CPU and wall seconds)"
    )
    parser.add_argument(
        "--digest",
        action="store_true",
        help="print a SHA-256 of the run's outcome (every binding and admission, the sampled series; not timings)",
    )
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
    cpu_started = time.process_time()
    result = run_scheduler(spec, templates, arrivals, config, _progress_printer() if args.progress else None)
    simulate_cpu = time.process_time() - cpu_started
    if profiler:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
    print(f"nodes: {nodes} count")
    print(f"pods: {pods} count")
    print(f"# scheduler {spec.name}")
    print(f"feasible_nodes_sought_per_cycle: {num_feasible_nodes_to_find(args.percentage, nodes)} count")
    print(f"setup_seconds: {setup:.2f} s")
    print(f"simulate_seconds: {result.wall_seconds:.2f} s")
    # CPU seconds of this process over the simulation: less disturbed than wall time on a shared machine
    print(f"simulate_cpu_seconds: {simulate_cpu:.2f} s")
    print(f"scheduling_attempts: {result.attempts} count")
    print(f"attempts_per_second: {result.attempts / result.wall_seconds:.0f} attempts/s")
    print(f"placed: {result.placed} count")
    print(f"rejected_at_node: {result.rejected} count")
    print(f"pending_at_end: {result.pending} count")
    print(f"max_rss: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    if args.digest:
        outcome = result.to_dict()
        outcome.pop("wallSeconds")
        outcome["series"] = [
            result.times,
            result.rejections_over_time,
            result.utilisation_over_time,
            result.pending_over_time,
            sorted(result.zone_utilisation.items()),
        ]
        outcome["admissions"] = result.admissions
        outcome["messages"] = sorted(result.messages.items())
        text = json.dumps(outcome, sort_keys=True).encode()
        print(f"# outcome_sha256 {hashlib.sha256(text).hexdigest()}")


if __name__ == "__main__":
    main()
