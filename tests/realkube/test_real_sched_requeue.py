"""Defect 3 of issue 12: in extender mode kube-scheduler retried a pod the extender had refused only at
its unschedulable-pod flush (5 min), because it does not watch NodeResourceTopologies.

kube-scheduler v1.36 puts the pseudo-plugin ``Extender`` among the rejectors of a pod an extender
refused and requeues such a pod on *any* cluster event it handles (upstream issue 122019), including an
update of the pod itself. The extender therefore signals the pods it refused when an NRT change makes
them fit: it sets the pod condition ``numaplane.io/NUMAResourcesAvailable`` through ``pods/status``
(a right kube-scheduler's rendered RBAC already has). Measured here against the real kube-scheduler:
the delay from the NRT update to the pod's binding.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from realsched import (
    extender_args,
    free_port,
    install_scheduler,
    kube_scheduler_config,
    metric,
    numaplane,
    put_nrt,
    scoped_cluster,
    zone,
)

from numaplane.nrt.fingerprint import ATTRIBUTE, ATTRIBUTE_METHOD, compute_fingerprint
from numaplane_harness.kubecluster import ControlPlane

pytestmark = pytest.mark.timeout(180)

PROFILE = "numa-extender"
FILTERS = "numaplane_scheduler_extender_requests_total"


def test_extender_refused_pod_is_retried_within_seconds_of_the_nrt_freeing_room(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    docs, kubeconfig = install_scheduler(control_plane, tmp_path, mode="extender", scheduler_name=PROFILE)
    port = free_port()
    config = kube_scheduler_config(docs, port)
    with (
        scoped_cluster(control_plane) as cluster,
        numaplane(
            extender_args(kubeconfig, port, PROFILE, "--cache-resync-period=1s"), tmp_path / "extender.log", port
        ) as extender,
        control_plane.scheduler(config["profiles"], config["extenders"], kubeconfig_file=kubeconfig),
    ):
        node = f"{cluster.tag}-n"
        # A DaemonSet-like pod and a 3-CPU pod run on the node; the exporter's NRT accounts for both.
        cluster.running_pod("daemon", node, "100m", scheduler=PROFILE)
        cluster.running_pod("big", node, "3", scheduler=PROFILE)
        ns = cluster.namespace
        cluster.add_node(
            "n",
            [zone("node-0", 1, 7), zone("node-1", 1, 8)],
            attributes={ATTRIBUTE: compute_fingerprint([(ns, "daemon"), (ns, "big")]), ATTRIBUTE_METHOD: "all"},
        )
        # A tainted node with room (a control plane, say): TaintToleration rejects the pod there, so
        # kube-scheduler's own plugins are among its rejectors too, as in most real clusters.
        cluster.taint(cluster.add_node("tainted", [zone("node-0", 4, 8), zone("node-1", 4, 8)]))
        cluster.pod("waits", 3, scheduler=PROFILE)
        event = cluster.wait_event("waits", "FailedScheduling", "cannot align container")
        assert "untolerated taint" in event["message"], event["message"]
        # kube-scheduler retries once on its own (its PodScheduled condition update is an event for
        # the pod); after the second refusal the pod sits in the unschedulable pool.
        refusals = lambda: metric(port, FILTERS, verb="filter", code="200")  # noqa: E731
        control_plane.wait_for("second refusal", lambda: refusals() >= 2, timeout=30)
        # The user deletes "big": kube-scheduler retries at once, before the exporter has republished.
        before = refusals()
        control_plane.request("DELETE", f"/api/v1/namespaces/{ns}/pods/big?gracePeriodSeconds=0")
        control_plane.wait_for("refusal after the deletion", lambda: refusals() > before, timeout=30)
        # The exporter republishes: zone node-0 free again, fingerprint of the pods left.
        published = time.monotonic()
        put_nrt(
            control_plane,
            node,
            [zone("node-0", 4, 8), zone("node-1", 1, 8)],
            attributes={ATTRIBUTE: compute_fingerprint([(ns, "daemon")]), ATTRIBUTE_METHOD: "all"},
        )
        assert cluster.wait_bound("waits", timeout=30, extra=extender.log(80)) == node
        delay = time.monotonic() - published
        print(f"\nextender mode: bound {delay:.1f} s after the NRT update ({refusals():.0f} filter requests)")
        assert delay < 10
        condition = next(
            c
            for c in cluster.get_pod("waits")["status"]["conditions"]
            if c["type"] == "numaplane.io/NUMAResourcesAvailable"
        )
        assert condition["status"] == "True" and node in condition["message"], condition
        assert not extender.denials(), extender.denials()[:5]
        assert metric(port, "numaplane_scheduler_requeue_signals_total", result="success") >= 1
