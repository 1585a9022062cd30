"""Builders and fakes for the scheduler tests: Node / NRT / Pod documents, a fake kubelet + exporter."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from numaplane.kube.errors import NotFound
from numaplane.kube.memory import InMemoryKube
from numaplane.kube.resources import CRD, EVENT, NODE, NODE_RESOURCE_TOPOLOGY, POD
from numaplane.nrt.crd import crd_manifest
from numaplane.nrt.fingerprint import compute_fingerprint

GI = 1 << 30
NRT = NODE_RESOURCE_TOPOLOGY


def captures(shared: Path) -> Path:
    return shared / "wire" / "captures" / "extender"


def load_capture(shared: Path, name: str) -> Any:
    return json.loads((captures(shared) / name).read_text())


def node_doc(
    name: str,
    cpu: int | str = 10,
    memory: str = "64Gi",
    *,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    extra: dict[str, str] | None = None,
) -> dict[str, Any]:
    alloc = {"cpu": str(cpu), "memory": memory, "pods": "110", **(extra or {})}
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": spec,
        "status": {"capacity": dict(alloc), "allocatable": alloc},
    }


def zone_doc(numa: int | str, resources: dict[str, tuple[Any, Any]]) -> dict[str, Any]:
    """A zone; ``resources`` maps name → (allocatable, available) (capacity = allocatable)."""
    return {
        "name": numa if isinstance(numa, str) else f"node-{numa}",
        "type": "Node",
        "resources": [
            {"name": r, "capacity": str(alloc), "allocatable": str(alloc), "available": str(avail)}
            for r, (alloc, avail) in resources.items()
        ],
    }


def nrt_doc(
    node: str,
    zones: list[dict[str, Any]],
    *,
    policy: str = "single-numa-node",
    scope: str = "container",
    fingerprint: str | None = None,
) -> dict[str, Any]:
    attrs = [{"name": "topologyManagerPolicy", "value": policy}, {"name": "topologyManagerScope", "value": scope}]
    if fingerprint is not None:
        attrs.append({"name": "nodeTopologyPodsFingerprint", "value": fingerprint})
        attrs.append({"name": "nodeTopologyPodsFingerprintMethod", "value": "all"})
    return {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": node},
        "attributes": attrs,
        "zones": zones,
    }


def pod_doc(
    name: str,
    cpu: int | str = 1,
    memory: str = "1Gi",
    *,
    namespace: str = "default",
    scheduler: str = "numaplane-scheduler",
    guaranteed: bool = True,
    node_selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    reqs = {"cpu": str(cpu), "memory": memory}
    resources: dict[str, Any] = {"requests": reqs}
    if guaranteed:
        resources["limits"] = dict(reqs)
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "main", "image": "busybox", "resources": resources}],
    }
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


async def seed_crd(store: InMemoryKube) -> None:
    await store.create(CRD, crd_manifest())


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 10.0, interval: float = 0.02) -> None:
    """Wait until ``await check()`` is true (AssertionError after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        if await check():
            return
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(interval)


async def events_for(store: InMemoryKube, pod: str, reason: str, namespace: str = "default") -> list[dict[str, Any]]:
    items = (await store.list(EVENT, namespace=namespace)).items
    return [e for e in items if e.get("reason") == reason and (e.get("involvedObject") or {}).get("name") == pod]


class FakeKubelets:
    """Kubelets with ``single-numa-node`` admission and, optionally, an exporter publishing NRTs.

    Each node has ``zones`` zones of ``cpu`` CPUs and ``memory_gib`` GiB. A newly bound pod is admitted
    on the lowest zone where its cpu and memory fit (status ``Running``) or rejected with
    ``TopologyAffinityError`` (status ``Failed``, the over-commit upstream users hit). With ``publish``,
    each admission rewrites the node's NRT (``available`` and the pod fingerprint of admitted pods).
    """

    def __init__(
        self,
        store: InMemoryKube,
        nodes: list[str],
        *,
        zones: int = 2,
        cpu: int = 5,
        memory_gib: int = 8,
        publish: bool = False,
    ) -> None:
        self.store = store
        self.nodes = nodes
        self.zones = zones
        self.cpu = cpu
        self.memory = memory_gib * GI
        self.publish = publish
        self.placed: dict[str, dict[str, tuple[int, int, int]]] = {n: {} for n in nodes}  # pod → (zone, cpu, mem)
        self.rejected: list[str] = []
        self._seen: set[str] = set()
        self._task: asyncio.Task[None] | None = None

    def free(self, node: str, zone: int) -> tuple[int, int]:
        used = [p for p in self.placed[node].values() if p[0] == zone]
        return self.cpu - sum(p[1] for p in used), self.memory - sum(p[2] for p in used)

    def nrt(self, node: str) -> dict[str, Any]:
        zones = []
        for z in range(self.zones):
            cpu, mem = self.free(node, z)
            zones.append(zone_doc(z, {"cpu": (self.cpu, cpu), "memory": (self.memory, mem)}))
        pods = [key.split("/", 1) for key in self.placed[node]]
        fingerprint = compute_fingerprint([(ns, name) for ns, name in pods]) if self.publish else None
        return nrt_doc(node, zones, fingerprint=fingerprint)

    async def seed(self, node_cpu: int | None = None) -> None:
        """Create the Nodes and their (initial) NRTs."""
        for node in self.nodes:
            await self.store.create(NODE, node_doc(node, node_cpu or self.cpu * self.zones, f"{self.zones * 8}Gi"))
            await self.store.create(NRT, self.nrt(node))

    async def _admit(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        node = pod["spec"]["nodeName"]
        req = pod["spec"]["containers"][0]["resources"]["requests"]
        cpu = int(req["cpu"])
        mem = int(req["memory"].removesuffix("Gi")) * GI
        for z in range(self.zones):
            free_cpu, free_mem = self.free(node, z)
            if cpu <= free_cpu and mem <= free_mem:
                self.placed[node][key] = (z, cpu, mem)
                await self.store.patch_status(
                    POD, meta["name"], {"status": {"phase": "Running"}}, namespace=meta["namespace"]
                )
                if self.publish:
                    current = await self.store.get(NRT, node)
                    await self.store.replace(NRT, {**self.nrt(node), "metadata": current["metadata"]})
                return
        self.rejected.append(key)
        await self.store.patch_status(
            POD,
            meta["name"],
            {
                "status": {
                    "phase": "Failed",
                    "reason": "TopologyAffinityError",
                    "message": "Resources cannot be allocated with Topology locality",
                }
            },
            namespace=meta["namespace"],
        )

    async def _loop(self) -> None:
        while True:
            for pod in (await self.store.list(POD)).items:
                node = (pod.get("spec") or {}).get("nodeName")
                key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
                if node in self.placed and key not in self._seen:
                    self._seen.add(key)
                    with contextlib.suppress(NotFound):
                        await self._admit(pod)
            await asyncio.sleep(0.01)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def pods_per_zone(self) -> dict[str, list[int]]:
        return {
            n: [sum(1 for p in pods.values() if p[0] == z) for z in range(self.zones)]
            for n, pods in self.placed.items()
        }
