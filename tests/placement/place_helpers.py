"""Builders for placement tests: pods, NRT objects and nodes as plain JSON-ready dicts."""

from __future__ import annotations

from typing import Any

from numaplane.nrt.model import NodeResourceTopology
from numaplane.nrt.parse import parse_strict
from numaplane.resources.errors import PodSpecError
from numaplane.resources.pod import Container, Pod, parse_pod
from numaplane.resources.quantity import parse_quantity


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


def unchecked_pod(doc: dict[str, Any]) -> Pod:
    """The pod of a well-formed document, built with the dataclasses: no validation, so negative
    quantities (which :func:`parse_pod` refuses, like the API server) reach the placement code.

    Covers what the placement tests write: name, namespace, containers, init containers (with
    ``restartPolicy``), ``overhead`` and pod-level ``resources``. Malformed quantities still raise
    :class:`QuantityError`."""

    def quantities(m: Any) -> dict[str, Any]:
        return {k: parse_quantity(v) for k, v in (m or {}).items()}

    def ctr(c: dict[str, Any], init: bool) -> Container:
        res = c.get("resources") or {}
        return Container(
            c["name"], quantities(res.get("requests")), quantities(res.get("limits")), init, c.get("restartPolicy")
        )

    meta, spec = doc.get("metadata") or {}, doc.get("spec") or {}
    name, namespace = meta.get("name", ""), meta.get("namespace") or "default"
    pod_level = spec.get("resources")
    return Pod(
        uid=meta.get("uid") or f"{namespace}/{name}",
        name=name,
        namespace=namespace,
        init_containers=tuple(ctr(c, True) for c in spec.get("initContainers") or []),
        containers=tuple(ctr(c, False) for c in spec.get("containers") or []),
        overhead=quantities(spec.get("overhead")),
        pod_requests_spec=(quantities(pod_level.get("requests")) or None) if pod_level is not None else None,
        pod_limits_spec=(quantities(pod_level.get("limits")) or None) if pod_level is not None else None,
        node_name=spec.get("nodeName") or "",
        scheduler_name=spec.get("schedulerName") or "default-scheduler",
        raw=doc,
    )


def negative_paths(doc: dict[str, Any]) -> list[str]:
    """The paths of the negative quantities of a pod document, in the order :func:`parse_pod` reads them."""
    spec = doc.get("spec") or {}
    out = []

    def scan(m: Any, path: str) -> None:
        out.extend(f"{path}.{k}" for k, v in (m or {}).items() if parse_quantity(v).amount < 0)

    for which in ("requests", "limits"):
        scan((spec.get("resources") or {}).get(which), f"spec.resources.{which}")
    for kind in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(kind) or []):
            for which in ("requests", "limits"):
                scan((c.get("resources") or {}).get(which), f"spec.{kind}[{i}].resources.{which}")
    scan(spec.get("overhead"), "spec.overhead")
    return out


def pod_or_refusal(doc: dict[str, Any]) -> Pod:
    """:func:`parse_pod` of ``doc``; if ``doc`` has negative quantities, check that parse_pod refuses it
    naming the first one, and return :func:`unchecked_pod` (the placement code must still cope)."""
    bad = negative_paths(doc)
    if not bad:
        pod = parse_pod(doc)
        assert pod == unchecked_pod(doc)
        return pod
    try:
        parse_pod(doc)
    except PodSpecError as exc:
        assert exc.path == bad[0], (exc.path, bad)
        assert "must be greater than or equal to 0" in exc.reason
    else:
        raise AssertionError(f"parse_pod accepted negative quantities at {bad}")
    return unchecked_pod(doc)


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
    return parse_strict(nrt_doc(node, zones, **kw))


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
