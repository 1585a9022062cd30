"""Properties of the Topology Manager merge: equal to the kubelet's literal permutation fold, order
independent, single-numa-node never admits a multi-node hint; the set algebra behind it."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numaplane.policy.hint_merge import ProviderHints, filter_providers_hints
from numaplane.policy.hints import NUMAMask, TopologyHint, achievable_ands
from numaplane.policy.topology_manager import POLICY_SINGLE_NUMA_NODE, TopologyManager

POLICIES = ["best-effort", "restricted", "single-numa-node"]


@st.composite
def machines(draw: st.DrawFn) -> tuple[list[int], dict[int, dict[int, int]]]:
    n = draw(st.integers(1, 5))
    if draw(st.booleans()):
        nodes = sorted(draw(st.sets(st.integers(0, 300), min_size=n, max_size=n)))
    else:
        nodes = list(range(n))
    dist = {i: {j: 10 if i == j else draw(st.sampled_from([11, 12, 20, 21, 30])) for j in nodes} for i in nodes}
    return nodes, dist


def hint_lists(nodes: list[int]) -> st.SearchStrategy[list[TopologyHint] | None]:
    masks = st.one_of(
        st.none(),
        st.lists(st.sampled_from([*nodes, 999]), max_size=len(nodes) + 1).map(NUMAMask.from_ids),
    )
    hint = st.builds(TopologyHint, masks, st.booleans())
    return st.one_of(st.none(), st.lists(hint, max_size=6))


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[TopologyManager, list[ProviderHints]]:
    nodes, dist = draw(machines())
    policy = draw(st.sampled_from(POLICIES))
    options = {"prefer-closest-numa-nodes": "true"} if draw(st.booleans()) else {}
    tm = TopologyManager(policy, "container", options, nodes, dist)
    providers: list[ProviderHints] = []
    for p in range(draw(st.integers(0, 3))):
        if draw(st.integers(0, 9)) == 0:
            providers.append(draw(st.sampled_from([None, {}])))
            continue
        names = draw(st.integers(1, 2))
        providers.append({f"p{p}r{r}": draw(hint_lists(nodes)) for r in range(names)})
    return tm, providers


def reference(tm: TopologyManager, providers: list[ProviderHints]) -> TopologyHint:
    lists = filter_providers_hints(providers)
    if tm.policy == POLICY_SINGLE_NUMA_NODE:
        lists = [[h for h in hs if h.preferred and (h.numa is None or h.numa.count() == 1)] for hs in lists]
    best = tm.merger.merge_exhaustive(lists)
    if tm.policy == POLICY_SINGLE_NUMA_NODE and best.numa is not None and best.numa == tm.default_affinity:
        return TopologyHint(None, best.preferred)
    return best


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_fast_merge_equals_kubelet_permutation_fold(scenario: tuple[TopologyManager, list[ProviderHints]]) -> None:
    tm, providers = scenario
    assert tm.merge(providers)[0] == reference(tm, providers)


@settings(max_examples=300, deadline=None)
@given(scenarios(), st.randoms(use_true_random=False))
def test_merge_is_independent_of_provider_and_resource_order(
    scenario: tuple[TopologyManager, list[ProviderHints]], rnd: random.Random
) -> None:
    tm, providers = scenario
    shuffled: list[ProviderHints] = []
    for p in providers:
        if p:
            items = list(p.items())
            rnd.shuffle(items)
            p = {k: None if v is None else rnd.sample(list(v), len(v)) for k, v in items}
        shuffled.append(p)
    rnd.shuffle(shuffled)
    assert tm.merge(shuffled) == tm.merge(providers)


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_single_numa_node_never_admits_a_multi_node_hint(scenario: tuple[TopologyManager, list[ProviderHints]]) -> None:
    tm, providers = scenario
    single = TopologyManager("single-numa-node", "container", {}, tm.numa_nodes)
    hint, admit = single.merge(providers)
    if admit:
        assert hint.preferred
        assert hint.numa is None or hint.numa.count() == 1


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 6).flatmap(
        lambda n: st.tuples(
            st.just((1 << n) - 1),
            st.lists(st.sets(st.integers(0, (1 << (n + 1)) - 1), min_size=1, max_size=40), max_size=6),
        )
    )
)
def test_achievable_ands_equals_pairwise_products(case: tuple[int, list[set[int]]]) -> None:
    universe, sets = case
    expected = {universe}
    for masks in sets:
        expected = {r & m for r in expected for m in masks}
    from numaplane.policy.hints import _achievable_by_transform

    assert achievable_ands(universe, sets) == expected
    assert _achievable_by_transform(universe, {universe}, sets) == expected


def test_large_lists_on_eight_nodes_match_the_fold_on_sampled_lists() -> None:
    """Worst-case sizes (255 masks per list) go through the transform; check against pairwise sets."""
    from numaplane.policy.hints import all_masks

    nodes = tuple(range(8))
    masks = all_masks(nodes)
    rnd = random.Random(5)
    tm = TopologyManager("best-effort", "container", {}, nodes)
    for _ in range(20):
        providers: list[ProviderHints] = [
            {f"r{i}": [TopologyHint(m, rnd.random() < 0.05) for m in masks if rnd.random() < 0.9]} for i in range(4)
        ]
        lists = filter_providers_hints(providers)
        sets = [{h.numa.bits for h in hs if h.numa is not None} for hs in lists]
        expected = {255}
        for s in sets:
            expected = {r & m for r in expected for m in s}
        assert achievable_ands(255, sets) == expected
        hint, admit = tm.merge(providers)
        assert admit
        assert hint.numa is not None and hint.numa.bits in expected | {255}
