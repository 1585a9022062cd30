"""The scheduler's informers cache reduced objects: NRT stubs holding the parsed object, no managedFields."""

from __future__ import annotations

import pytest
from sched_helpers import GI, node_doc, nrt_doc, zone_doc

from numaplane.kube.memory import InMemoryKube
from numaplane.kube.resources import NODE, NODE_RESOURCE_TOPOLOGY
from numaplane.nrt.parse import parse_strict
from numaplane.nrt.sharing import ZoneTable
from numaplane.placement.explain.predicates import parse_node
from numaplane.placement.model.errors import NodeDataError
from numaplane.placement.model.node import node_info
from numaplane.resources.quantity import parse_quantity
from numaplane.scheduler.informers import PARSED_NRT, node_view, nrt_stub, pod_view, without_managed_fields


async def test_an_nrt_is_cached_as_a_stub_holding_its_parsed_object() -> None:
    store = InMemoryKube()
    stored = await store.create(
        NODE_RESOURCE_TOPOLOGY, nrt_doc("n1", [zone_doc(0, {"cpu": (8, 6), "memory": (GI, GI)})])
    )
    assert stored["metadata"]["managedFields"]
    stub = nrt_stub(dict(stored, metadata=dict(stored["metadata"])))
    meta = stored["metadata"]
    assert stub["metadata"] == {"name": "n1", "resourceVersion": meta["resourceVersion"]}
    expected = parse_strict(without_managed_fields(dict(stored, metadata=dict(meta))))
    assert stub[PARSED_NRT] == expected
    assert set(stub) == {"apiVersion", "kind", "metadata", PARSED_NRT}


def test_a_malformed_nrt_is_cached_whole_for_the_core_to_report() -> None:
    doc = nrt_doc("n1", [{"name": "node-0", "type": "Node", "resources": [{"name": "cpu", "capacity": "x"}]}])
    assert nrt_stub(doc) is doc


async def test_a_node_is_cached_without_images_and_managed_fields() -> None:
    store = InMemoryKube()
    doc = node_doc("n1")
    doc["status"]["images"] = [{"names": ["registry.example/app:1"], "sizeBytes": 1}]
    stored = await store.create(NODE, doc)
    assert stored["status"]["images"] and stored["metadata"]["managedFields"]
    view = node_view(stored)
    assert "images" not in view["status"] and "managedFields" not in view["metadata"]
    assert view["status"]["allocatable"] == doc["status"]["allocatable"]


def test_equal_strings_of_two_nodes_become_one_object() -> None:
    first, second = node_doc("n1"), node_doc("n2")
    cpu = "".join(["25", "2"])  # built at run time: not a shared constant
    first["status"]["allocatable"]["cpu"], second["status"]["allocatable"]["cpu"] = cpu, "".join(["2", "52"])
    assert first["status"]["allocatable"]["cpu"] is not second["status"]["allocatable"]["cpu"]
    node_view(first)
    node_view(second)
    assert first["status"]["allocatable"]["cpu"] is second["status"]["allocatable"]["cpu"]
    assert first["status"]["allocatable"] == second["status"]["allocatable"]


def test_the_nrt_informer_shares_equal_zones_between_nodes() -> None:
    zones = ZoneTable()
    rows = {"cpu": (8, 6), "memory": (GI, GI)}
    first = nrt_stub(nrt_doc("n1", [zone_doc(0, rows)]), zones)[PARSED_NRT]
    second = nrt_stub(nrt_doc("n2", [zone_doc(0, rows)]), zones)[PARSED_NRT]
    assert first.zones[0] is second.zones[0]
    assert second == parse_strict(nrt_doc("n2", [zone_doc(0, rows)]))


def test_equal_resource_maps_of_nodes_and_pods_become_one_object() -> None:
    first, second = node_doc("n1"), node_doc("n2")
    first["status"]["allocatable"] = dict(first["status"]["allocatable"])
    second["status"]["allocatable"] = dict(first["status"]["allocatable"])
    assert node_view(first)["status"]["allocatable"] is node_view(second)["status"]["allocatable"]
    odd = node_doc("n3")
    odd["status"]["allocatable"] = {"cpu": ["not", "a", "quantity"]}  # malformed: kept as it is
    assert node_view(odd)["status"]["allocatable"] == {"cpu": ["not", "a", "quantity"]}

    def pod(name: str) -> dict[str, object]:
        reqs = {"cpu": "2", "memory": "4Gi"}
        resources = {"requests": dict(reqs), "limits": dict(reqs)}
        return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "resources": resources}]}}

    a, b = pod_view(pod("a")), pod_view(pod("b"))
    assert a["spec"]["containers"][0]["resources"]["requests"] is b["spec"]["containers"][0]["resources"]["requests"]
    assert a["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "2", "memory": "4Gi"}


def test_equal_allocatable_maps_parse_to_one_object_and_bad_ones_still_fail() -> None:
    first, second = node_doc("n1"), node_doc("n2")
    second["status"]["allocatable"] = dict(first["status"]["allocatable"])
    assert node_info(first).allocatable is node_info(second).allocatable
    assert parse_node(first).allocatable is node_info(second).allocatable
    assert dict(node_info(first).allocatable) == {
        k: parse_quantity(v) for k, v in first["status"]["allocatable"].items()
    }
    bad = node_doc("n3")
    bad["status"]["allocatable"] = {"cpu": "lots"}
    with pytest.raises(NodeDataError, match=r"status\.allocatable\.cpu"):
        node_info(bad)
