"""The vectorised pipeline gives exactly the per-node filter and score results, on random clusters."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from place_helpers import container, gu_pod, node_doc, nrt, pod_or_refusal, unchecked_pod, zone

from numaplane.placement.arrays.kernels import unit_score
from numaplane.placement.arrays.pipeline import Pipeline
from numaplane.placement.caches.cache import OverReserveCache, OverReserveConfig
from numaplane.placement.explain.filter import FilterOptions
from numaplane.placement.explain.filter import filter as filter_node
from numaplane.placement.explain.score import score
from numaplane.placement.model.result import Fit
from numaplane.placement.model.strategies import STRATEGY_TYPES, ScoringStrategy
from numaplane.resources.errors import PodSpecError, ResourceError
from numaplane.resources.pod import Pod, parse_pod

RESOURCES = ["cpu", "memory", "hugepages-2Mi", "vendor/nic", "gpu", "example.com/dev", "ephemeral-storage"]
QUANTITIES = ["0", "1", "2", "3", "4", "6", "8", "500m", "1500m", "1Gi", "2Gi", "512Mi", "3Gi", "1"]
ZONE_NAMES = st.sampled_from(["node-0", "node-1", "node-2", "node-3", "node-4", "node-5", "node-7"])
EXOTIC = ["1n", "-1", "1e20"]

quantity = st.one_of(st.sampled_from(QUANTITIES), st.sampled_from(EXOTIC).filter(lambda _: True)).map(str)
small_quantity = st.sampled_from(QUANTITIES)


@st.composite
def zones(draw: st.DrawFn) -> list[dict[str, Any]]:
    count = draw(st.integers(0, 5))
    mode = draw(st.sampled_from(["ordered", "shuffled", "random"]))
    if mode == "random":
        names = [draw(ZONE_NAMES) for _ in range(count)]  # may repeat
    else:
        names = [f"node-{i}" for i in range(count)]
        if mode == "shuffled":
            names = draw(st.permutations(names))
    out = []
    for name in names:
        res = draw(st.lists(st.sampled_from(RESOURCES), unique=True, max_size=5))
        values = {
            r: draw(st.one_of(small_quantity, small_quantity, small_quantity, st.sampled_from(EXOTIC))) for r in res
        }
        z = zone(name, values)
        if draw(st.booleans()):
            z["costs"] = [
                {"name": f"node-{j}", "value": draw(st.sampled_from([10, 11, 12, 20, 21, 32]))} for j in range(6)
            ]
        if draw(st.integers(0, 15)) == 0:
            z["type"] = "Socket"
        if draw(st.integers(0, 15)) == 0:
            z["name"] = "numa-" + name
        out.append(z)
    return out


@st.composite
def node_entry(draw: st.DrawFn, name: str) -> tuple[dict[str, Any] | None, dict[str, Any], bool]:
    alloc = dict.fromkeys(draw(st.lists(st.sampled_from(RESOURCES), unique=True)), "8")
    alloc.update({"cpu": "64", "memory": "64Gi"})
    node = node_doc(name, alloc)
    fresh = draw(st.integers(0, 9)) > 0
    kind = draw(st.integers(0, 19))
    if kind == 0:
        return None, node, fresh
    attrs: dict[str, str] = {}
    policy = draw(st.sampled_from(["single-numa-node"] * 4 + ["restricted", "best-effort", "none"]))
    scope = draw(st.sampled_from(["container", "pod"]))
    if draw(st.booleans()):
        legacy = [{"pod": "SingleNUMANodePodLevel", "container": "SingleNUMANodeContainerLevel"}[scope]]
        if policy != "single-numa-node":
            attrs["topologyManagerPolicy"] = policy
    else:
        legacy = []
        attrs["topologyManagerPolicy"] = policy
        attrs["topologyManagerScope"] = scope
    max_numa = draw(st.sampled_from([None, "2", "4", "16"]))
    if max_numa:
        attrs["topologyManagerMaxNUMANodes"] = max_numa
    doc: dict[str, Any] = {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": name},
        "topologyPolicies": legacy,
        "attributes": [{"name": k, "value": v} for k, v in attrs.items()],
        "zones": draw(zones()),
    }
    if kind == 1:
        doc["zones"].append(
            {
                "name": "node-9",
                "type": "Node",
                "resources": [{"name": "cpu", "capacity": "x", "allocatable": "1", "available": "1"}],
            }
        )
    return doc, node, fresh


@st.composite
def pods(draw: st.DrawFn) -> Pod:
    def requests(limit: int) -> dict[str, str]:
        names = draw(st.lists(st.sampled_from(RESOURCES), unique=True, max_size=limit))
        return {
            n: draw(
                st.one_of(small_quantity, small_quantity, small_quantity, small_quantity, st.sampled_from(EXOTIC[:1]))
            )
            for n in names
        }

    guaranteed = draw(st.booleans())

    def ctr(name: str, **extra: Any) -> dict[str, Any]:
        reqs = requests(4)
        if guaranteed:
            reqs.setdefault("cpu", draw(st.sampled_from(["1", "2", "3", "500m"])))
            reqs.setdefault("memory", draw(st.sampled_from(["512Mi", "1Gi"])))
            for key in ("cpu", "memory"):
                if reqs[key] == "0":
                    reqs[key] = "1"
            return {"name": name, "resources": {"requests": reqs, "limits": dict(reqs)}, **extra}
        return {"name": name, "resources": {"requests": reqs}, **extra}

    apps = [ctr(f"app{i}") for i in range(draw(st.integers(1, 3)))]
    inits = [
        ctr(f"init{i}", **({"restartPolicy": "Always"} if draw(st.booleans()) else {}))
        for i in range(draw(st.integers(0, 2)))
    ]
    spec: dict[str, Any] = {"containers": apps, "initContainers": inits}
    if draw(st.integers(0, 5)) == 0:
        spec["overhead"] = {"cpu": "250m", "memory": "64Mi"}
    return parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}, "spec": spec})


@st.composite
def strategies(draw: st.DrawFn) -> ScoringStrategy:
    kind = draw(st.sampled_from(STRATEGY_TYPES))
    weights = {r: draw(st.integers(0, 3)) for r in draw(st.lists(st.sampled_from(RESOURCES), unique=True, max_size=3))}
    return ScoringStrategy(kind, weights)


@st.composite
def clusters(draw: st.DrawFn) -> list[tuple[str, dict[str, Any] | None, dict[str, Any], bool]]:
    count = draw(st.integers(1, 10))
    return [(f"n{i}", *draw(node_entry(f"n{i}"))) for i in range(count)]


def check(pipe: Pipeline, pod: Pod, entries: Mapping[str, tuple[Any, dict[str, Any], bool]]) -> None:
    result = pipe.evaluate(pod)
    for name, (doc, node, fresh) in entries.items():
        want_fit = isinstance(filter_node(pod, doc, node, fresh=fresh, options=pipe.options), Fit)
        want_score = score(pod, doc, node, pipe.strategy, fresh=fresh)
        assert result.result(name) == (want_fit, want_score), (name, doc, node, fresh)
    # filtering a window of rows gives those rows' verdicts
    n = pipe.cluster.n
    for lo, hi in ((0, n), (1, n), (0, n // 2), (n // 3, n - 1), (n, n)):
        assert pipe.feasible(pod, slice(lo, hi)).tolist() == pipe.feasible(pod)[lo:hi].tolist()
    # scoring a subset of rows, in any order, gives those rows' scores
    rows = np.array(sorted(result.index.values()), dtype=np.int64)
    for subset in (rows[::2], rows[::-1], rows[1::3][::-1], rows[:0]):
        assert pipe.scores(pod, subset).tolist() == result.scores[subset].tolist()
    # the unit-score kernel on gathered rows (a search's few rows) equals it on every row
    for c in pod.all_containers():
        values = [(name, q.value(), q.amount * 1000) for name, q in sorted(c.requests.items())]
        if any(milli.denominator != 1 or not 0 <= milli < 1 << 59 for _, _, milli in values):
            continue  # exotic requests take the per-node path
        exact = [(name, value, int(milli)) for name, value, milli in values]
        every = unit_score(pipe.cluster, exact, pipe.strategy)
        for subset in (rows, rows[::2], rows[::-1], rows[1::3][::-1], rows[:0]):
            assert unit_score(pipe.cluster, exact, pipe.strategy, subset).tolist() == every[subset].tolist()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cluster=clusters(), pod=pods(), strategy=strategies(), kubelet=st.booleans(), zones_hint=st.sampled_from([1, 2, 8])
)
def test_pipeline_equals_per_node_functions(
    cluster: list[tuple[str, dict[str, Any] | None, dict[str, Any], bool]],
    pod: Pod,
    strategy: ScoringStrategy,
    kubelet: bool,
    zones_hint: int,
) -> None:
    pipe = Pipeline(strategy, FilterOptions(kubelet_admission=kubelet), zones=zones_hint)
    entries = {}
    for name, doc, node, fresh in cluster:
        pipe.update_node(name, doc, node, fresh=fresh)
        entries[name] = (doc, node, fresh)
    check(pipe, pod, entries)
    # incremental updates: rewrite some rows, drop one, evaluate again
    for name, doc, node, fresh in cluster[::2]:
        pipe.update_node(name, None if doc is None else doc, node, fresh=not fresh)
        entries[name] = (doc, node, not fresh)
    gone = cluster[-1][0]
    pipe.remove_node(gone)
    del entries[gone]
    check(pipe, pod, entries)
    assert gone not in pipe.evaluate(pod).feasible_nodes()


def test_ranking_and_sync_from_cache_follow_reservations() -> None:
    topos = [
        nrt(f"n{i}", [zone(0, {"cpu": 4 + i, "memory": "8Gi"}), zone(1, {"cpu": 4, "memory": "8Gi"})]) for i in range(3)
    ]
    nodes = {f"n{i}": node_doc(f"n{i}") for i in range(3)}
    cache = OverReserveCache(OverReserveConfig(), topos)
    pipe = Pipeline(ScoringStrategy("MostAllocated"))
    assert pipe.sync_from_cache(cache, nodes) == 3
    p = gu_pod("a", cpu=4, memory="1Gi")
    # MostAllocated: zone 1 (4 cpus) is fully used by a 4-cpu pod on every node → all nodes tie on cpu
    ranking = pipe.evaluate(p).ranking()
    assert [n for n, _ in ranking] == ["n0", "n1", "n2"]
    cache.reserve("n0", p)
    assert pipe.sync_from_cache(cache, nodes) == 1
    result = pipe.evaluate(gu_pod("b", cpu=4, memory="1Gi"))
    assert result.feasible_nodes() == ["n1", "n2"]
    for name, node in nodes.items():
        cached = cache.get(name)
        assert result.result(name)[0] == isinstance(
            filter_node(gu_pod("b", cpu=4, memory="1Gi"), cached.topology, node), Fit
        )
    verdict = pipe.explain(gu_pod("b", cpu=4, memory="1Gi"), "n0")
    assert not verdict.fit and "node-0: cpu 4 requested, 0 available" in verdict.explain()


def test_large_cluster_matches_loop() -> None:
    import random

    rng = random.Random(7)
    pipe = Pipeline(ScoringStrategy("LeastAllocated"))
    entries = {}
    for i in range(300):
        zs = [
            zone(
                z,
                {
                    "cpu": rng.choice([2, 4, 8, 16]),
                    "memory": f"{rng.choice([4, 8, 16])}Gi",
                    "vendor/nic": rng.choice([0, 1, 2]),
                },
            )
            for z in range(8)
        ]
        doc = nrt(f"n{i}", zs, scope=rng.choice(["pod", "container"])).to_dict()
        node = node_doc(f"n{i}", {"cpu": "128", "memory": "256Gi", "vendor/nic": "8"})
        pipe.update_node(f"n{i}", doc, node)
        entries[f"n{i}"] = (doc, node, True)
    p = parse_pod(
        {
            "metadata": {"name": "x"},
            "spec": {
                "containers": [
                    container("a", {"cpu": 3, "memory": "2Gi", "vendor/nic": 1}),
                    container("b", {"cpu": 5, "memory": "2Gi"}),
                ]
            },
        }
    )
    for kind in STRATEGY_TYPES:
        pipe.strategy = ScoringStrategy(kind)
        check(pipe, p, entries)


def test_more_than_16_zones_uses_per_node_least_numa() -> None:
    zs = [zone(z, {"cpu": 1, "memory": "1Gi"}) for z in range(17)]
    doc = nrt("big", zs, policy="none").to_dict()
    node = node_doc("big")
    pipe = Pipeline(ScoringStrategy("LeastNUMANodes"))
    pipe.update_node("big", doc, node)
    assert pipe.cluster.slots == 17
    p = gu_pod("p", cpu=3, memory="1Gi")
    assert pipe.evaluate(p).result("big") == (True, score(p, doc, node, pipe.strategy))


def test_multi_zone_least_numa_accounting_matches() -> None:
    costs = {i: {j: 10 if i == j else 20 for j in range(4)} for i in range(4)}
    zs = [zone(z, {"cpu": 2, "memory": "2Gi", "vendor/nic": 1}, costs=costs[z]) for z in range(4)]
    doc = nrt("n", zs, policy="none").to_dict()
    node = node_doc("n", {"cpu": "8", "memory": "8Gi", "vendor/nic": "4"})
    pipe = Pipeline(ScoringStrategy("LeastNUMANodes"))
    pipe.update_node("n", doc, node)
    p = parse_pod(
        {
            "metadata": {"name": "x"},
            "spec": {
                "containers": [
                    container("a", {"cpu": 3, "memory": "1Gi", "vendor/nic": 2}),
                    container("b", {"cpu": 3, "memory": "1Gi"}),
                    container("c", {"cpu": 2, "memory": "1Gi"}),
                ]
            },
        }
    )
    want = score(p, doc, node, pipe.strategy)
    assert pipe.evaluate(p).result("n") == (True, want)
    # a takes node-0/node-1 (2 cpus + 1, both nics), b then needs node-1 + node-2, c fits node-3:
    # at most 2 zones, every choice distance-optimal → 100 - 2 * 12 + 6
    assert want == 82


def test_results_follow_single_row_updates() -> None:
    """A stream of one-row updates (new data, reservations rewriting values in place, removals,
    re-adds) between evaluations of a few recurring pods always gives the per-node functions'
    results."""
    import random

    from numaplane.placement.model.view import NodeTopology, node_topology
    from numaplane.resources.quantity import parse_quantity

    rng = random.Random(11)

    def doc(name: str) -> NodeTopology:
        zs = [
            zone(z, {"cpu": rng.choice([0, 1, 2, 4, 8]), "memory": f"{rng.choice([1, 2, 4])}Gi", "vendor/nic": 1})
            for z in range(rng.choice([1, 2, 4]))
        ]
        return node_topology(nrt(name, zs, scope=rng.choice(["pod", "container"])))

    pods = [
        gu_pod("g1", cpu=1, memory="1Gi"),
        gu_pod("g2", cpu=2, memory="2Gi"),
        parse_pod({"metadata": {"name": "b"}, "spec": {"containers": [container("c", {"cpu": 1}, guaranteed=False)]}}),
        parse_pod({"metadata": {"name": "n"}, "spec": {"containers": [container("c", {"vendor/nic": 1, "cpu": 1})]}}),
        parse_pod(
            {
                "metadata": {"name": "i"},
                "spec": {
                    "initContainers": [container("i", {"cpu": 4, "memory": "1Gi"})],
                    "containers": [container("c", {"cpu": 1, "memory": "1Gi"})],
                },
            }
        ),
    ]
    for kind in STRATEGY_TYPES:
        pipe = Pipeline(ScoringStrategy(kind), zones=2)
        entries: dict[str, tuple[Any, dict[str, Any], bool]] = {}
        for i in range(60):
            name = f"n{i}"
            entries[name] = (doc(name), node_doc(name, {"cpu": "64", "memory": "64Gi", "vendor/nic": "4"}), True)
            pipe.update_node(name, *entries[name][:2])
        for step in range(120):
            for _ in range(rng.randint(0, 3)):
                name = f"n{rng.randrange(60)}"
                roll = rng.random()
                if roll < 0.1 and name in entries:
                    pipe.remove_node(name)
                    del entries[name]
                    continue
                if roll < 0.5 and name in entries:  # a reservation: same layout, new values
                    charged = entries[name][0].charged([{"cpu": parse_quantity("1"), "memory": parse_quantity("1Gi")}])
                    entries[name] = (charged, entries[name][1], True)
                else:
                    entries[name] = (
                        doc(name),
                        node_doc(name, {"cpu": "64", "memory": "64Gi", "vendor/nic": "4"}),
                        True,
                    )
                pipe.update_node(name, *entries[name][:2])
            check(pipe, pods[step % len(pods)], entries)


# Extreme request quantities: negative, huge (up to the parser's exponent limit), sub-milli, near the
# int64 / 2**59-thousandths bounds. None may raise; the pipeline must equal the per-node functions.
# parse_pod refuses negative ones (as the API server does): those pods are built with the dataclasses
# (``unchecked_pod``), after checking that parse_pod refuses the document naming the field.
EXTREME = [
    "-9E",
    "9E",
    "-1",
    "-1n",
    "-1Gi",
    "1n",
    "0.5m",
    "1e-1000",
    "1e300",
    "-1e300",
    "1e1000",
    "-1e1000",
    "8Ei",
    "576460752303423",  # just below 2**59 thousandths
    "576460752303424",  # just above
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "300T",
]
extreme_quantity = st.one_of(
    st.sampled_from(EXTREME),
    st.integers(-(2**70), 2**70).map(str),
    st.builds(lambda m, e: f"{m}e{e}", st.integers(-99, 99), st.integers(-1000, 1000)),
)


@st.composite
def extreme_pods(draw: st.DrawFn) -> Pod:
    def requests() -> dict[str, str]:
        names = draw(st.lists(st.sampled_from(RESOURCES), unique=True, min_size=1, max_size=4))
        return {n: draw(st.one_of(small_quantity, extreme_quantity)) for n in names}

    guaranteed = draw(st.booleans())

    def ctr(name: str, **extra: Any) -> dict[str, Any]:
        reqs = requests()
        if guaranteed:
            reqs.setdefault("cpu", draw(st.one_of(st.sampled_from(["1", "2"]), extreme_quantity)))
            reqs.setdefault("memory", draw(st.one_of(st.sampled_from(["1Gi"]), extreme_quantity)))
            return {"name": name, "resources": {"requests": reqs, "limits": dict(reqs)}, **extra}
        return {"name": name, "resources": {"requests": reqs}, **extra}

    apps = [ctr(f"app{i}") for i in range(draw(st.integers(1, 3)))]
    inits = [
        ctr(f"init{i}", **({"restartPolicy": "Always"} if draw(st.booleans()) else {}))
        for i in range(draw(st.integers(0, 2)))
    ]
    spec: dict[str, Any] = {"containers": apps, "initContainers": inits}
    if draw(st.booleans()):
        names = draw(st.lists(st.sampled_from(RESOURCES), unique=True, min_size=1, max_size=3))
        spec["overhead"] = {n: draw(extreme_quantity) for n in names}
    doc = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}, "spec": spec}
    try:
        return pod_or_refusal(doc)
    except ResourceError:  # PodSpecError / QuantityError: a malformed document is out of scope
        reject()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=clusters(), pod=extreme_pods(), strategy=strategies(), kubelet=st.booleans())
def test_pipeline_equals_per_node_functions_on_extreme_quantities(
    cluster: list[tuple[str, dict[str, Any] | None, dict[str, Any], bool]],
    pod: Pod,
    strategy: ScoringStrategy,
    kubelet: bool,
) -> None:
    pipe = Pipeline(strategy, FilterOptions(kubelet_admission=kubelet), zones=2)
    entries = {}
    for name, doc, node, fresh in cluster:
        pipe.update_node(name, doc, node, fresh=fresh)
        entries[name] = (doc, node, fresh)
    check(pipe, pod, entries)  # includes feasible(pod, slice(lo, hi)) and scores(pod, subset)
    assert all(0 <= s <= 100 for s in pipe.evaluate(pod).scores.tolist())


@pytest.mark.parametrize("kind", STRATEGY_TYPES)
@pytest.mark.parametrize("value", ["-9E", "9E", "1e1000", "-1e1000", "-1", "1n", "576460752303424"])
def test_reported_absurd_quantities_do_not_raise(kind: str, value: str) -> None:
    """Regression: cpu ``-9E`` (and friends) raised OverflowError in the vectorised path. parse_pod
    refuses the negative ones (checked); the pipeline must still cope with such Pod objects."""
    zs = [zone(z, {"cpu": 4, "memory": "8Gi"}) for z in range(2)]
    entries: dict[str, tuple[Any, dict[str, Any], bool]] = {}
    pipe = Pipeline(ScoringStrategy(kind))  # type: ignore[arg-type]
    for scope in ("pod", "container"):
        doc, node = nrt(scope, zs, scope=scope).to_dict(), node_doc(scope)
        pipe.update_node(scope, doc, node)
        entries[scope] = (doc, node, True)
    for where in ("requests", "overhead"):
        spec: dict[str, Any] = {"containers": [container("a", {"cpu": value, "memory": "1Gi"})]}
        if where == "overhead":
            spec = {"containers": [container("a", {"cpu": 1, "memory": "1Gi"})], "overhead": {"cpu": value}}
        check(pipe, pod_or_refusal({"metadata": {"name": "p"}, "spec": spec}), entries)


def test_negative_requests_reach_the_pipeline_only_through_the_dataclasses() -> None:
    doc = {"metadata": {"name": "p"}, "spec": {"containers": [container("a", {"cpu": "-1", "memory": "1Gi"})]}}
    with pytest.raises(PodSpecError) as info:
        parse_pod(doc)
    assert info.value.path == "spec.containers[0].resources.requests.cpu"
    pod = unchecked_pod(doc)
    assert pod.containers[0].requests["cpu"].amount == -1 and pod.qos_class == "Guaranteed"
    pipe = Pipeline(ScoringStrategy("LeastAllocated"))
    zs = [zone(z, {"cpu": 4, "memory": "8Gi"}) for z in range(2)]
    doc_n, node = nrt("n", zs, scope="container").to_dict(), node_doc("n")
    pipe.update_node("n", doc_n, node)
    check(pipe, pod, {"n": (doc_n, node, True)})
