"""The real kube-scheduler v1.36.2 with the numaplane extender, both under the RBAC ``numaplane render``
grants the scheduler's ServiceAccount in extender mode (kube-scheduler and the extender sidecar share
it), configured by the rendered ``KubeSchedulerConfiguration``.

Guaranteed pods go to the node whose NRT fits; the pod that fits nowhere gets ``FailedScheduling``
events carrying the extender's reasons; with the extender down, ``ignorable`` decides.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from realsched import (
    extender_args,
    free_port,
    install_scheduler,
    kube_scheduler_config,
    numaplane,
    scheduler_log_forbidden,
    scoped_cluster,
    zone,
)

from numaplane_harness.kubecluster import ControlPlane

pytestmark = pytest.mark.timeout(180)

PROFILE = "numa-extender"


@pytest.fixture
def extender_install(control_plane: ControlPlane, tmp_path: Path) -> tuple[list[dict[str, object]], Path]:
    """The NRT CRD and the rendered extender-mode RBAC; the ServiceAccount's kubeconfig."""
    return install_scheduler(control_plane, tmp_path, mode="extender", scheduler_name=PROFILE, replicas=2)


@pytest.mark.parametrize("node_cache_capable", [True, False], ids=["node-names", "node-objects"])
def test_extender_places_on_the_fitting_node_and_explains_the_refusal(
    control_plane: ControlPlane,
    extender_install: tuple[list[dict[str, object]], Path],
    tmp_path: Path,
    node_cache_capable: bool,
) -> None:
    docs, kubeconfig = extender_install
    port = free_port()
    # rendered: nodeCacheCapable true (names only); false sends kube-scheduler's Node objects
    config = kube_scheduler_config(docs, port, nodeCacheCapable=node_cache_capable)  # type: ignore[arg-type]
    with (
        scoped_cluster(control_plane) as cluster,
        numaplane(extender_args(kubeconfig, port, PROFILE), tmp_path / "extender.log", port) as extender,
        control_plane.scheduler(
            config["profiles"],
            config["extenders"],
            kubeconfig_file=kubeconfig,
            leader_election=config["leaderElection"],  # as rendered for 2 replicas: the Lease its Role names
        ),
    ):
        lease = config["leaderElection"]
        try:
            holder = control_plane.wait_for(
                "kube-scheduler holds the rendered Lease",
                lambda: control_plane.request(
                    "GET",
                    f"/apis/coordination.k8s.io/v1/namespaces/{lease['resourceNamespace']}/leases/{lease['resourceName']}",
                )["spec"].get("holderIdentity"),
                timeout=40,
            )
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n{control_plane.log_tail('kube-scheduler', 40)}") from None
        assert holder
        # Both nodes have 8 CPUs for kube-scheduler; only "roomy" has 3 free on one NUMA zone.
        cluster.add_node("split", [zone("node-0", 2, 6), zone("node-1", 2, 6)])
        roomy = cluster.add_node("roomy", [zone("node-0", 3, 6), zone("node-1", 0, 6)])
        cluster.pod("fits", 3, scheduler=PROFILE)
        assert cluster.wait_bound("fits", extra=extender.log()) == roomy
        cluster.wait_event("fits", "Scheduled", roomy)
        # The reservation of "fits" (over-reserve cache, learned through the bind verb) leaves no zone
        # with 3 CPUs anywhere: refused everywhere, with our reason in kube-scheduler's message.
        cluster.pod("nowhere", 3, scheduler=PROFILE)
        event = cluster.wait_event("nowhere", "FailedScheduling", "cannot align container")
        assert "2 cannot align container" in event["message"], event["message"]
        assert not cluster.node_of("nowhere")
        assert not scheduler_log_forbidden(control_plane), scheduler_log_forbidden(control_plane)[:5]
        assert not extender.denials(), extender.denials()[:5]


@pytest.mark.parametrize("ignorable", [True, False])
def test_extender_down_behaves_as_configured(
    control_plane: ControlPlane,
    extender_install: tuple[list[dict[str, object]], Path],
    ignorable: bool,
) -> None:
    docs, kubeconfig = extender_install
    port = free_port()  # nothing listens there
    config = kube_scheduler_config(docs, port, ignorable=ignorable)  # type: ignore[arg-type]
    with (
        scoped_cluster(control_plane) as cluster,
        control_plane.scheduler(config["profiles"], config["extenders"], kubeconfig_file=kubeconfig),
    ):
        node = cluster.add_node("only", [zone("node-0", 4, 8), zone("node-1", 4, 8)])
        cluster.pod("p", 2, scheduler=PROFILE)
        if ignorable:
            assert cluster.wait_bound("p") == node
        else:
            event = cluster.wait_event("p", "FailedScheduling", "connection refused")
            assert "filter" in event["message"], event["message"]
            assert not cluster.node_of("p")


def test_extender_score_decides_between_nodes_kube_scheduler_finds_equal(
    control_plane: ControlPlane, extender_install: tuple[list[dict[str, object]], Path], tmp_path: Path
) -> None:
    docs, kubeconfig = extender_install
    port = free_port()
    config = kube_scheduler_config(docs, port)  # type: ignore[arg-type]
    with (
        scoped_cluster(control_plane) as cluster,
        numaplane(extender_args(kubeconfig, port, PROFILE), tmp_path / "extender.log", port) as extender,
        control_plane.scheduler(config["profiles"], config["extenders"], kubeconfig_file=kubeconfig),
    ):
        # Identical Nodes for kube-scheduler; both fit the pod on one zone, but "roomier" has bigger
        # zones (LeastAllocated NUMA score): only the extender's prioritize answer tells them apart.
        tighter = cluster.add_node("tighter", [zone("node-0", 4, 8), zone("node-1", 4, 8)], cpu="16")
        big = {"allocatable_cpu": 8}
        roomier = cluster.add_node("roomier", [zone("node-0", 8, 8, **big), zone("node-1", 8, 8, **big)], cpu="16")
        cluster.pod("scored", 2, scheduler=PROFILE)
        assert cluster.wait_bound("scored", extra=extender.log()) == roomier
        # not a coin toss between tied nodes: the extender scored them apart
        lines = [line for line in extender.log(400).splitlines() if "prioritize" in line and "scored" in line]
        scores = ast.literal_eval(lines[-1].split("scores=", 1)[1]) if lines else {}
        assert scores and scores[roomier] > scores[tighter], lines
