"""NUMA filter: upstream semantics beyond the conformance cases, data problems and explanations."""

from __future__ import annotations

from pathlib import Path

import pytest
from place_helpers import container, gu_pod, node_doc, nrt, nrt_doc, pod, two_zone_nrt, zone

from numaplane.conformance.runner import run_files
from numaplane.placement.explain.filter import FilterOptions
from numaplane.placement.explain.filter import filter as nfilter
from numaplane.placement.model.node import NodeInfo, node_info
from numaplane.placement.model.result import Fit, Reject
from numaplane.placement.model.view import node_topology, topology_manager_config

NODE = node_doc("n1", {"cpu": "8", "memory": "16Gi", "vendor/nic": "4", "hugepages-2Mi": "1Gi"})


@pytest.mark.parametrize("kind", ["nrt-filter", "nrt-score"])
def test_place_conformance_all_pass(shared_dir: Path, kind: str) -> None:
    report = run_files([shared_dir / "conformance" / f"{kind}.jsonl"], [shared_dir / "conformance"])
    assert report.failed == 0, report.to_dict()["failures"]
    assert report.passed == {"nrt-filter": 52, "nrt-score": 17}[kind]


def test_fit_reports_lowest_feasible_zone_per_container() -> None:
    p = pod("p", [container("a", {"cpu": 3, "memory": "1Gi"}), container("b", {"cpu": 3, "memory": "1Gi"})])
    verdict = nfilter(p, two_zone_nrt(), NODE)
    assert isinstance(verdict, Fit) and verdict.checked
    assert verdict.placements == (("a", 0), ("b", 1))


def test_reject_explains_which_zone_lacks_what() -> None:
    topo = nrt("n1", [zone(0, {"cpu": 2, "memory": "8Gi"}), zone(1, {"cpu": 8, "memory": "1Gi"})])
    verdict = nfilter(gu_pod(cpu=4, memory="2Gi"), topo, NODE)
    assert isinstance(verdict, Reject)
    assert (verdict.reason, verdict.code, verdict.unit) == ("cannot align container", "Unschedulable", "c")
    lacks = {(s.zone, s.resource) for s in verdict.shortfalls}
    assert lacks == {("node-0", "cpu"), ("node-1", "memory")}
    assert "node-0: cpu 4 requested, 2 available" in verdict.explain()


def test_pod_scope_uses_plugin_request_with_sidecar_not_summed() -> None:
    # apps 2 cpu, sidecar 2 cpu: the plugin takes max(2, 2) = 2, kube-scheduler would sum to 4.
    p = pod(
        "p",
        [container("app", {"cpu": 2, "memory": "1Gi"})],
        init=[container("side", {"cpu": 2, "memory": "1Gi"}, restartPolicy="Always")],
    )
    assert p.effective_requests()["cpu"].value() == 4
    verdict = nfilter(p, two_zone_nrt(cpu=3, scope="pod"), NODE)
    assert isinstance(verdict, Fit)


def test_not_fresh_and_missing_node() -> None:
    p = gu_pod()
    stale = nfilter(p, two_zone_nrt(), NODE, fresh=False)
    assert isinstance(stale, Reject) and stale.reason == "invalid node topology data"
    missing = nfilter(p, two_zone_nrt(), None)
    assert isinstance(missing, Reject) and (missing.reason, missing.code) == ("node not found", "Error")


def test_best_effort_pod_passes_unchecked_but_device_pod_is_checked() -> None:
    topo = nrt("n1", [zone(0, {"cpu": 4, "vendor/nic": 1})])
    assert nfilter(pod("be", [container("c", guaranteed=False)]), topo, NODE) == Fit(
        False, notes=("BestEffort pod without devices is not NUMA-checked",)
    )
    dev = pod("dev", [container("c", {"vendor/nic": 2})])
    assert dev.qos_class == "BestEffort"
    assert isinstance(nfilter(dev, topo, NODE), Reject)


def test_resource_not_advertised_by_node_fails_even_if_zones_have_it() -> None:
    # A bare name like "gpu" is not a scalar resource: the scheduler's node allocatable drops it.
    topo = nrt("n1", [zone(0, {"cpu": 4, "memory": "8Gi", "gpu": 2})])
    node = node_doc("n1", {"cpu": "4", "memory": "8Gi", "gpu": "2"})
    verdict = nfilter(pod("p", [container("c", {"cpu": 1, "memory": "1Gi", "gpu": 1})]), topo, node)
    assert isinstance(verdict, Reject) and verdict.resource == "gpu"
    assert not node_info(node).advertises("gpu")
    assert NodeInfo("x", {}).advertises("ephemeral-storage")


def test_host_level_device_unlisted_is_ignored_but_native_unlisted_fails() -> None:
    topo = nrt("n1", [zone(0, {"cpu": 4, "memory": "8Gi"})])
    ok = nfilter(pod("p", [container("c", {"cpu": 1, "memory": "1Gi", "vendor/nic": 1})]), topo, NODE)
    assert isinstance(ok, Fit)
    hp = nfilter(pod("p", [container("c", {"cpu": 1, "memory": "1Gi", "hugepages-2Mi": "2Mi"})]), topo, NODE)
    assert isinstance(hp, Reject) and hp.resource == "hugepages-2Mi"


def test_zero_request_is_ignored_even_for_unknown_resource() -> None:
    p = pod("p", [container("c", {"cpu": 1, "memory": "1Gi", "example.com/none": 0})])
    assert isinstance(nfilter(p, two_zone_nrt(), NODE), Fit)


def test_malformed_nrt_document_is_a_clear_rejection() -> None:
    doc = nrt_doc("n1", [zone(0, {"cpu": 4, "memory": "8Gi"})])
    doc["zones"][0]["resources"][0]["available"] = "four"
    verdict = nfilter(gu_pod(), doc, NODE)
    assert isinstance(verdict, Reject)
    assert verdict.reason == "malformed node topology data"
    assert "zones[0].resources[0].available" in verdict.explain()


def test_malformed_node_object_is_a_rejection() -> None:
    bad = node_doc("n1")
    bad["status"]["allocatable"]["cpu"] = "lots"
    verdict = nfilter(gu_pod(), two_zone_nrt(), bad)
    assert isinstance(verdict, Reject) and verdict.code == "Error"


def test_no_usable_zone_rejects_and_lists_ignored_zones() -> None:
    topo = nrt("n1", [zone("numa-node-0", {"vendor/nic": 4}), zone(0, {"vendor/nic": 4}, ztype="Socket")])
    device_only = pod("p", [container("c", {"vendor/nic": 1})])
    verdict = nfilter(device_only, topo, NODE)
    assert isinstance(verdict, Reject) and verdict.reason == "no usable NUMA zone in node topology data"
    assert "numa-node-0 (name is not node-<id>)" in verdict.explain()
    assert "node-0 (type 'Socket' is not 'Node')" in verdict.explain()
    # upstream behaviour on request
    assert isinstance(nfilter(device_only, topo, NODE, options=FilterOptions(reject_without_zones=False)), Fit)
    # cpu is NUMA-affine and listed nowhere: upstream's own message, with the explanation
    cpu = nfilter(gu_pod(), topo, NODE)
    assert isinstance(cpu, Reject) and cpu.reason == "cannot align container"
    assert "no usable NUMA zone" in cpu.explain()


def test_zone_ids_above_63_are_ignored() -> None:
    topo = nrt("n1", [zone(64, {"cpu": 8, "memory": "8Gi"}), zone(75, {"cpu": 8, "memory": "8Gi"})])
    view = node_topology(topo)
    assert view.zones == () and [z.name for z in view.ignored] == ["node-64", "node-75"]


def test_duplicate_resource_rows_last_wins() -> None:
    doc = nrt_doc("n1", [zone(0, {"cpu": 4, "memory": "8Gi"})])
    doc["zones"][0]["resources"].append({"name": "cpu", "capacity": "1", "allocatable": "1", "available": "1"})
    verdict = nfilter(gu_pod(cpu=2), doc, NODE)
    assert isinstance(verdict, Reject)


@pytest.mark.parametrize(
    ("legacy", "attributes", "expected"),
    [
        (["SingleNUMANodePodLevel"], {}, ("single-numa-node", "pod", 8)),
        (["RestrictedContainerLevel", "SingleNUMANodePodLevel"], {}, ("restricted", "container", 8)),
        (["Restricted"], {}, ("none", "container", 8)),
        (["BestEffortPodLevel"], {"topologyManagerPolicy": "single-numa-node"}, ("single-numa-node", "pod", 8)),
        ([], {"topologyManagerPolicy": "Single-NUMA-Node"}, ("none", "container", 8)),
        ([], {"topologyManagerMaxNUMANodes": "1"}, ("none", "container", 8)),
        ([], {"topologyManagerMaxNUMANodes": "+16"}, ("none", "container", 16)),
        ([], {"topologyManagerMaxNUMANodes": "5000"}, ("none", "container", 1024)),
        ([], {"topologyManagerMaxNUMANodes": "x"}, ("none", "container", 8)),
    ],
)
def test_topology_manager_config(legacy: list[str], attributes: dict[str, str], expected: tuple[str, str, int]) -> None:
    obj = nrt("n1", [], policy=None, scope=None, legacy=legacy, attributes=attributes)
    config = topology_manager_config(obj)
    assert (config.policy, config.scope, config.max_numa_nodes) == expected


def test_container_scope_subtracts_only_quantity_checked_resources_for_burstable() -> None:
    # Burstable: cpu is presence-only and not subtracted; the device is subtracted zone by zone.
    topo = nrt("n1", [zone(0, {"cpu": 1, "memory": "1Gi", "vendor/nic": 1}), zone(1, {"cpu": 1, "vendor/nic": 1})])
    p = pod(
        "p",
        [
            container("a", {"cpu": 4, "vendor/nic": 1}, guaranteed=False),
            container("b", {"cpu": 4, "vendor/nic": 1}, guaranteed=False),
        ],
    )
    verdict = nfilter(p, topo, NODE)
    assert isinstance(verdict, Fit) and verdict.placements == (("a", 0), ("b", 1))
    third = pod("p", [*[container(n, {"vendor/nic": 1}, guaranteed=False) for n in "abc"]])
    assert isinstance(nfilter(third, topo, NODE), Reject)


def test_inputs_are_not_mutated() -> None:
    topo = two_zone_nrt()
    before = topo.to_dict()
    nfilter(
        pod("p", [container("a", {"cpu": 3, "memory": "1Gi"}), container("b", {"cpu": 3, "memory": "1Gi"})]), topo, NODE
    )
    assert topo.to_dict() == before
