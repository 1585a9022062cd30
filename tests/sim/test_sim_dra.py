"""The simulator's DRA comparison (issue 28 item 4): the same claims under kubelet managers + DRA
(devices unaligned, as Kubernetes documents) and under numaplane + DRA (devices in the zone of the CPUs)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from numaplane.cli import main
from numaplane.sim.cluster import build_templates
from numaplane.sim.dra import DRA_MODES, compare_dra, with_claims
from numaplane.sim.workload import WorkloadMix, generate_workload


def _templates(nodes: int, policy: str = "single-numa-node") -> list:  # type: ignore[type-arg]
    return build_templates(
        [("intel-xeon-gold6130-2s2n-32t-noht-pci", nodes)],
        policy=policy,
        scope="container",
        hugepages_1g_per_numa=0,
        reserved_cpus=2,
    )


def test_numaplane_aligns_every_claimed_device_the_kubelet_path_misaligns_some() -> None:
    arrivals = with_claims(
        generate_workload(3, WorkloadMix(pods=120, arrival_rate_per_s=1.0, mean_duration_s=600.0)), 0.6, 3
    )
    claimed = sum(1 for a in arrivals if any(c.claims for c in a.pod.containers))
    assert claimed > 20
    kubelet, extender, numaplane = compare_dra(_templates(4), arrivals, 2)
    assert (kubelet.mode, extender.mode, numaplane.mode) == DRA_MODES
    assert kubelet.claim_pods_run > 0 and numaplane.claim_pods_run > 0
    assert kubelet.misaligned > 0  # kube-scheduler's allocator and the kubelet do not align DRA devices
    # single-numa-node: the agent aligns what it admits and refuses what it cannot align
    assert extender.misaligned == 0 and extender.rejection_reasons.get("TopologyAffinityError", 0) > 0
    assert numaplane.misaligned == 0


def test_best_effort_extender_mode_leaves_a_residual_misalignment() -> None:
    arrivals = with_claims(
        generate_workload(3, WorkloadMix(pods=120, arrival_rate_per_s=1.0, mean_duration_s=600.0)), 0.6, 3
    )
    kubelet, extender, numaplane = compare_dra(_templates(4, "best-effort"), arrivals, 2)
    assert kubelet.misaligned > extender.misaligned >= numaplane.misaligned


def test_claims_go_only_on_guaranteed_whole_cpu_pods_and_are_seeded() -> None:
    arrivals = generate_workload(5, WorkloadMix(pods=80, arrival_rate_per_s=1.0, mean_duration_s=60.0))
    one, two = with_claims(arrivals, 0.5, 5), with_claims(arrivals, 0.5, 5)
    assert [a.pod.containers for a in one] == [a.pod.containers for a in two]
    for arrival in one:
        if any(c.claims for c in arrival.pod.containers):
            assert arrival.pod.qos_class == "Guaranteed"
            assert arrival.pod.raw["spec"]["resourceClaims"] == [{"name": "accel"}]


def test_simulate_cli_prints_the_comparison_as_json() -> None:
    result = CliRunner().invoke(
        main,
        [
            "simulate",
            "--topology",
            "intel-xeon-gold6130-2s2n-32t-noht-pci=3",
            "--pods",
            "60",
            "--dra-devices-per-numa",
            "1",
            "-o",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["kind"] == "DRASimulation" and [r["mode"] for r in doc["runs"]] == list(DRA_MODES)
    assert doc["runs"][2]["misaligned"] == 0
    bad = CliRunner().invoke(main, ["simulate", "--pods", "5", "--dra-devices-per-numa", "0"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output
