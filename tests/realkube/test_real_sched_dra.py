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
    NAMESPACE,
    SA_NAME,
    TEST_LABEL,
    apply_rbac,
    extender_args,
    free_port,
    install_nrt_crd,
    install_scheduler,
    kube_scheduler_config,
    numaplane,
    rendered_scheduler,
    scheduler_log_forbidden,
    scoped_cluster,
    standalone_args,
    zone,
)

from numaplane_harness.kubecluster import ControlPlane

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agent"))
from dra_helpers import DRIVER, devices_on_server, resource_slice

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


def claim_pod(
    name: str, namespace: str, claim_name: str, label: dict[str, str], cpu: str = "2", scheduler: str = SCHEDULER
) -> dict[str, Any]:
    q = {"cpu": cpu, "memory": "64Mi"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulerName": scheduler,
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
        node = cluster.add_node("n", [zone("node-0", 1, 8), zone("node-1", 4, 8)])
        with (
            devices_on_server(cp, device_class, [resource_slice(node, {"a0": 0, "a1": 1})]),
            numaplane(args, tmp_path / "scheduler.log", health) as scheduler,
        ):
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


def test_kube_scheduler_dra_and_the_extender_place_the_pod_where_a_zone_fits(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """Extender mode as rendered with ``spec.dra: Enabled``: the real kube-scheduler v1.36.2 with its own
    ``DynamicResources`` plugin (allocating the claim) and ``numaplane scheduler extender --dra``, both under
    the rendered RBAC. Two nodes kube-scheduler finds equal (same CPUs, one free device each); on "apart"
    the device is on NUMA node 0, where the pod's 2 CPUs do not fit; on "together" it is on node 1, where
    they do. The pod lands on "together" with that device allocated by kube-scheduler; a second such pod,
    whose only free device is on "apart", is refused with the extender's reason and its claim stays
    unallocated."""
    cp = control_plane
    profile = "numa-extender-dra"
    install_nrt_crd(cp)
    docs = rendered_scheduler(cp, tmp_path, mode="extender", scheduler_name=profile, dra="Enabled")
    apply_rbac(cp, docs)
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    containers = {c["name"]: c for c in deployment["spec"]["template"]["spec"]["containers"]}
    assert "--dra" in containers["extender"]["args"]
    kubeconfig = cp.service_account_kubeconfig(NAMESPACE, SA_NAME)
    port = free_port()
    config = kube_scheduler_config(docs, port)
    assert "plugins" not in config["profiles"][0]  # DynamicResources kept
    with scoped_cluster(cp) as cluster:
        ns = cluster.namespace
        device_class = f"accel-{cluster.tag}"
        apart = cluster.add_node("apart", [zone("node-0", 1, 8), zone("node-1", 4, 8)])
        together = cluster.add_node("together", [zone("node-0", 1, 8), zone("node-1", 4, 8)])
        slices = [resource_slice(apart, {"a0": 0}), resource_slice(together, {"t1": 1})]
        with (
            devices_on_server(cp, device_class, slices),
            numaplane(extender_args(kubeconfig, port, profile, "--dra"), tmp_path / "extender.log", port) as ext,
            cp.scheduler(config["profiles"], config["extenders"], kubeconfig_file=kubeconfig),
        ):
            label = {TEST_LABEL: cluster.tag}
            for name in ("c1", "c2"):
                cp.request("POST", f"{DRA}/namespaces/{ns}/resourceclaims", claim(name, ns, device_class))
            cp.request("POST", f"/api/v1/namespaces/{ns}/pods", claim_pod("first", ns, "c1", label, scheduler=profile))
            try:
                assert cluster.wait_bound("first", extra=ext.log()) == together
            except (AssertionError, TimeoutError) as exc:
                raise AssertionError(f"{exc}\n{cp.log_tail('kube-scheduler', 40)}") from None
            c1 = cp.request("GET", f"{DRA}/namespaces/{ns}/resourceclaims/c1")
            results = c1["status"]["allocation"]["devices"]["results"]
            assert [(r["pool"], r["device"]) for r in results] == [(together, "t1")], c1["status"]
            assert [r["name"] for r in c1["status"]["reservedFor"]] == ["first"]
            # the only free device left is on "apart", NUMA node 0, where 2 CPUs do not fit
            cp.request("POST", f"/api/v1/namespaces/{ns}/pods", claim_pod("second", ns, "c2", label, scheduler=profile))
            cluster.wait_event("second", "FailedScheduling", "cannot align the pod's claimed devices")
            assert not cluster.node_of("second")
            c2 = cp.request("GET", f"{DRA}/namespaces/{ns}/resourceclaims/c2")
            assert not (c2.get("status") or {}).get("allocation")
            assert not scheduler_log_forbidden(cp), scheduler_log_forbidden(cp)[:5]
            assert not ext.denials(), ext.denials()[:5]
