"""NodeResourceTopology model: round trip, exact quantities, tolerant parsing, helpers."""

from __future__ import annotations

import copy
from fractions import Fraction
from typing import Any

import pytest

from numaplane.nrt.errors import NRTFormatError
from numaplane.nrt.model import (
    Attribute,
    CostInfo,
    NodeResourceTopology,
    ObjectMeta,
    OwnerReference,
    ResourceInfo,
    Zone,
    merge_attributes,
    set_attribute,
    zone_name,
    zone_numa_id,
)
from numaplane.nrt.parse import parse_lenient, parse_strict


def _foreign() -> dict[str, Any]:
    """An object as the upstream exporter (or NFD) writes it, with every optional field."""
    return {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {
            "name": "worker-0",
            "uid": "1b2c",
            "resourceVersion": "77",
            "labels": {"app": "rte"},
            "annotations": {"k8stopoawareschedwg/rte-update": "periodic"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": "worker-0", "uid": "9f", "controller": True}
            ],
        },
        "topologyPolicies": ["SingleNUMANodeContainerLevel"],
        "attributes": [
            {"name": "topologyManagerPolicy", "value": "single-numa-node"},
            {"name": "topologyManagerScope", "value": "container"},
        ],
        "zones": [
            {
                "name": "node-0",
                "type": "Node",
                "costs": [{"name": "node-0", "value": 10}, {"name": "node-1", "value": 21}],
                "attributes": [{"name": "topology.node.k8s.io/numaplacement-vector", "value": "x"}],
                "resources": [
                    {"name": "cpu", "capacity": 12, "allocatable": "11", "available": "9500m"},
                    {"name": "memory", "capacity": "64Gi", "allocatable": "61Gi", "available": "1e9"},
                ],
            },
            {"name": "numa-node-1", "type": "Node", "parent": "socket-0"},
            {"name": "node-2", "type": "Socket"},
        ],
    }


def test_round_trip_is_faithful() -> None:
    doc = _foreign()
    nrt = parse_strict(copy.deepcopy(doc))
    assert nrt.to_dict() == doc
    cpu = nrt.zones[0].resource("cpu")
    assert cpu is not None
    assert cpu.available.amount == Fraction(19, 2)
    assert cpu.capacity.amount == 12
    memory = nrt.zones[0].resource("memory")
    assert memory is not None and memory.capacity.amount == 64 << 30


def test_helpers() -> None:
    nrt = parse_strict(_foreign())
    assert nrt.name == "worker-0"
    assert nrt.attribute("topologyManagerScope") == "container"
    assert nrt.attribute("missing") is None
    assert nrt.numa_zones().keys() == {0}  # numa-node-1 unparseable, node-2 is not a Node zone
    zone = nrt.zone("node-0")
    assert zone is not None and zone.cost_to("node-1") == 21 and zone.numa_id == 0
    assert nrt.metadata.owner_references[0] == OwnerReference("v1", "Node", "worker-0", "9f", True)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("node-0", 0),
        ("node-17", 17),
        ("node-255", 255),
        ("node-+3", 3),
        ("node-01", 1),
        ("node--1", None),
        ("node-", None),
        ("numa-node-0", None),
        ("node-1x", None),
        ("Node-1", None),
        ("node-1 ", None),
    ],
)
def test_zone_numa_id(name: str, expected: int | None) -> None:
    assert zone_numa_id(name) == expected


def test_zone_name() -> None:
    assert zone_name(3) == "node-3"
    with pytest.raises(ValueError):
        zone_name(-1)


def test_computed_rows_emit_plain_integers() -> None:
    nrt = NodeResourceTopology(
        ObjectMeta("n"),
        (
            Zone(
                "node-0",
                costs=(CostInfo("node-0", 10),),
                resources=(ResourceInfo.of_ints("memory", 240518168576, 2, 0),),
            ),
        ),
    )
    assert nrt.to_dict()["zones"][0]["resources"] == [
        {"name": "memory", "capacity": "240518168576", "allocatable": "2", "available": "0"}
    ]
    # zones are always emitted (required), empty optional lists never
    assert NodeResourceTopology(ObjectMeta("n")).to_dict() == {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": "n"},
        "zones": [],
    }


def test_v1alpha1_is_accepted() -> None:
    doc = {
        "apiVersion": "topology.node.k8s.io/v1alpha1",
        "kind": "NodeResourceTopology",
        "metadata": {"name": "n"},
        "topologyPolicies": ["None"],
        "zones": [],
    }
    nrt = parse_strict(doc)
    assert nrt.to_dict() == doc


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda d: d.__setitem__("metadata", None), "$.metadata"),
        (lambda d: d["metadata"].pop("name"), "$.metadata.name"),
        (lambda d: d.pop("zones"), "$.zones"),
        (lambda d: d.__setitem__("zones", {}), "$.zones"),
        (
            lambda d: d["zones"][0]["resources"][0].__setitem__("available", "9 cores"),
            "$.zones[0].resources[0].available",
        ),
        (lambda d: d["zones"][0]["resources"][1].__setitem__("capacity", True), "$.zones[0].resources[1].capacity"),
        (lambda d: d["zones"][0]["costs"][1].__setitem__("value", "21"), "$.zones[0].costs[1].value"),
        (lambda d: d["zones"][1].pop("type"), "$.zones[1].type"),
        (lambda d: d["attributes"][0].pop("value"), "$.attributes[0].value"),
        (lambda d: d["zones"].append(7), "$.zones[3]"),
        (lambda d: d.__setitem__("kind", "Node"), "$.kind"),
        (lambda d: d["metadata"]["ownerReferences"][0].pop("uid"), "$.metadata.ownerReferences[0].uid"),
    ],
)
def test_format_errors_name_the_field(mutate: Any, path: str) -> None:
    doc = _foreign()
    mutate(doc)
    with pytest.raises(NRTFormatError) as info:
        parse_strict(doc)
    assert info.value.path == path
    assert isinstance(info.value, ValueError)


def test_not_an_object() -> None:
    with pytest.raises(NRTFormatError):
        parse_strict([1, 2])


def test_lenient_drops_bad_parts_and_reports() -> None:
    doc = _foreign()
    doc["zones"][0]["resources"][0]["available"] = "lots"
    doc["zones"].append("garbage")
    nrt, problems = parse_lenient(doc)
    assert [p.path for p in problems] == ["$.zones[0].resources[0].available", "$.zones[3]"]
    assert [r.name for r in nrt.zones[0].resources] == ["memory"]
    assert len(nrt.zones) == 3
    nrt2, problems2 = parse_lenient(_foreign())
    assert problems2 == () and nrt2 == parse_strict(_foreign())


def test_attribute_helpers() -> None:
    attrs = (Attribute("a", "1"), Attribute("b", "2"))
    assert set_attribute(attrs, "a", "9") == (Attribute("a", "9"), Attribute("b", "2"))
    assert set_attribute(attrs, "c", "3")[-1] == Attribute("c", "3")
    merged = merge_attributes(attrs, [Attribute("c", "3"), Attribute("a", "0")])
    assert merged == (Attribute("a", "0"), Attribute("b", "2"), Attribute("c", "3"))


def test_values_are_frozen_and_hashable() -> None:
    nrt = parse_strict(_foreign())
    with pytest.raises(AttributeError):
        nrt.zones = ()  # type: ignore[misc]
    assert hash(nrt) == hash(parse_strict(_foreign()))
