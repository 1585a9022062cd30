"""Benchmark: NUMA filter + score of one pod over a 5,000-node × 8-zone cluster.

Prints ``metric: value unit`` lines: pods/s with the vectorised pipeline (wall time, and per CPU
second of this process, which a busy shared machine disturbs less), pods/s with a straightforward
per-node loop (``filter`` then ``score`` on each node's pre-parsed view, the same data), and the ratio.
The pipeline's results are checked against the loop's for every measured pod.

Usage: ``python bench/placement.py [--quick] [--nodes N] [--zones Z] [--strategy TYPE]``
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from typing import Any

from nrtdoc import nrt_document

from numaplane.nrt.parse import parse_strict
from numaplane.placement.arrays.pipeline import Pipeline
from numaplane.placement.explain.filter import filter as filter_node
from numaplane.placement.explain.score import score
from numaplane.placement.model.node import NodeInfo, node_info
from numaplane.placement.model.result import Fit
from numaplane.placement.model.strategies import STRATEGY_TYPES, ScoringStrategy
from numaplane.placement.model.view import NodeTopology, node_topology
from numaplane.resources.pod import Pod, parse_pod

GI = 1 << 30


def make_nrt(rng: random.Random, name: str, zones: int, scope: str) -> dict[str, Any]:
    rows = []
    for _ in range(zones):
        cpu = rng.choice([16, 24, 32])
        mem = rng.choice([64, 96, 128]) * GI
        rows.append(
            {
                "cpu": (cpu, rng.randint(0, cpu)),
                "memory": (mem, rng.randint(0, mem // GI) * GI),
                "hugepages-1Gi": (16 * GI, rng.randint(0, 16) * GI),
                "vendor.com/nic": (4, rng.randint(0, 4)),
            }
        )
    return nrt_document(name, rows, costs=True, scope=rng.choice(["container", "pod"]) if scope == "mixed" else scope)


def make_pod(rng: random.Random, i: int) -> Pod:
    cpu = str(rng.choice([2, 4, 8, 12]))
    mem = f"{rng.choice([4, 8, 16, 32])}Gi"
    reqs: dict[str, str] = {"cpu": cpu, "memory": mem}
    if rng.random() < 0.3:
        reqs["vendor.com/nic"] = "1"
    if rng.random() < 0.2:
        reqs["hugepages-1Gi"] = "2Gi"
    containers = [{"name": "main", "resources": {"requests": reqs, "limits": dict(reqs)}}]
    if rng.random() < 0.3:
        side = {"cpu": "1", "memory": "1Gi"}
        containers.append({"name": "sidecar", "resources": {"requests": side, "limits": dict(side)}})
    return parse_pod({"metadata": {"name": f"p{i}", "namespace": "bench"}, "spec": {"containers": containers}})


def loop(pod: Pod, nodes: list[tuple[str, NodeTopology, NodeInfo]], strategy: ScoringStrategy) -> dict[str, int]:
    """The straightforward per-node loop: filter, then score the feasible nodes."""
    out = {}
    for name, topo, info in nodes:
        if isinstance(filter_node(pod, topo, info), Fit):
            out[name] = score(pod, topo, info, strategy)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer pods (a few seconds in total)")
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--zones", type=int, default=8)
    ap.add_argument("--strategy", choices=STRATEGY_TYPES, default="LeastAllocated")
    ap.add_argument("--scope", choices=["container", "pod", "mixed"], default="container")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    strategy = ScoringStrategy(args.strategy)
    node_doc = {
        "metadata": {"name": "x"},
        "status": {"allocatable": {"cpu": "256", "memory": "1Ti", "hugepages-1Gi": "128Gi", "vendor.com/nic": "32"}},
    }
    info = node_info(node_doc)
    nodes = []
    t0 = time.perf_counter()
    pipe = Pipeline(strategy, zones=args.zones)
    for i in range(args.nodes):
        name = f"node{i:05d}"
        topo = node_topology(parse_strict(make_nrt(rng, name, args.zones, args.scope)))
        nodes.append((name, topo, NodeInfo(name, info.allocatable)))
        pipe.cluster.upsert(name, topo, NodeInfo(name, info.allocatable))
    load_s = time.perf_counter() - t0
    pods_vec = 200 if args.quick else 2000
    pods_loop = 2 if args.quick else 10
    pods = [make_pod(rng, i) for i in range(pods_vec)]

    t0, c0 = time.perf_counter(), time.process_time()
    results = [pipe.evaluate(p) for p in pods]
    vec_s, vec_cpu_s = time.perf_counter() - t0, time.process_time() - c0

    t0 = time.perf_counter()
    looped = [loop(p, nodes, strategy) for p in pods[:pods_loop]]
    loop_s = time.perf_counter() - t0

    for res, want in zip(results, looped, strict=False):
        got = dict(res.ranking())
        if got != want:
            print("error: pipeline and loop disagree", file=sys.stderr)
            return 1
    vec_rate = pods_vec / vec_s
    loop_rate = pods_loop / loop_s
    print(f"nodes: {args.nodes} nodes")
    print(f"zones_per_node: {args.zones} zones")
    print(f"strategy: {args.strategy}")
    print(f"scope: {args.scope}")
    print(f"cluster_load: {load_s:.2f} s")
    print(f"pipeline_filter_score: {vec_rate:.1f} pods/s")
    print(f"pipeline_latency: {1000 * vec_s / pods_vec:.3f} ms/pod")
    # per CPU second of this process: less sensitive than wall time to other work on a shared machine
    print(f"pipeline_filter_score_cpu: {pods_vec / vec_cpu_s:.1f} pods/cpu-s")
    print(f"loop_filter_score: {loop_rate:.2f} pods/s")
    print(f"loop_latency: {1000 * loop_s / pods_loop:.1f} ms/pod")
    print(f"speedup: {vec_rate / loop_rate:.1f} x")
    print(f"feasible_nodes_mean: {sum(len(r.feasible_nodes()) for r in results) / len(results):.0f} nodes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
