"""resource.k8s.io/v1 objects for the DRA tests: a node's ResourceSlice, the DeviceClass of its devices, an
allocated claim, a pod; and, for the real-API-server tests, the class and slices created for the length
of a test (:func:`devices_on_server`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from numaplane_harness.kubecluster import ApiStatus, ControlPlane

DRIVER = "accel.example.com"


def resource_slice(node: str, numa: dict[str, int], *, name: str = "", attribute: str = "") -> dict[str, Any]:
    """One pool ``<node>`` of ``accel.example.com`` devices with their NUMA node (``attribute``: instead of
    the standard ``resource.kubernetes.io/numaNode``)."""
    key = attribute or "resource.kubernetes.io/numaNode"
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name or f"{node}-accel"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": dev, "attributes": {key: {"int": n}}} for dev, n in numa.items()],
        },
    }


def device_class(name: str = "accel") -> dict[str, Any]:
    """DeviceClass ``name`` selecting every ``accel.example.com`` device (a CEL selector)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }


def claim(name: str, namespace: str = "default") -> dict[str, Any]:
    """A claim for exactly one device of the ``accel`` DeviceClass."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "req", "exactly": {"deviceClassName": "accel", "count": 1}}]}},
    }


def allocation_status(node: str, device: str, pod: dict[str, Any]) -> dict[str, Any]:
    """``status`` of a claim allocated ``device`` of pool ``node`` and reserved for ``pod``."""
    return {
        "allocation": {
            "devices": {"results": [{"request": "req", "driver": DRIVER, "pool": node, "device": device}]},
            "nodeSelector": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
            },
        },
        "reservedFor": [{"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}],
    }


def pod_with_claim(name: str, node: str, claim_name: str, cpu: str = "2", image: str = "x") -> dict[str, Any]:
    """A Guaranteed pod of one container with ``cpu`` CPUs and 64 MiB that uses ResourceClaim ``claim_name``."""
    q = {"cpu": cpu, "memory": "64Mi"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "resourceClaims": [{"name": "accel", "resourceClaimName": claim_name}],
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "resources": {"requests": q, "limits": q, "claims": [{"name": "accel"}]},
                }
            ],
        },
    }


@contextlib.contextmanager
def devices_on_server(cp: ControlPlane, class_name: str, slices: Sequence[dict[str, Any]]) -> Iterator[None]:
    """DeviceClass ``class_name`` (:func:`device_class`) and the ``slices`` (:func:`resource_slice`) created
    on the real API server for the ``with`` block, deleted after it (those already gone are skipped)."""
    dra = "/apis/resource.k8s.io/v1"
    cp.request("POST", f"{dra}/deviceclasses", device_class(class_name))
    try:
        for doc in slices:
            cp.request("POST", f"{dra}/resourceslices", doc)
        yield
    finally:
        for doc in slices:
            with contextlib.suppress(ApiStatus):
                cp.request("DELETE", f"{dra}/resourceslices/{doc['metadata']['name']}")
        with contextlib.suppress(ApiStatus):
            cp.request("DELETE", f"{dra}/deviceclasses/{class_name}")
