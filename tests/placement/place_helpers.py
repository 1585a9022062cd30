"""Builders for placement tests: pods, NRT objects and nodes as plain JSON-ready dicts."""

from __future__ import annotations

from typing import Any

from numaplane.nrt.model import NodeResourceTopology
from numaplane.resources.pod import Pod, parse_pod


def container(
    name: str, requests: dict[str, Any] | None = None, *, guaranteed: bool = True, **extra: Any
) -> dict[str, Any]:
    reqs = {k: str(v) for k, v in (requests or {}).items()}
    resources: dict[str, Any] = {"requests": reqs}
    if guaranteed:
        resources["limits"] = dict(reqs)
    return {"name": name, "resources": resources, **extra}


def pod(
    name: str = "pod",
    containers: list[dict[str, Any]] | None = None,
    *,
    init: list[dict[str, Any]] | None = None,
    namespace: str = "default",
    node: str = "",
    scheduler: str = "topo-aware-scheduler",
    phase: str = "",
) -> Pod:
    spec: dict[str, Any] = {"containers": containers or [], "schedulerName": scheduler}
    if init:
        spec["initContainers"] = init
    if node:
        spec["nodeName"] = node
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"},
        "spec": spec,
    }
    if phase:
        doc["status"] = {"phase": phase}
    return parse_pod(doc)


def gu_pod(name: str = "pod", cpu: int | str = 1, memory: str = "1Gi", **kw: Any) -> Pod:
    """A Guaranteed single-container pod."""
    return pod(name, [container("c", {"cpu": cpu, "memory": memory})], **kw)


def zone(
    numa: int | str, resources: dict[str, Any], *, costs: dict[int, int] | None = None, ztype: str = "Node"
) -> dict[str, Any]:
    name = numa if isinstance(numa, str) else f"node-{numa}"
    out: dict[str, Any] = {
        "name": name,
        "type": ztype,
        "resources": [
            {"name": r, "capacity": str(v), "allocatable": str(v), "available": str(v)} for r, v in resources.items()
        ],
    }
    if costs:
        out["costs"] = [{"name": f"node-{k}", "value": v} for k, v in costs.items()]
    return out


def nrt_doc(
    node: str,
    zones: list[dict[str, Any]],
    *,
    policy: str | None = "single-numa-node",
    scope: str | None = "container",
    legacy: list[str] | None = None,
    attributes: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    attrs: dict[str, str] = {}
    if policy is not None:
        attrs["topologyManagerPolicy"] = policy
    if scope is not None:
        attrs["topologyManagerScope"] = scope
    attrs.update(attributes or {})
    doc: dict[str, Any] = {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": node},
        "zones": zones,
    }
    if annotations:
        doc["metadata"]["annotations"] = annotations
    if attrs:
        doc["attributes"] = [{"name": k, "value": v} for k, v in attrs.items()]
    if legacy is not None:
        doc["topologyPolicies"] = legacy
    return doc


def nrt(node: str, zones: list[dict[str, Any]], **kw: Any) -> NodeResourceTopology:
    return NodeResourceTopology.from_dict(nrt_doc(node, zones, **kw))


def node_doc(name: str, allocatable: dict[str, Any] | None = None) -> dict[str, Any]:
    alloc = {k: str(v) for k, v in (allocatable or {"cpu": "64", "memory": "256Gi"}).items()}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"capacity": alloc, "allocatable": alloc},
    }


def two_zone_nrt(node: str = "n1", cpu: int = 4, memory: str = "8Gi", **kw: Any) -> NodeResourceTopology:
    return nrt(node, [zone(0, {"cpu": cpu, "memory": memory}), zone(1, {"cpu": cpu, "memory": memory})], **kw)
