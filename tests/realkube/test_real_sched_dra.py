"""``numaplane scheduler run --dra`` on the real kube-apiserver v1.36.2 (resource.k8s.io/v1), under the RBAC
``numaplane render`` grants the standalone scheduler (issue 28 item 2).

Real: the API server's DeviceClass (its CEL selector validated by the server), ResourceSlice, ResourceClaim
with the allocation and reservation the scheduler writes through ``resourceclaims/status`` (validated by
the server), the binding. Not real: there is no kubelet or DRA driver (the node is registered by the
test, its NRT written as an exporter would, the devices carry fake ``resource.kubernetes.io/numaNode``
attributes).

Checked: a 2-CPU pod with a claim for one device, on a node whose NUMA zone 0 has 1 free CPU and zone 1
has 4, gets the device on NUMA node 1 and is bound; a second such pod, whose only free device is on
NUMA node 0 (where its CPUs do not fit), stays pending under single-numa-node with a FailedScheduling
event saying it cannot be aligned, and its claim stays unallocated; a claim in ``All`` mode stays pending
with an event naming the field.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from realsched import (
    TEST_LABEL,
    free_port,
    install_scheduler,
    numaplane,
    scoped_cluster,
    standalone_args,
    zone,
)

from numaplane_harness.kubecluster import ControlPlane

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agent"))
from dra_helpers import DRIVER, resource_slice

pytestmark = pytest.mark.timeout(180)

SCHEDULER = "numa-dra"
DRA = "/apis/resource.k8s.io/v1"


def claim(name: str, namespace: str, device_class: str, **exactly: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "req", "exactly": {"deviceClassName": device_class, **exactly}}]}},
    }


def claim_pod(name: str, namespace: str, claim_name: str, label: dict[str, str], cpu: str = "2") -> dict[str, Any]:
    q = {"cpu": cpu, "memory": "64Mi"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulerName": SCHEDULER,
            "nodeSelector": label,
            "resourceClaims": [{"name": "accel", "resourceClaimName": claim_name}],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": q, "limits": q, "claims": [{"name": "accel"}]},
                }
            ],
        },
    }


def test_standalone_allocates_the_claim_in_the_zone_of_the_cpus_and_binds(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    _, kubeconfig = install_scheduler(control_plane, tmp_path, mode="standalone", scheduler_name=SCHEDULER)
    health = free_port()
    args = standalone_args(kubeconfig, SCHEDULER, health, "--dra")
    cp = control_plane
    with scoped_cluster(cp) as cluster:
        ns = cluster.namespace
        device_class = f"accel-{cluster.tag}"
        cp.request(
            "POST",
            f"{DRA}/deviceclasses",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": device_class},
                "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
            },
        )
        node = cluster.add_node("n", [zone("node-0", 1, 8), zone("node-1", 4, 8)])
        slice_doc = resource_slice(node, {"a0": 0, "a1": 1})
        cp.request("POST", f"{DRA}/resourceslices", slice_doc)
        try:
            with numaplane(args, tmp_path / "scheduler.log", health) as scheduler:
                label = {TEST_LABEL: cluster.tag}
                for name in ("c1", "c2"):
                    cp.request("POST", f"{DRA}/namespaces/{ns}/resourceclaims", claim(name, ns, device_class))
                cp.request("POST", f"/api/v1/namespaces/{ns}/pods", claim_pod("first", ns, "c1", label))
                assert cluster.wait_bound("first", extra=scheduler.log()) == node
                c1 = cp.request("GET", f"{DRA}/namespaces/{ns}/resourceclaims/c1")
                results = c1["status"]["allocation"]["devices"]["results"]
                assert results == [{"request": "req", "driver": DRIVER, "pool": node, "device": "a1"}], c1["status"]
                first = cluster.get_pod("first")
                assert c1["status"]["reservedFor"] == [
                    {"resource": "pods", "name": "first", "uid": first["metadata"]["uid"]}
                ]
                # the second pod's free device is on NUMA 0, where its 2 CPUs do not fit
                cp.request("POST", f"/api/v1/namespaces/{ns}/pods", claim_pod("second", ns, "c2", label))
                cluster.wait_event("second", "FailedScheduling", "cannot align the pod's claimed devices")
                assert not cluster.node_of("second")
                c2 = cp.request("GET", f"{DRA}/namespaces/{ns}/resourceclaims/c2")
                assert not (c2.get("status") or {}).get("allocation")
                # a claim this scheduler does not allocate: pending, the event names the field
                cp.request(
                    "POST",
                    f"{DRA}/namespaces/{ns}/resourceclaims",
                    claim("all", ns, device_class, allocationMode="All"),
                )
                cp.request("POST", f"/api/v1/namespaces/{ns}/pods", claim_pod("every", ns, "all", label, cpu="1"))
                cluster.wait_event("every", "FailedScheduling", "exactly.allocationMode: 'All' is not supported")
                assert not cluster.node_of("every")
        finally:
            cp.request("DELETE", f"{DRA}/resourceslices/{slice_doc['metadata']['name']}")
            cp.request("DELETE", f"{DRA}/deviceclasses/{device_class}")
