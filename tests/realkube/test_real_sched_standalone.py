"""``numaplane scheduler run`` against the real API server under the RBAC ``numaplane render`` grants
its ServiceAccount in standalone mode: it binds pods, emits events, and its over-reserve cache works
through real watch streams — a pod is refused because of a reservation the NRT does not show yet, then
placed once the exporter's NRT (with the pod fingerprint) accounts for the first pod and frees room.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from realsched import (
    NAMESPACE,
    free_port,
    install_scheduler,
    metric,
    numaplane,
    put_nrt,
    scoped_cluster,
    standalone_args,
    zone,
)

from numaplane.nrt.fingerprint import ATTRIBUTE, ATTRIBUTE_METHOD, compute_fingerprint
from numaplane_harness.kubecluster import ControlPlane

pytestmark = pytest.mark.timeout(180)

SCHEDULER = "numa-standalone"


def test_standalone_binds_emits_events_and_over_reserves_through_watches(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    _, kubeconfig = install_scheduler(control_plane, tmp_path, mode="standalone", scheduler_name=SCHEDULER)
    health = free_port()
    # as rendered: Lease election in the install namespace, on the Lease its Role names
    args = standalone_args(
        kubeconfig, SCHEDULER, health,
        "--leader-elect", f"--leader-election-namespace={NAMESPACE}", "--leader-election-lease=numaplane-scheduler",
    )  # fmt: skip
    with (
        scoped_cluster(control_plane) as cluster,
        numaplane(args, tmp_path / "scheduler.log", health) as scheduler,
    ):
        lease = control_plane.wait_for(
            "the scheduler's Lease held",
            lambda: control_plane.request(
                "GET", f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/numaplane-scheduler"
            )["spec"].get("holderIdentity"),
            timeout=30,
        )
        assert lease
        node = cluster.add_node("n", [zone("node-0", 4, 8), zone("node-1", 0, 8)])
        cluster.pod("first", 3, scheduler=SCHEDULER)
        assert cluster.wait_bound("first", extra=scheduler.log()) == node
        cluster.wait_event("first", "Scheduled", node)
        # The NRT still says zone node-0 has 4 CPUs free: only the reservation of "first" refuses this.
        cluster.pod("second", 3, scheduler=SCHEDULER)
        event = cluster.wait_event("second", "FailedScheduling", "cannot align container")
        assert event["source"].get("component") == SCHEDULER or event.get("reportingComponent") == SCHEDULER, event
        assert not cluster.node_of("second")
        # as kube-scheduler does: PodScheduled=False/Unschedulable with the same message (autoscalers read it)
        condition = control_plane.wait_for(
            "PodScheduled=False on second",
            lambda: next(
                (
                    c
                    for c in cluster.get_pod("second")["status"].get("conditions") or []
                    if c["type"] == "PodScheduled" and c["status"] == "False"
                ),
                None,
            ),
            timeout=20,
        )
        assert condition["reason"] == "Unschedulable" and "cannot align container" in condition["message"]
        # The kubelet runs "first"; the exporter republishes: node-0 accounts for it, node-1 freed.
        control_plane.request(
            "PATCH",
            f"/api/v1/namespaces/{cluster.namespace}/pods/first/status",
            {"status": {"phase": "Running"}},
            content_type="application/merge-patch+json",
        )
        published = time.monotonic()
        put_nrt(
            control_plane,
            node,
            [zone("node-0", 1, 5), zone("node-1", 4, 8)],
            attributes={ATTRIBUTE: compute_fingerprint([(cluster.namespace, "first")]), ATTRIBUTE_METHOD: "all"},
        )
        assert cluster.wait_bound("second", extra=scheduler.log()) == node
        requeue_seconds = time.monotonic() - published
        assert not scheduler.denials(), scheduler.denials()[:5]
        conditions = {c["type"]: c["status"] for c in cluster.get_pod("second")["status"]["conditions"]}
        assert conditions["PodScheduled"] == "True", conditions  # set by the API server's binding
        print(f"\nstandalone: placed {requeue_seconds:.1f} s after the NRT update")
        assert requeue_seconds < 15


def test_standalone_aggregates_repeated_failed_scheduling_events(control_plane: ControlPlane, tmp_path: Path) -> None:
    """A pod stuck while other nodes' NRTs keep changing is retried each time (after backoff), but
    its identical FailedScheduling events are one Event object, as kube-scheduler's are."""
    _, kubeconfig = install_scheduler(control_plane, tmp_path, mode="standalone", scheduler_name=SCHEDULER)
    health, metrics = free_port(), free_port()
    args = standalone_args(kubeconfig, SCHEDULER, health, f"--metrics-address=127.0.0.1:{metrics}", overreserve=False)
    with (
        scoped_cluster(control_plane) as cluster,
        numaplane(args, tmp_path / "scheduler.log", health) as scheduler,
    ):
        cluster.add_node("full", [zone("node-0", 1, 8), zone("node-1", 1, 8)])
        busy = cluster.add_node("busy", [zone("node-0", 1, 8), zone("node-1", 1, 8)])
        cluster.pod("stuck", 3, scheduler=SCHEDULER)
        cluster.wait_event("stuck", "FailedScheduling", "cannot align container")
        attempts = lambda: metric(  # noqa: E731
            metrics, "numaplane_scheduler_scheduling_attempt_duration_seconds_count", result="unschedulable"
        )
        deadline = time.monotonic() + 40
        free = 1
        while attempts() < 4 and time.monotonic() < deadline:  # an exporter publishing, the pod retried
            free = 2 if free == 1 else 1
            put_nrt(control_plane, busy, [zone("node-0", free, 8), zone("node-1", 1, 8)])
            time.sleep(0.5)  # the pace of NRT updates, not a synchronisation
        assert attempts() >= 4, scheduler.log()
        failed = [e for e in cluster.events("stuck") if e.get("reason") == "FailedScheduling"]
        print(f"\n{attempts():.0f} attempts, {len(failed)} FailedScheduling Event object(s)")
        assert len(failed) == 1, [(e["metadata"]["name"], e.get("count")) for e in failed]
