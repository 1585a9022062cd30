"""Views of objects that share a zone share its reading; readings go with their zones."""

from __future__ import annotations

import gc
from dataclasses import replace
from typing import Any

from numaplane.nrt.parse import parse_strict
from numaplane.nrt.sharing import ZoneTable
from numaplane.placement.caches.cachebase import LatestNRTs
from numaplane.placement.model.view import ZoneReadings, node_topology


def doc(name: str, cpu_free: int) -> dict[str, Any]:
    rows = [{"name": "cpu", "capacity": 8, "allocatable": 8, "available": cpu_free}]
    zones = [{"name": f"node-{z}", "type": "Node", "resources": rows} for z in range(2)]
    zones.append({"name": "socket-0", "type": "Socket"})
    return {"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology",
            "metadata": {"name": name}, "zones": zones}  # fmt: skip


def test_views_of_nodes_sharing_zones_share_their_numa_zones_and_equal_private_views() -> None:
    table = ZoneTable()
    objs = [table.shared(parse_strict(doc(f"n{i}", 6))) for i in range(3)]
    latest = LatestNRTs(objs)
    views = [latest.view(f"n{i}") for i in range(3)]
    assert all(v is not None for v in views)
    for obj, view in zip(objs, views, strict=True):
        private = node_topology(parse_strict(obj.to_dict()), {})
        assert view == private and view is not None and view.node == obj.name
    first, second = views[0], views[1]
    assert first is not None and second is not None
    assert all(a is b for a, b in zip(first.zones, second.zones, strict=True))
    assert first.ignored == second.ignored and first.describe_ignored() == "socket-0 (type 'Socket' is not 'Node')"


def test_a_reading_is_dropped_when_its_zone_is_freed() -> None:
    readings = ZoneReadings()
    obj = parse_strict(doc("n1", 6))
    kinds = [type(readings.read(z)).__name__ for z in obj.zones]
    assert kinds == ["NUMAZone", "NUMAZone", "IgnoredZone"]
    assert len(readings) == 3
    again = readings.read(obj.zones[0])
    assert again is readings.read(obj.zones[0])
    obj = replace(obj, zones=obj.zones[:1])
    gc.collect()
    assert len(readings) == 1
    del obj
    gc.collect()
    assert len(readings) == 0
