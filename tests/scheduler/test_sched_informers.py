"""The scheduler's informers cache reduced objects: NRT stubs holding the parsed object, no managedFields."""

from __future__ import annotations

from sched_helpers import GI, node_doc, nrt_doc, zone_doc

from numaplane.kube.memory import InMemoryKube
from numaplane.kube.resources import NODE, NODE_RESOURCE_TOPOLOGY
from numaplane.nrt.parse import parse_strict
from numaplane.nrt.sharing import ZoneTable
from numaplane.scheduler.informers import PARSED_NRT, node_view, nrt_stub, without_managed_fields


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
