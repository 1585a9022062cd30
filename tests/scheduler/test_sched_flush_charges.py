"""The scheduler keeps its flush behaviour now that the over-reserve cache owns it: after every flush, the
pods still charged to a flushed node are exactly those the scheduler state used to charge again itself
(before the rule moved into :mod:`numaplane.placement.caches.overreserve`): every pod its usage holds on the
node that the informer has shown, and that is either assumed (its binding not seen yet) or bound but not
relevant under the informer mode — each at the request of the informer's object."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from sched_helpers import node_doc, nrt_doc, pod_doc, zone_doc

from numaplane.nrt.fingerprint import compute_fingerprint
from numaplane.placement.caches.overreserve import OverReserveCache
from numaplane.placement.model.requests import pod_request
from numaplane.resources.pod import Pod, parse_pod
from numaplane.scheduler.config import SchedulerConfig
from numaplane.scheduler.state import SchedulerState

NODES = ("n1", "n2", "n3")


def _relevant(mode: str, phase: str) -> bool:
    return phase == "Running" if mode == "Shared" else phase != "Pending"


def _expected_charges(state: SchedulerState, node: str) -> dict[str, Any]:
    """The charges the state's former ``_recharge`` left on a flushed node."""
    out: dict[str, Any] = {}
    for key in state.usage.pods(node):
        pod: Pod | None = state.pods.get(key)
        if pod is not None and (
            state.usage.is_assumed(key) or not _relevant(state.config.cache.informer_mode, pod.phase)
        ):
            out[key] = pod_request(pod)
    return out


def _nrt(rng: random.Random, node: str, docs: dict[str, dict[str, Any]], mode: str) -> dict[str, Any]:
    relevant = [
        ("default", d["metadata"]["name"])
        for d in docs.values()
        if d["spec"].get("nodeName") == node and _relevant(mode, d["status"]["phase"])
    ]
    if relevant and rng.random() < 0.3:
        relevant.pop()  # an exporter that has not caught up
    zones = [zone_doc(i, {"cpu": (8, rng.randint(0, 8)), "memory": ("32Gi", "32Gi")}) for i in (0, 1)]
    policy = "single-numa-node" if rng.random() < 0.9 else "restricted"
    return nrt_doc(node, zones, fingerprint=compute_fingerprint(relevant), policy=policy)


@pytest.mark.parametrize("mode", ["Dedicated", "Shared"])
@pytest.mark.parametrize("seed", range(6))
def test_flushed_nodes_stay_charged_as_the_core_used_to_charge_them(mode: str, seed: int) -> None:
    rng = random.Random(seed)
    config = SchedulerConfig().with_overrides(resync_period_seconds=1.0, informer_mode=mode)
    state = SchedulerState(config)
    cache = state.cache
    assert isinstance(cache, OverReserveCache)
    docs: dict[str, dict[str, Any]] = {}  # key → the pod as the informer last showed it
    for n in NODES:
        state.node_upserted(node_doc(n, cpu=16))
        state.nrt_upserted(nrt_doc(n, [zone_doc(i, {"cpu": (8, 8), "memory": ("32Gi", "32Gi")}) for i in (0, 1)]))
    now, flushes, charged = 0.0, 0, 0
    for _ in range(250):
        roll = rng.random()
        name = f"p{rng.randint(0, 11)}"
        key = f"default/{name}"
        node = rng.choice(NODES)
        old = docs.get(key)
        if roll < 0.15:  # created (or recreated under the same name after a missed deletion)
            ours = rng.random() < 0.8
            doc = pod_doc(name, rng.choice((1, 2, 3)), scheduler="numaplane-scheduler" if ours else "other")
            doc["status"] = {"phase": "Pending"}
            state.pod_upserted(old if rng.random() < 0.8 else None, doc)
            docs[key] = doc
        elif roll < 0.30 and old is not None and not old["spec"].get("nodeName"):
            state.assume(parse_pod(old), node)
        elif roll < 0.34 and old is not None and state.usage.is_assumed(key):  # the binding failed
            state.forget(parse_pod(old), state.usage.node_of(key) or node)
        elif roll < 0.50 and old is not None:  # bound (where assumed, or by someone else), phase changes
            doc = copy.deepcopy(old)
            doc["spec"]["nodeName"] = doc["spec"].get("nodeName") or state.usage.node_of(key) or node
            doc["status"] = {"phase": rng.choice(("Pending", "Running", "Running", "", "Succeeded", "Failed"))}
            state.pod_upserted(old, doc)
            docs[key] = doc
        elif roll < 0.55 and old is not None:
            state.pod_deleted(docs.pop(key))
        elif roll < 0.62:  # a foreign pod, bound at first sight
            doc = pod_doc(f"f{rng.randint(0, 4)}", rng.choice((1, 2)), scheduler="default-scheduler")
            doc["spec"]["nodeName"] = node
            doc["status"] = {"phase": rng.choice(("Pending", "Running"))}
            fkey = f"default/{doc['metadata']['name']}"
            state.pod_upserted(docs.get(fkey), doc)
            docs[fkey] = doc
        elif roll < 0.75:
            state.nrt_upserted(_nrt(rng, node, docs, mode))
        elif roll < 0.88:
            state.evaluate(parse_pod(pod_doc("probe", rng.choice((2, 4, 6, 8)))))  # rejections mark nodes
        else:
            now += rng.choice((0.5, 1.0, 2.0))
            for flushed in state.tick(now):
                flushes += 1
                expected = _expected_charges(state, flushed)
                assert cache.assumed(flushed) == expected, flushed
                charged += len(expected)
    assert flushes and charged  # the streams do exercise the rule
