"""Memory with every zone distinct (issue 30): what is still alike between zones and rows is held once."""

from __future__ import annotations

from place_helpers import node_doc, nrt, zone

from numaplane.nrt.model import NodeResourceTopology
from numaplane.placement.arrays.cluster import ClusterArrays
from numaplane.placement.model.node import node_info
from numaplane.placement.model.view import node_topology


def _distinct(i: int) -> NodeResourceTopology:
    """Node ``i``'s NRT: free memory differs in every zone, capacities and distances are alike."""
    zs = []
    for z in range(2):
        doc = zone(z, {"cpu": 8, "memory": "512000Mi"}, costs={0: 10 + 11 * z, 1: 21 - 11 * z})
        doc["resources"][1]["available"] = f"{1000 * (4 * i + z + 1)}Mi"
        zs.append(doc)
    return nrt(f"n{i}", zs)


def test_views_of_distinct_zones_share_allocatable_and_costs() -> None:
    a, b = node_topology(_distinct(1)), node_topology(_distinct(2))
    for za, zb in zip(a.zones, b.zones, strict=True):
        assert za.available != zb.available
        assert za.allocatable == zb.allocatable and za.costs == zb.costs
        assert za.allocatable is zb.allocatable and za.costs is zb.costs
    assert a.config == b.config and a.config is b.config


def test_rows_with_one_layout_share_it_and_results_are_unchanged() -> None:
    cl = ClusterArrays(zones=2, capacity=4)
    for i in range(40):
        cl.upsert(f"n{i}", node_topology(_distinct(i)), node_info(node_doc(f"n{i}")))
    layouts = {id(cl._layouts[row][1]) for row in range(cl.n)}  # the sharing itself is the subject
    assert len(layouts) == 1
    assert cl.capacity < 2 * cl.n  # grows by half its size: at most half of the rows are slack
    memory = cl.columns["memory"]
    assert sorted(int(v) for v in cl.avail_m[memory, 0, : cl.n]) == sorted(
        1000 * (4 * i + 1) * 1048576 * 1000 for i in range(40)
    )
