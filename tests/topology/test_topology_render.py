"""Rendering: the picture's box layout is sound (children inside parents, siblings apart) and readable."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from numaplane.topology.document import topology_document, topology_from_dict, topology_to_dict
from numaplane.topology.model import Topology, synthetic
from numaplane.topology.render import render, render_table, to_json, to_yaml
from numaplane.topology.render_layout import Box, layout
from numaplane.topology.render_picture import build_boxes

EPS = 1e-9


def _check(box: Box) -> None:
    for child in box.children:
        assert box.x - EPS <= child.x and child.x + child.w <= box.x + box.w + EPS, (box.kind, child.kind)
        assert box.y - EPS <= child.y and child.y + child.h <= box.y + box.h + EPS, (box.kind, child.kind)
    for i, a in enumerate(box.children):
        for b in box.children[i + 1 :]:
            apart = a.x + a.w <= b.x + EPS or b.x + b.w <= a.x + EPS or a.y + a.h <= b.y + EPS or b.y + b.h <= a.y + EPS
            assert apart, (a.kind, b.kind)
    for child in box.children:
        _check(child)


@pytest.mark.parametrize(
    "name",
    [
        "ibm-power7-8n-256t-smt4",
        "intel-xeon-x7550-4s-64t-3nodes",
        "ibm-power9-2s-6gpumem-nodes",
        "intel-xeon-e5-2680v3-2s-offline-cpu0-node0",
        "intel-hybrid-4p8e-1s1n-16t",
        "intel-xeon-gold6330-2s2n-112t-pci",
    ],
)
def test_layout_is_sound_and_shows_every_cpu(name: str, discovered: Callable[[str], Topology]) -> None:
    t = discovered(name)
    root = build_boxes(t)
    layout(root)
    _check(root)
    labels = sorted(int(b.label) for b in root.walk() if b.kind.startswith("pu"))
    assert labels == [c.cpu for c in t.cpus]
    # thread cells keep their size whatever the machine; the figure grows instead (within reason)
    assert all(b.w >= 0.3 for b in root.walk() if b.kind.startswith("pu"))
    assert root.w < 30 and root.h < 30 and 0.3 < root.w / root.h < 4


def test_offline_and_isolated_cpus_are_marked(discovered: Callable[[str], Topology]) -> None:
    root = build_boxes(discovered("intel-xeon-e5-2680v3-2s-offline-cpu0-node0"))
    assert sorted(int(b.label) for b in root.walk() if b.kind == "pu-off") == [0, 1, 2, 3, 21, 22, 23]
    root = build_boxes(discovered("intel-xeon-2s-snc2-4n-2pmem-112t"))
    assert sorted(int(b.label) for b in root.walk() if b.isolated) == [4, 5, 6, 7, 60, 61, 62, 63]


def test_png_and_svg() -> None:
    t = synthetic(sockets=2, numa_per_socket=2, cores_per_numa=4, hugepages_1g_per_numa=2)
    assert render(t, "png").startswith(b"\x89PNG")
    svg = render(t, "svg").decode()
    assert "<svg" in svg and "hugepages 1Gi: 2 (2 free)" in svg
    assert render(t, "svg") == render(t, "svg")  # deterministic


def test_text_formats_are_the_document(discovered: Callable[[str], Topology]) -> None:
    import json

    import yaml

    t = discovered("amd-ryzen5-1600-1s1n-12t")
    doc = json.loads(to_json(t))
    assert doc == topology_document(t) and yaml.safe_load(to_yaml(t)) == doc
    assert doc["kind"] == "Topology" and doc["numNumaNodes"] == 1 and "memoryTotalBytes" in doc["numaNodes"][0]
    assert topology_to_dict(topology_from_dict(doc)) == topology_to_dict(t)
    table = render_table(t)
    assert "L3" in table and "43" in table and "no meminfo" in table
