"""Benchmark: the standalone scheduler's per-decision latency over 5,000 nodes (p50 / p99).

Setup (no API server: the informers' events are fed to :class:`SchedulerState` directly): 5,000 Nodes
(64 CPUs, 256 GiB, 110 pods, 4 NICs; 2 % cordoned, 5 % tainted ``NoSchedule``, three zone labels)
with two-zone NRTs (``single-numa-node``, container scope; a quarter of the nodes with zones too full
for the pod), the over-reserve cache, and 20,000 pods already bound (1–4 CPUs, 1–8 GiB each), so
every node has some usage.

Measured: :meth:`StandaloneScheduler.decide` for a Guaranteed pod (2 CPUs, 4 GiB, one NIC, a
toleration-free ``nodeSelector``-free spec), each decision followed by ``assume`` on the chosen node
(as the scheduling loop does), so every decision sees the usage the previous one charged; and
``decide`` plus its ``FailedScheduling`` message for a pod that fits nowhere (every node's reasons).

Prints ``metric: value unit`` lines. ``--quick`` runs fewer rounds.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Any

from nrtdoc import nrt_document

from numaplane.kube.memory import InMemoryKube
from numaplane.observability.logs import configure_logging
from numaplane.resources.pod import parse_pod
from numaplane.scheduler.config import SchedulerConfig
from numaplane.scheduler.informers import ClusterInformers
from numaplane.scheduler.loop import StandaloneScheduler
from numaplane.scheduler.state import SchedulerState

GI = 1 << 30
SCHEDULER = "numaplane-scheduler"


def node_doc(i: int, rng: random.Random) -> dict[str, Any]:
    name = f"worker-{i:05d}"
    alloc = {"cpu": "64", "memory": "256Gi", "pods": "110", "vendor.com/nic": "4", "ephemeral-storage": "100Gi"}
    spec: dict[str, Any] = {}
    roll = rng.random()
    if roll < 0.02:
        spec["unschedulable"] = True
    elif roll < 0.07:
        spec["taints"] = [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": f"zone-{i % 3}"},
        },
        "spec": spec,
        "status": {"capacity": dict(alloc), "allocatable": alloc},
    }


def nrt_doc(i: int, rng: random.Random) -> dict[str, Any]:
    full = rng.random() < 0.25
    zones = []
    for _ in range(2):
        cpu_free = 1 if full else rng.randint(4, 32)
        zones.append({"cpu": (32, cpu_free), "memory": (128 * GI, (2 if full else 64) * GI), "vendor.com/nic": (2, 1)})
    return nrt_document(f"worker-{i:05d}", zones)


def pod_doc(name: str, cpu: str, memory: str, *, nic: bool = False, node: str = "") -> dict[str, Any]:
    reqs = {"cpu": cpu, "memory": memory}
    if nic:
        reqs["vendor.com/nic"] = "1"
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER,
        "containers": [{"name": "app", "image": "app:1", "resources": {"requests": reqs, "limits": dict(reqs)}}],
    }
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "bench"}}
    if node:
        spec["nodeName"] = node
        doc["status"] = {"phase": "Running"}
    doc["spec"] = spec
    return doc


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--nodes", type=int, default=5000)
    args = parser.parse_args()
    configure_logging("json", "warning")
    rng = random.Random(7)
    started = time.perf_counter()
    state = SchedulerState(SchedulerConfig(scheduler_names=(SCHEDULER,)))
    for i in range(args.nodes):
        state.node_upserted(node_doc(i, rng))
        state.nrt_upserted(nrt_doc(i, rng))
    for k in range(4 * args.nodes):
        node = f"worker-{rng.randrange(args.nodes):05d}"
        state.pod_upserted(None, pod_doc(f"bound-{k}", str(rng.randint(1, 4)), f"{rng.randint(1, 8)}Gi", node=node))
    kube = InMemoryKube()
    scheduler = StandaloneScheduler(kube, state, ClusterInformers(kube, state))
    setup_s = time.perf_counter() - started

    rounds = 20 if args.quick else 200
    placed: list[float] = []
    feasible = 0
    for r in range(-3, rounds):  # three warm-up decisions
        pod = parse_pod(pod_doc(f"new-{r + 3}", "2", "4Gi", nic=True))
        start = time.perf_counter()
        decision = scheduler.decide(pod)
        elapsed = time.perf_counter() - start
        assert decision.node is not None
        state.assume(pod, decision.node)
        if r >= 0:
            placed.append(elapsed * 1000)
            feasible = len(decision.scores)
    impossible: list[float] = []
    rejected = 0
    for r in range(-1, max(3, rounds // 4)):
        pod = parse_pod(pod_doc(f"huge-{r + 1}", "100", "4Gi"))
        start = time.perf_counter()
        decision = scheduler.decide(pod)
        message = decision.message  # every node's reasons, as the FailedScheduling event needs
        elapsed = time.perf_counter() - start
        assert decision.node is None and message.startswith(f"0/{args.nodes} nodes are available")
        rejected = len(decision.reasons)
        if r >= 0:
            impossible.append(elapsed * 1000)
    print(f"nodes: {args.nodes} count")
    print(f"setup: {setup_s:.1f} s")
    print(f"feasible_nodes: {feasible} count")
    print(f"decision_p50: {statistics.median(placed):.2f} ms")
    print(f"decision_p99: {pct(placed, 0.99):.2f} ms")
    print(f"unschedulable_rejected_nodes: {rejected} count")
    print(f"unschedulable_decision_p50: {statistics.median(impossible):.2f} ms")


if __name__ == "__main__":
    main()
