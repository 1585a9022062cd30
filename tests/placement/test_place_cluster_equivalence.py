"""Vectorised row writes of :class:`ClusterArrays` give exactly the arrays of the verbatim reference
(:mod:`reference_cluster`) after any sequence of upserts and removals, including growth of slots and
capacity, new columns, irregular rows and rows that lose their NRT."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from place_helpers import node_doc, nrt_doc, zone
from reference_cluster import ReferenceClusterArrays

from numaplane.nrt.model import NodeResourceTopology
from numaplane.nrt.parse import parse_strict
from numaplane.placement.arrays.cluster import ClusterArrays
from numaplane.placement.caches.cachebase import parse_event
from numaplane.placement.model.node import NodeInfo, node_info
from numaplane.placement.model.view import NodeTopology
from numaplane.resources.quantity import parse_quantity

RESOURCES = ["cpu", "memory", "hugepages-1Gi", "vendor/nic", "gpu", "ephemeral-storage"]
VALUES = ["0", "1", "2", "7", "500m", "1500m", "1Gi", "3Gi", "1n", "1e20", "1234567"]
PER_ROW = ("present", "has_nrt", "fresh", "problem", "irregular", "policy", "scope_pod", "max_numa", "nzones")
PER_CELL = ("avail_m", "avail_min", "avail_f", "avail_fs", "avail_finf", "avail_zero", "listed")


def _view(rng: random.Random, name: str) -> NodeTopology | None:
    if rng.random() < 0.1:
        return None
    count = rng.randint(0, 6)
    ids = list(range(count)) if rng.random() < 0.8 else [rng.randint(0, 4) for _ in range(count)]
    zones: list[dict[str, Any]] = []
    for i in ids:
        res = rng.sample(RESOURCES, rng.randint(0, 4))
        z = zone(i, {r: rng.choice(VALUES) for r in res})
        if rng.random() < 0.7:
            z["costs"] = [{"name": f"node-{j}", "value": rng.choice((10, 21, 1 << 40))} for j in range(6)]
        zones.append(z)
    policy = rng.choice(("single-numa-node", "restricted", "none"))
    doc = nrt_doc(name, zones, policy=policy, scope=rng.choice(("pod", "container")))
    if rng.random() < 0.05:
        doc["zones"].append({"name": "node-9", "type": "Node", "resources": [{"name": "cpu", "capacity": "x"}]})
    _, _, view = parse_event(doc if rng.random() < 0.5 else _parsed(doc))
    return view


def _parsed(doc: dict[str, Any]) -> NodeResourceTopology | dict[str, Any]:
    try:
        return parse_strict(doc)
    except Exception:
        return doc


def _node(rng: random.Random, name: str) -> NodeInfo:
    alloc = dict.fromkeys(rng.sample(RESOURCES, rng.randint(0, 4)), "8")
    return node_info(node_doc(name, alloc))


def _same(new: ClusterArrays, ref: ReferenceClusterArrays) -> None:
    n = ref.n
    assert (new.n, new.slots, new.capacity, new.index, new.names) == (
        ref.n,
        ref.slots,
        ref.capacity,
        ref.index,
        ref.names,
    )
    sources = [None if s is None else (s.topology, s.node, s.fresh) for s in new.sources]
    assert sources == [None if s is None else (s.topology, s.node, s.fresh) for s in ref.sources]
    assert new.version == ref.version
    assert new.columns == ref.columns
    for key in PER_ROW:
        assert np.array_equal(getattr(new, key)[:n], getattr(ref, key)[:n]), key
    assert np.array_equal(new.stamp[:n], ref.stamp[:n])
    assert np.array_equal(new.pad[:, :n], ref.pad[:, :n])
    assert np.array_equal(new.self_cost[:, :n], ref.self_cost[:, :n])
    assert np.array_equal(new.costs[:n], ref.costs[:n])
    for c in range(len(ref.columns)):
        for key in PER_CELL:
            assert np.array_equal(getattr(new, key)[c][:, :n], getattr(ref, key)[c][:, :n]), key
        assert np.array_equal(new.listed_any[c][:n], ref.listed_any[c][:n])
        assert np.array_equal(new.adv[c][:n], ref.adv[c][:n])
    assert new.index_snapshot() == ref.index_snapshot()


@pytest.mark.parametrize("seed", range(25))
def test_random_updates_give_the_reference_arrays(seed: int) -> None:
    rng = random.Random(seed)
    zones, capacity = rng.choice((1, 2, 8)), rng.choice((1, 4, 256))
    new, ref = ClusterArrays(zones, capacity), ReferenceClusterArrays(zones, capacity)
    nodes: dict[str, NodeInfo] = {}
    views: dict[str, NodeTopology | None] = {}
    flags = (new.flags_version, [new.row_flags(r) for r in range(new.n)])
    for _ in range(120):
        name = f"n{rng.randint(0, 14)}"
        if rng.random() < 0.1:
            new.remove(name)
            ref.remove(name)
        else:
            if name not in nodes or rng.random() < 0.2:
                nodes[name] = _node(rng, name)
            view, fresh = _view(rng, name), rng.random() < 0.9
            last = views.get(name)
            if last is not None and rng.random() < 0.5:  # a reservation charged to the current view
                request = {r: parse_quantity(rng.choice(VALUES)) for r in rng.sample(RESOURCES, 2)}
                view = last.charged([request])
            views[name] = view
            assert new.upsert(name, view, nodes[name], fresh=fresh) == ref.upsert(name, view, nodes[name], fresh=fresh)
        _same(new, ref)
        now = (new.flags_version, [new.row_flags(r) for r in range(new.n)])
        for row in new.index.values():  # the flags upsert remembers are the arrays' own
            assert new._flags[row] == new.row_flags(row)
        if now[0] == flags[0]:  # an unchanged flags version promises unchanged row flags (and rows)
            assert now[1] == flags[1]
        flags = now


@pytest.mark.parametrize("seed", range(10))
def test_node_topology_reads_shared_zone_objects_the_same(seed: int) -> None:
    """Views read zones through the caller's per-Zone memo: objects sharing Zone objects, and fresh
    copies, give equal views with or without it (malformed and ignored zones included)."""
    from dataclasses import replace as dc_replace

    from numaplane.placement.model.view import ZoneMemo, node_topology

    rng = random.Random(seed)
    for i in range(40):
        zones: list[dict[str, Any]] = []
        for z in range(rng.randint(0, 4)):
            res = rng.sample(RESOURCES, rng.randint(0, 3))
            zd = zone(rng.choice((z, z, "x", 70)), {r: rng.choice([*VALUES, "-1"]) for r in res})
            if rng.random() < 0.1:
                zd["type"] = "Socket"
            zones.append(zd)
        obj = parse_strict(nrt_doc(f"n{i}", zones))
        memo: ZoneMemo = {}
        first = node_topology(obj)
        assert node_topology(obj, memo) == first and node_topology(obj, memo) == first
        assert node_topology(parse_strict(obj.to_dict()), memo) == first
        renamed = dc_replace(obj, metadata=dc_replace(obj.metadata, name=f"m{i}"))  # same Zone objects
        assert node_topology(renamed, memo) == dc_replace(first, node=f"m{i}")


class _Counting(ClusterArrays):
    """ClusterArrays counting the upserts applied as charges (``_charge`` answered True)."""

    charges = 0

    def _charge(self, row: int, topology: NodeTopology, node: NodeInfo, fresh: bool) -> bool:
        applied = super()._charge(row, topology, node, fresh)
        self.charges += applied
        return applied


@pytest.mark.parametrize("seed", range(8))
def test_charges_applied_to_a_row_equal_the_charged_view_written_whole(seed: int) -> None:
    """A chain of reservations charged to the view a row holds is applied to the row's cells
    (``_charge``), and the row then holds exactly what writing the last view whole gives; charges
    the cells cannot take exactly (sub-milli, negative) are written whole instead."""
    rng = random.Random(seed)
    whole_values = ["0", "1", "2", "7", "1500m", "1Gi", "3Gi", "1234567"]
    for i in range(12):
        name = f"n{i}"
        zones = [zone(z, {r: rng.choice(whole_values) for r in rng.sample(RESOURCES[:4], 3)}) for z in range(4)]
        _, _, view = parse_event(nrt_doc(name, zones, policy="single-numa-node"))
        node = _node(rng, name)
        charged = _Counting(4, 4)
        charged.upsert(name, view, node)
        leading, inexact = 0, False  # exact charges before the first one that is not
        for _ in range(6):
            request = {
                r: parse_quantity(rng.choice([*whole_values, "1e20", "1n", "-1"])) for r in rng.sample(RESOURCES, 2)
            }
            inexact = inexact or not all(q.amount >= 0 and (q.amount * 1000).denominator == 1 for q in request.values())
            leading += not inexact
            view = view.charged([request])
            assert view.charged_from is not None
            charged.upsert(name, view, node)
        whole = ClusterArrays(4, 4)
        whole.upsert(name, view, node)
        assert charged.charges >= leading  # until a sub-milli charge makes the row irregular, every one applied
        assert charged.sources[0] is not None and charged.sources[0].topology is view
        for key in PER_CELL:
            assert np.array_equal(getattr(charged, key)[:, :, :1], getattr(whole, key)[:, :, :1]), key
        for key in PER_ROW:
            assert np.array_equal(getattr(charged, key)[:1], getattr(whole, key)[:1]), key


def test_views_carry_their_serial_and_what_they_were_charged_from() -> None:
    """Every view has its own serial; ``charged`` records the serial charged and the requests;
    equality ignores both, and ``dataclasses.replace`` makes a view with a new serial, not charged."""
    from dataclasses import replace as dc_replace

    _, _, view = parse_event(nrt_doc("n", [zone(0, {"cpu": "8"})]))
    assert view is not None and view.charged_from is None
    request = {"cpu": parse_quantity("2")}
    charged = view.charged([request])
    assert charged.charged_from == (view.serial, (request,)) and charged.serial != view.serial
    assert charged.zones[0].available["cpu"] == parse_quantity("6")
    copy = dc_replace(charged)
    assert copy == charged and copy.serial not in (charged.serial, view.serial) and copy.charged_from is None
    assert view.charged([]) is view
