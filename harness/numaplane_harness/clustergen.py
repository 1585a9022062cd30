"""A generated cluster with consistent NRT objects, for snapshot / what-if tests and benchmarks.

:func:`generate_cluster` yields, node by node, the Node object, the pods bound to it and the NRT
object a node running numaplane's :class:`~numaplane.policy.manager.ResourceManager` publishes after
admitting those pods *in the order given* (so per-zone availability is exactly what the pods hold),
then the pending pods. Deterministic for a seed. Nothing here does I/O: callers create the objects on
a real control plane, the fake API server or an in-memory store.

Machines: synthetic topologies (one thread per core, so the NRT-derived model has the same CPU
structure; 2 or 4 NUMA nodes, 1 GiB hugepages, one ``example.com/nic`` device per NUMA node) with the
static CPU and memory policies and ``single-numa-node`` or ``best-effort`` topology policies.
Pods: Guaranteed pods of 1–8 exclusive CPUs (some with hugepages or a NIC), Burstable and BestEffort
ones; names sort in creation order within a node (``<node>-p<k>``).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from numaplane.nrt.from_manager import node_nrt
from numaplane.policy.config import parse_config
from numaplane.policy.manager import ResourceManager
from numaplane.resources.pod import parse_pod
from numaplane.topology.model import Topology, synthetic

__all__ = ["GeneratedNode", "generate_cluster", "pending_pods"]

NIC = "example.com/nic"
GIB = 1 << 30


@dataclass
class GeneratedNode:
    """One node: its Node object, the pods bound to it (creation order) and its NRT object."""

    node: dict[str, Any]
    pods: list[dict[str, Any]] = field(default_factory=list)
    nrt: dict[str, Any] = field(default_factory=dict)


def _machines() -> list[tuple[Topology, str]]:
    two = synthetic(sockets=2, cores_per_numa=16, threads_per_core=1, hugepages_1g_per_numa=8, name="gen-2n-32c")
    four = synthetic(
        sockets=2, numa_per_socket=2, cores_per_numa=12, threads_per_core=1, hugepages_1g_per_numa=4, name="gen-4n-48c"
    )
    return [(two, "single-numa-node"), (four, "single-numa-node"), (two, "best-effort")]


def _config(topology: Topology, policy: str) -> dict[str, Any]:
    return {
        "topologyManager": {"policy": policy, "scope": "container"},
        "cpuManager": {"policy": "static", "reservedCPUCount": 2},
        "memoryManager": {
            "policy": "Static",
            "reservedMemory": [{"numaNode": n.id, "limits": {"memory": "512Mi"}} for n in topology.numa_nodes],
        },
        "devices": {NIC: [{"id": f"nic{n.id}", "numa": [n.id]} for n in topology.numa_nodes]},
    }


def _pod_doc(name: str, rng: random.Random, node: str = "") -> dict[str, Any]:
    kind = rng.random()
    if kind < 0.6:
        cpus = rng.choice((1, 2, 2, 4, 4, 6, 8))
        req = {"cpu": str(cpus), "memory": f"{rng.choice((1, 2, 4))}Gi"}
        if rng.random() < 0.2:
            req["hugepages-1Gi"] = "1Gi"
        if rng.random() < 0.1:
            req[NIC] = "1"
        resources: dict[str, Any] = {"requests": req, "limits": dict(req)}
    elif kind < 0.9:
        resources = {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "2"}}
    else:
        resources = {}
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "registry.example/app:1", "resources": resources}],
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name.rsplit("-", 1)[0]}},
        "spec": spec,
    }


def generate_cluster(nodes: int, pods_per_node: int, *, seed: int = 1, fill: float = 1.0) -> Iterator[GeneratedNode]:
    """``nodes`` nodes with ``pods_per_node`` bound pods each (half as many on a ``1 - fill`` share of
    them). Pods are drawn at random and offered to the node's manager; one it refuses is not bound
    (so the NRT equals what the bound pods hold) and the next is drawn, at most ``4 * pods_per_node``."""
    rng = random.Random(seed)
    machines = _machines()
    for i in range(nodes):
        topology, policy = machines[i % len(machines)]
        name = f"node-{i:05d}"
        manager = ResourceManager(topology, parse_config(_config(topology, policy)))
        cpus = topology.num_cpus
        memory = sum(n.memory_total_bytes for n in topology.numa_nodes)
        hugepages = sum(h.total_bytes for n in topology.numa_nodes for h in n.hugepages)
        capacity = {
            "cpu": str(cpus),
            "memory": str(memory),
            "hugepages-1Gi": str(hugepages),
            NIC: str(len(topology.numa_nodes)),
            "pods": "110",
        }
        allocatable = dict(capacity, cpu=str(cpus - 2), memory=str(memory - hugepages - (512 << 20) * 2))
        node_doc = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "pool": policy}},
            "status": {"capacity": capacity, "allocatable": allocatable},
        }
        out = GeneratedNode(node_doc)
        wanted = pods_per_node if rng.random() < fill else pods_per_node // 2
        for k in range(4 * wanted):
            if len(out.pods) == wanted:
                break
            doc = _pod_doc(f"{name}-p{k:03d}", rng, name)
            pod = parse_pod({**doc, "metadata": {**doc["metadata"], "uid": f"{name}/{k}"}})
            if manager.admit(pod).admitted:
                out.pods.append(doc)
        out.nrt = node_nrt(manager, name).to_dict()
        yield out


def pending_pods(count: int, *, seed: int = 2) -> list[dict[str, Any]]:
    """``count`` unbound pods (``pending-<k>``)."""
    rng = random.Random(seed)
    return [_pod_doc(f"pending-{k:04d}", rng) for k in range(count)]
