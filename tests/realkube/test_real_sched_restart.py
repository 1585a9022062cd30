"""``numaplane scheduler run`` survives a kube-apiserver restart: its watches come back (an NRT update
and a pod status change made after the restart reach its over-reserve cache), the pod bound before is
not bound again, and a new pod is placed on the room the post-restart NRT shows."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from realsched import (
    free_port,
    install_scheduler,
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


def test_standalone_scheduler_survives_an_apiserver_restart(control_plane: ControlPlane, tmp_path: Path) -> None:
    _, kubeconfig = install_scheduler(control_plane, tmp_path, mode="standalone", scheduler_name=SCHEDULER)
    health = free_port()
    args = standalone_args(kubeconfig, SCHEDULER, health)
    with (
        scoped_cluster(control_plane) as cluster,
        numaplane(args, tmp_path / "scheduler.log", health) as scheduler,
    ):
        node = cluster.add_node("n", [zone("node-0", 4, 8), zone("node-1", 0, 8)])
        cluster.pod("before", 3, scheduler=SCHEDULER)
        assert cluster.wait_bound("before", extra=scheduler.log()) == node
        started = time.monotonic()
        control_plane.restart_apiserver(down_seconds=2)
        ready_at = datetime.now(UTC)
        print(f"\nkube-apiserver restarted in {time.monotonic() - started:.1f} s")
        ns = cluster.namespace
        control_plane.request(
            "PATCH",
            f"/api/v1/namespaces/{ns}/pods/before/status",
            {"status": {"phase": "Running"}},
            content_type="application/merge-patch+json",
        )
        put_nrt(
            control_plane,
            node,
            [zone("node-0", 1, 5), zone("node-1", 4, 8)],
            attributes={ATTRIBUTE: compute_fingerprint([(ns, "before")]), ATTRIBUTE_METHOD: "all"},
        )
        cluster.pod("after", 3, scheduler=SCHEDULER)
        assert cluster.wait_bound("after", timeout=60, extra=scheduler.log(80)) == node
        assert scheduler.process.poll() is None, scheduler.log()
        scheduled = [e for e in cluster.events("before") if e.get("reason") == "Scheduled"]
        assert len(scheduled) == 1 and (scheduled[0].get("count") or 1) == 1, scheduled
        # While kube-apiserver starts, its RBAC authorizer may answer 403 for a moment: retried; none after.
        late = [line for line in scheduler.denials() if _logged_at(line) > ready_at]
        assert not late, late[:5]


def _logged_at(line: str) -> datetime:
    return datetime.fromisoformat(line.split(" ", 1)[0].replace("Z", "+00:00"))
