"""NodeResourceTopology documents for the scheduler benchmarks (shared by bench/scheduler_*.py).

Not a benchmark itself: imported by the scripts (``python bench/<name>.py`` puts ``bench/`` on the path).
"""

from __future__ import annotations

from typing import Any

Rows = dict[str, tuple[int, int]]  # resource → (capacity = allocatable, available)


def nrt_document(name: str, zones: list[Rows], *, costs: bool = False, scope: str = "container") -> dict[str, Any]:
    """A single-numa-node NRT (topology manager ``scope``) with one ``node-<i>`` zone per entry of
    ``zones``; with ``costs`` every zone lists distance 10 to itself and 21 to the others."""
    docs = []
    for z, rows in enumerate(zones):
        zone: dict[str, Any] = {"name": f"node-{z}", "type": "Node"}
        if costs:
            zone["costs"] = [{"name": f"node-{k}", "value": 10 if k == z else 21} for k in range(len(zones))]
        zone["resources"] = [
            {"name": r, "capacity": str(a), "allocatable": str(a), "available": str(v)} for r, (a, v) in rows.items()
        ]
        docs.append(zone)
    return {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": name},
        "attributes": [
            {"name": "topologyManagerPolicy", "value": "single-numa-node"},
            {"name": "topologyManagerScope", "value": scope},
        ],
        "zones": docs,
    }
