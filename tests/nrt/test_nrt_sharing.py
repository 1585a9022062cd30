"""Equal zones of different NRT objects become one shared zone; values and text stay the same."""

from __future__ import annotations

import gc
from typing import Any

from numaplane.nrt.parse import parse_strict
from numaplane.nrt.sharing import ZoneTable

GI = 1 << 30


def doc(name: str, cpu_free: int | str, memory: int | str = 8 * GI) -> dict[str, Any]:
    rows = [
        {"name": "cpu", "capacity": 8, "allocatable": 8, "available": cpu_free},
        {"name": "memory", "capacity": memory, "allocatable": memory, "available": memory},
    ]
    zones = [
        {"name": f"node-{z}", "type": "Node", "costs": [{"name": "node-0", "value": 10}], "resources": rows}
        for z in range(2)
    ]
    return {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": name},
        "zones": zones,
    }


def test_equal_zones_of_two_nodes_are_one_object_and_the_objects_stay_equal() -> None:
    table = ZoneTable()
    first = parse_strict(doc("a", 6))
    second = parse_strict(doc("b", 6))
    assert first.zones[0] is not second.zones[0]
    shared_first, shared_second = table.shared(first), table.shared(second)
    assert shared_first == first and shared_first.to_dict() == first.to_dict()
    assert shared_second == second and shared_second.name == "b"
    assert all(a is b for a, b in zip(shared_first.zones, shared_second.zones, strict=True))
    assert shared_second.to_dict() == second.to_dict()
    assert len(table) == 2  # node-0 and node-1


def test_zones_that_differ_in_a_value_are_not_shared() -> None:
    table = ZoneTable()
    first = table.shared(parse_strict(doc("a", 6)))
    second = table.shared(parse_strict(doc("b", 5)))
    assert first.zones[0] is not second.zones[0]
    assert second.zones[0].resource("cpu") is not None
    assert [z.to_dict() for z in second.zones] == doc("b", 5)["zones"]


def test_zones_equal_in_value_but_written_differently_keep_their_own_text() -> None:
    table = ZoneTable()
    plain = table.shared(parse_strict(doc("a", 6, memory=8 * GI)))
    suffixed = table.shared(parse_strict(doc("b", 6, memory="8Gi")))
    amounts = [{r.name: r.available.amount for r in obj.zones[0].resources} for obj in (plain, suffixed)]
    assert amounts[0] == amounts[1]
    assert plain.zones[0] is not suffixed.zones[0]  # but re-emit their own text
    assert suffixed.to_dict()["zones"] == doc("b", 6, memory="8Gi")["zones"]


def test_the_table_forgets_a_zone_no_object_holds_any_more() -> None:
    table = ZoneTable()
    kept = table.shared(parse_strict(doc("a", 6)))
    table.shared(parse_strict(doc("b", 5)))
    gc.collect()
    assert len(table) == 2  # only the zones of ``kept``
    assert table.shared(parse_strict(doc("c", 6))).zones[1] is kept.zones[1]


def test_a_zone_whose_hash_is_taken_by_other_content_stays_unshared_and_keeps_its_value() -> None:
    assert hash(-1) == hash(-2)  # CPython: so the two zones' keys below hash alike
    table = ZoneTable()
    first, second = doc("a", 6), doc("b", 6)
    first["zones"][0]["costs"] = [{"name": "node-0", "value": -1}]
    second["zones"][0]["costs"] = [{"name": "node-0", "value": -2}]
    shared_first = table.shared(parse_strict(first))
    shared_second = table.shared(parse_strict(second))
    assert shared_second.zones[0] is not shared_first.zones[0]
    assert shared_second.zones[0].cost_to("node-0") == -2
    assert shared_second.zones[1] is shared_first.zones[1]


def test_equal_rows_and_cost_lists_of_different_zones_are_shared() -> None:
    table = ZoneTable()
    first = table.shared(parse_strict(doc("a", 6)))
    second = table.shared(parse_strict(doc("b", 5)))  # other cpu row, same memory row
    assert first.zones[0] is not second.zones[0]
    assert first.zones[0].resources[1] is second.zones[0].resources[1]  # memory
    assert first.zones[0].resources[0] is not second.zones[0].resources[0]  # cpu
    assert first.zones[0].costs is second.zones[0].costs
    assert second.to_dict() == parse_strict(doc("b", 5)).to_dict()
