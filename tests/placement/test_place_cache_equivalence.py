"""The over-reserve cache's bookkeeping (memoised charged views, pods indexed by node, quiet no-op
flushes) changes no answer: random event streams give the same results as the verbatim reference
(:mod:`reference_overreserve`), and ``drain_changed`` still names every node whose answer changed."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest
from place_helpers import container, nrt_doc, pod, zone
from reference_overreserve import ReferenceOverReserveCache

from numaplane.nrt.fingerprint import compute_fingerprint
from numaplane.nrt.model import NodeResourceTopology
from numaplane.nrt.parse import parse_strict
from numaplane.placement.caches.cachebase import CachedTopology
from numaplane.placement.caches.overreserve import OverReserveCache, OverReserveConfig
from numaplane.resources.pod import Pod

NODES = ("n1", "n2", "n3")
BASE = OverReserveConfig(resync_period_seconds=5)
CONFIGS = [
    BASE,
    replace(BASE, foreign_pods_detect="OnlyExclusiveResources", resync_method="OnlyExclusiveResources"),
    replace(BASE, foreign_pods_detect="None", informer_mode="Shared", keep_late_reservations=False),
    replace(BASE, adopt_new_nrts=False, resync_scope="OnlyResources"),
    replace(BASE, keep_late_reservations=False, recharge_uncovered=False),  # upstream's flush
    replace(BASE, match_without_terminal_pods=False),
]


def _pod(rng: random.Random, name: str, node: str = "", phase: str = "") -> Pod:
    reqs: dict[str, Any] = {"cpu": rng.choice((1, 2, 3, "500m")), "memory": rng.choice(("1Gi", "2Gi"))}
    if rng.random() < 0.2:
        reqs["vendor/nic"] = 1
    guaranteed = rng.random() < 0.7 and reqs["cpu"] != "500m"
    scheduler = "topo-aware-scheduler" if rng.random() < 0.85 else "default-scheduler"
    return pod(name, [container("c", reqs, guaranteed=guaranteed)], node=node, phase=phase, scheduler=scheduler)


def _nrt(rng: random.Random, node: str, bound: list[Pod]) -> NodeResourceTopology | dict[str, Any]:
    zones = [zone(i, {"cpu": rng.randint(0, 8), "memory": f"{rng.randint(1, 8)}Gi", "vendor/nic": 2}) for i in (0, 1)]
    attrs: dict[str, str] = {}
    roll = rng.random()
    if rng.random() < 0.3:  # an exporter that drops terminal pods
        bound = [p for p in bound if p.phase not in ("Succeeded", "Failed")]
    pods = [(p.namespace, p.name) for p in bound if rng.random() < 0.9 or roll < 0.6]
    annotations = None
    if roll < 0.7:
        attrs["nodeTopologyPodsFingerprint"] = compute_fingerprint(pods)
        if rng.random() < 0.3:
            attrs["nodeTopologyPodsFingerprintMethod"] = "with-exclusive-resources"
    elif roll < 0.8:
        annotations = {"topology.node.k8s.io/fingerprint": compute_fingerprint(pods)}
    policy = "single-numa-node" if rng.random() < 0.9 else "restricted"
    doc = nrt_doc(node, zones, policy=policy, attributes=attrs, annotations=annotations)
    if rng.random() < 0.05:
        doc["zones"][0]["resources"][0]["available"] = "4 cores"  # malformed: stays a dict event
        return doc
    return parse_strict(doc) if rng.random() < 0.8 else doc


def _same(a: CachedTopology, b: CachedTopology) -> None:
    assert (a.topology, a.fresh, a.generation) == (b.topology, b.fresh, b.generation)


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("seed", range(12))
def test_random_event_streams_match_the_reference(config: OverReserveConfig, seed: int) -> None:
    rng = random.Random(seed)
    bound: dict[str, Pod] = {}  # key → pod the informer last saw
    initial = [_nrt(rng, n, []) for n in NODES[:2]]
    new, ref = OverReserveCache(config, initial), ReferenceOverReserveCache(config, initial)
    seen = {n: new.get(n) for n in NODES}  # answers at the last drain
    now = 0.0
    for _ in range(400):
        roll = rng.random()
        node = rng.choice(NODES)
        name = f"p{rng.randint(0, 11)}"
        if roll < 0.15:
            on_node = [p for p in bound.values() if p.node_name == node]
            event = _nrt(rng, node, on_node)
            new.nrt_updated(event)
            ref.nrt_updated(event)
        elif roll < 0.35:
            p = _pod(rng, name)
            new.reserve(node, p)
            ref.reserve(node, p)
        elif roll < 0.42:
            p = _pod(rng, name)
            new.unreserve(node, p)
            ref.unreserve(node, p)
        elif roll < 0.62:
            p = _pod(
                rng,
                name,
                node=node if rng.random() < 0.9 else "",
                phase=rng.choice(("Running", "Pending", "", "Succeeded", "Failed")),
            )
            bound[p.key] = p
            new.pod_updated(p)
            ref.pod_updated(p)
        elif roll < 0.68:
            known = bound.pop(f"default/{name}", None)
            p = known if known is not None else _pod(rng, name, node=node)
            new.pod_deleted(p)
            ref.pod_deleted(p)
        elif roll < 0.8:
            p = _pod(rng, name)
            new.node_maybe_overreserved(node, p)
            ref.node_maybe_overreserved(node, p)
        elif roll < 0.9:
            now += rng.choice((1.0, 5.0, 6.0))
            a, b = new.tick(now), ref.tick(now)
            assert (a is None) == (b is None)
            if a is not None and b is not None:
                assert (a.flushed, dict(a.skipped), a.generation) == (b.flushed, dict(b.skipped), b.generation)
        elif roll < 0.95:
            plan_a, plan_b = new.resync_begin(), ref.resync_begin()
            assert (plan_a is None) == (plan_b is None)
            if plan_a is not None and plan_b is not None:
                assert (plan_a.seq, plan_a.candidates, plan_a.config_changed) == (
                    plan_b.seq,
                    plan_b.candidates,
                    plan_b.config_changed,
                )
                assert dict(plan_a.fetched) == dict(plan_b.fetched)
                assert dict(plan_a.pods) == dict(plan_b.pods)  # same pods in the same order
                late = _pod(rng, name)
                new.reserve(node, late)  # a Reserve landing mid-resync
                ref.reserve(node, late)
                a = new.resync_commit(plan_a)
                b = ref.resync_commit(plan_b)
                assert (a.flushed, dict(a.skipped), a.generation) == (b.flushed, dict(b.skipped), b.generation)
        elif roll < 0.97:
            new.node_deleted(node)
            ref.node_deleted(node)
        else:
            drained, ref_drained = new.drain_changed(), ref.drain_changed()
            assert drained <= ref_drained
            for n in NODES:
                now_seen = new.get(n)
                if (now_seen.topology, now_seen.fresh) != (seen[n].topology, seen[n].fresh):
                    assert n in drained, n
                seen[n] = now_seen
        for n in NODES:
            _same(new.get(n), ref.get(n))
            assert new.assumed(n) == ref.assumed(n)
            assert new.dirty(n) == ref.dirty(n)
        assert new.generation == ref.generation
