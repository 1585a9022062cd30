"""Score strategies beyond the conformance cases, and the opt-in kubelet admission mode of the filter."""

from __future__ import annotations

import pytest
from place_helpers import container, gu_pod, node_doc, nrt, nrt_doc, pod, two_zone_nrt, zone

from numaplane.placement.explain.filter import FilterOptions
from numaplane.placement.explain.filter import filter as nfilter
from numaplane.placement.explain.score import score
from numaplane.placement.model.errors import PlacementConfigError
from numaplane.placement.model.result import Fit, Reject
from numaplane.placement.model.strategies import ScoringStrategy

NODE = node_doc("n1", {"cpu": "16", "memory": "64Gi", "vendor/gpu": "4"})
KUBELET = FilterOptions(kubelet_admission=True)


def test_strategy_validation_and_weights() -> None:
    with pytest.raises(PlacementConfigError):
        ScoringStrategy.from_dict({"type": "Random"})
    s = ScoringStrategy.from_dict(
        {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 0}, {"name": "memory", "weight": 3}]}
    )
    assert (s.weight("cpu"), s.weight("memory"), s.weight("vendor/gpu")) == (1, 3, 1)


def test_weights_change_most_allocated() -> None:
    topo = nrt("n1", [zone(0, {"cpu": 4, "memory": "4Gi"})])
    p = gu_pod(cpu=2, memory="1Gi")  # cpu 50, memory 25
    assert score(p, topo, None, ScoringStrategy("MostAllocated")) == (50 + 25) // 2
    weighted = ScoringStrategy("MostAllocated", {"cpu": 3, "memory": 1})
    assert score(p, topo, None, weighted) == (50 * 3 + 25) // 4


def test_rounding_up_of_fractional_cpu() -> None:
    topo = nrt("n1", [zone(0, {"cpu": 4, "memory": "4Gi"})])
    p = gu_pod(cpu="500m", memory="1Gi")  # cpu counts as 1 → 25, memory 25
    assert score(p, topo, None, ScoringStrategy("MostAllocated")) == 25


def test_node_score_is_min_nonzero_zone_and_zero_when_nothing_fits() -> None:
    topo = nrt(
        "n1",
        [
            zone(0, {"cpu": 4, "memory": "4Gi"}),
            zone(1, {"cpu": 1, "memory": "4Gi"}),
            zone(2, {"cpu": 8, "memory": "4Gi"}),
        ],
    )
    p = gu_pod(cpu=2, memory="1Gi")
    # zone 0: (50+75)/2=62; zone 2: (75+75)/2=75; zone 1: cpu does not fit so cpu scores 0, but memory
    # still scores 75, so the zone scores (0+75)/2=37 and is not excluded (upstream quirk) → min 37
    assert score(p, topo, None, ScoringStrategy("LeastAllocated")) == 37
    two = nrt("n1", [zone(0, {"cpu": 4, "memory": "4Gi"}), zone(2, {"cpu": 8, "memory": "4Gi"})])
    assert score(p, two, None, ScoringStrategy("LeastAllocated")) == 62
    assert score(gu_pod(cpu=64, memory="64Gi"), topo, None, ScoringStrategy("LeastAllocated")) == 0


def test_container_scope_mean_of_containers() -> None:
    topo = nrt("n1", [zone(0, {"cpu": 4, "memory": "4Gi"})])
    p = pod("p", [container("a", {"cpu": 1, "memory": "1Gi"}), container("b", {"cpu": 4, "memory": "4Gi"})])
    # a: (75+75)/2 = 75; b: exact fit scores 0 under LeastAllocated → node score 0; mean 37
    assert score(p, topo, None, ScoringStrategy("LeastAllocated")) == 37


def test_balanced_single_resource_and_non_guaranteed() -> None:
    topo = nrt("n1", [zone(0, {"cpu": 4, "memory": "4Gi"})])
    odd = pod(
        "p",
        [
            {"name": "a", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1", "memory": "1"}}},
            {"name": "b", "resources": {"requests": {"memory": "2"}, "limits": {"cpu": "1", "memory": "1"}}},
        ],
    )
    assert odd.qos_class == "Guaranteed"
    assert score(odd, topo, None, ScoringStrategy("BalancedAllocation")) == 100
    burstable = pod("b", [container("c", {"cpu": 1}, guaranteed=False)])
    assert score(burstable, None, None, ScoringStrategy("BalancedAllocation")) == 100


def test_malformed_and_stale_score_zero() -> None:
    doc = nrt_doc("n1", [zone(0, {"cpu": 4, "memory": "4Gi"})])
    doc["zones"][0]["resources"][0]["capacity"] = []
    assert score(gu_pod(), doc, None, ScoringStrategy()) == 0
    assert score(gu_pod(), two_zone_nrt(), None, ScoringStrategy(), fresh=False) == 0


def test_least_numa_unsorted_ids_use_costs_by_id() -> None:
    costs = {0: {0: 10, 1: 20, 2: 12}, 1: {0: 20, 1: 10, 2: 20}, 2: {0: 12, 1: 20, 2: 10}}
    zones = [zone(i, {"cpu": 2, "memory": "2Gi"}, costs=costs[i]) for i in (1, 2, 0)]
    topo = nrt("n1", zones, policy="none")
    # needs two zones; the optimal pair is {0, 2} (distance 12)
    assert score(gu_pod(cpu=4, memory="2Gi"), topo, None, ScoringStrategy("LeastNUMANodes")) == 82


def test_least_numa_container_scope_takes_from_chosen_zones() -> None:
    topo = nrt("n1", [zone(0, {"cpu": 4, "memory": "4Gi"}), zone(1, {"cpu": 4, "memory": "4Gi"})], policy="none")
    p = pod("p", [container("a", {"cpu": 3, "memory": "1Gi"}), container("b", {"cpu": 3, "memory": "1Gi"})])
    assert score(p, topo, None, ScoringStrategy("LeastNUMANodes")) == 94  # a → node-0, b → node-1
    big = pod("p", [container("a", {"cpu": 6, "memory": "1Gi"}), container("b", {"cpu": 3, "memory": "1Gi"})])
    assert score(big, topo, None, ScoringStrategy("LeastNUMANodes")) == 0  # a uses 4+2, b finds 2 left


# --- kubelet admission mode -------------------------------------------------------------------------


def test_upstream_passes_restricted_and_best_effort_nodes_unchecked() -> None:
    for policy in ("restricted", "best-effort"):
        verdict = nfilter(gu_pod(cpu=64), two_zone_nrt(policy=policy), NODE)
        assert isinstance(verdict, Fit) and not verdict.checked


def test_best_effort_mode_needs_node_wide_capacity_only() -> None:
    topo = two_zone_nrt(policy="best-effort")
    assert isinstance(nfilter(gu_pod(cpu=6), topo, NODE, options=KUBELET), Fit)  # spans both zones
    rejected = nfilter(gu_pod(cpu=9), topo, NODE, options=KUBELET)
    assert isinstance(rejected, Reject) and rejected.reason == "cannot align container"


def test_restricted_mode_needs_a_preferred_hint() -> None:
    # each zone can hold 4 cpus: a 3-cpu container prefers one zone
    doc = nrt_doc(
        "n1", [zone(0, {"cpu": 4, "memory": "8Gi"}), zone(1, {"cpu": 4, "memory": "8Gi"})], policy="restricted"
    )
    doc["zones"][0]["resources"][0]["available"] = "2"
    doc["zones"][1]["resources"][0]["available"] = "2"
    # 4 cpus free in total but not in one zone: the merged hint is not preferred
    assert isinstance(nfilter(gu_pod(cpu=3), doc, NODE, options=KUBELET), Reject)
    # a 6-cpu container needs two zones anyway: spanning both is preferred, but only 4 are free
    assert isinstance(nfilter(gu_pod(cpu=6), doc, NODE, options=KUBELET), Reject)
    fresh = nrt_doc(
        "n1", [zone(0, {"cpu": 4, "memory": "8Gi"}), zone(1, {"cpu": 4, "memory": "8Gi"})], policy="restricted"
    )
    verdict = nfilter(gu_pod(cpu=6), fresh, NODE, options=KUBELET)
    assert isinstance(verdict, Fit) and verdict.placements == (("c", 0),)
    assert isinstance(nfilter(gu_pod(cpu=9), fresh, NODE, options=KUBELET), Reject)


def test_restricted_mode_container_accounting() -> None:
    topo = nrt("n1", [zone(0, {"cpu": 4, "memory": "8Gi"}), zone(1, {"cpu": 4, "memory": "8Gi"})], policy="restricted")
    two = pod("p", [container("a", {"cpu": 3, "memory": "1Gi"}), container("b", {"cpu": 3, "memory": "1Gi"})])
    verdict = nfilter(two, topo, NODE, options=KUBELET)
    assert isinstance(verdict, Fit) and verdict.placements == (("a", 0), ("b", 1))
    three = pod("p", [container(n, {"cpu": 3, "memory": "1Gi"}) for n in "abc"])
    assert isinstance(nfilter(three, topo, NODE, options=KUBELET), Reject)


def test_restricted_mode_devices_and_cpu_must_share_a_zone() -> None:
    topo = nrt(
        "n1",
        [zone(0, {"cpu": 4, "memory": "8Gi", "vendor/gpu": 0}), zone(1, {"cpu": 0, "memory": "8Gi", "vendor/gpu": 2})],
        policy="restricted",
    )
    p = pod("p", [container("c", {"cpu": 2, "memory": "1Gi", "vendor/gpu": 1})])
    assert isinstance(nfilter(p, topo, NODE, options=KUBELET), Reject)
    # a Burstable pod's cpu is not NUMA-managed by the kubelet: only the device counts
    b = pod("p", [container("c", {"cpu": 2, "vendor/gpu": 1}, guaranteed=False)])
    assert isinstance(nfilter(b, topo, NODE, options=KUBELET), Fit)
