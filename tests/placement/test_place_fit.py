"""FitArrays gives, for every node at once, exactly the resource verdict of ``fits_node``
(``resource_reasons`` empty or not) and the score of ``default_score``: for random allocatable maps,
pods and usage, through nodes added, changed and removed at run time (rows reused), with whole,
milli, sub-milli, negative and huge quantities. Also the exact shortcut the scheduler takes for the
node-level predicates (``has_node_constraints`` / ``is_restricted``)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from place_helpers import pod_or_refusal

from numaplane.placement.arrays.fit import FitArrays
from numaplane.placement.explain.predicates import (
    BasicNode,
    default_score,
    fits_node,
    has_node_constraints,
    is_restricted,
    node_reasons,
    parse_node,
    resource_reasons,
)
from numaplane.resources.pod import Pod, add_resources, parse_pod
from numaplane.resources.quantity import Quantity, parse_quantity

RESOURCES = ["cpu", "memory", "pods", "ephemeral-storage", "hugepages-1Gi", "example.com/nic", "vendor.io/rare"]

ORDINARY = {  # amounts of one resource in the same range, so that requests and capacities meet
    "cpu": st.one_of(st.integers(0, 16).map(str), st.integers(0, 16_000).map(lambda m: f"{m}m")),
    "memory": st.sampled_from(["0", "200Mi", "512Mi", "1Gi", "1500Mi", "4Gi", "8Gi", "16Gi"]),
    "pods": st.one_of(st.integers(0, 6).map(str), st.sampled_from(["1.5", "2500m"])),
}
OTHER = st.integers(0, 8).map(str)
UNUSUAL = st.one_of(
    st.integers(0, 100).map(lambda m: f"{m}m"),  # small capacities: sub-milli requests change scores
    st.integers(1, 5_000).map(lambda n: f"{n}n"),  # sub-milli
    st.integers(1, 999).map(lambda u: f"{u}u"),
    st.sampled_from(["36T", "70T", "73T", "-70T", "100T", "140T", "4000T", "9P"]),  # about the fast path's bound
    st.sampled_from(["1E", "9E", "100P", "5e20", "0.0005"]),  # huge: beyond the int64 fast path
    st.integers(-8, -1).map(str),  # negative (the API server and parse_pod refuse these; the functions do not)
)


def amounts(resource: str) -> st.SearchStrategy[str]:
    return st.one_of(*[ORDINARY.get(resource, OTHER)] * 4, UNUSUAL)


@st.composite
def allocatables(draw: st.DrawFn) -> dict[str, Quantity]:
    names = draw(st.lists(st.sampled_from(RESOURCES[:-1]), unique=True, max_size=6))
    return {r: parse_quantity(draw(amounts(r))) for r in names}


@st.composite
def request_maps(draw: st.DrawFn) -> dict[str, str]:
    names = draw(st.lists(st.sampled_from(RESOURCES), unique=True, max_size=4))
    return {r: draw(st.sampled_from(["1", "0"]) if r == "pods" else amounts(r)) for r in names}


def make_pod(name: str, requests: dict[str, str]) -> Pod:
    """The pod; with negative requests (which parse_pod refuses, checked) built with the dataclasses."""
    container = {"name": "c", "resources": {"requests": requests}}
    return pod_or_refusal({"metadata": {"name": name}, "spec": {"containers": [container]}})


PODS = request_maps().map(lambda reqs: make_pod("p", reqs))


class Model:
    """The per-node truth: allocatable and the pods charged to each node."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Quantity]] = {}
        self.pods: dict[str, list[Pod]] = {}

    def used(self, name: str) -> dict[str, Quantity]:
        total: dict[str, Quantity] = {}
        for pod in self.pods.get(name, []):
            total = add_resources(total, pod.effective_requests())
        return total

    def check(self, fit: FitArrays, pod: Pod) -> None:
        feasible = fit.feasible(pod)
        scores = fit.scores(pod)
        assert len(feasible) == len(scores) == len(fit.names)
        for row, name in enumerate(fit.names):
            if name is None:
                assert not feasible[row], "a vacant row never fits"
                continue
            assert fit.index[name] == row
            node = BasicNode(name, allocatable=self.nodes[name])
            used, count = self.used(name), len(self.pods.get(name, []))
            want = not resource_reasons(pod, node, used, count)
            assert want == (not fits_node(pod, node, used, count))
            assert bool(feasible[row]) == want, (name, self.nodes[name], used, count, pod.effective_requests())
            score = default_score(pod, node, used)
            if fit.scores_bounded(pod):
                assert 0 <= score <= 100
            if score < 1 << 61:  # larger ones (negative requests only) are clipped
                assert int(scores[row]) == score, (name, self.nodes[name], used)
        assert set(fit.index) == set(self.nodes)
        if len(fit.names) > 1:  # a subset of rows, in a given order
            rows = np.array(sorted(range(len(fit.names)), key=lambda r: -r)[:2], dtype=np.intp)
            assert np.array_equal(fit.scores(pod, rows), scores[rows])


@st.composite
def operations(draw: st.DrawFn) -> tuple[str, int, Any]:
    op = draw(st.sampled_from(["set_node", "set_node", "bind", "bind", "bind", "unbind", "remove", "check"]))
    k = draw(st.integers(0, 5))
    if op == "set_node":
        return op, k, draw(allocatables())
    if op in ("bind", "check"):
        return op, k, draw(request_maps())
    return op, k, None


OPS = st.lists(operations(), min_size=4, max_size=25)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(initial=st.lists(allocatables(), max_size=6), ops=OPS, final=PODS)
def test_verdicts_and_scores_equal_the_per_node_functions_through_node_changes(
    initial: list[dict[str, Quantity]], ops: list[tuple[str, int, Any]], final: Pod
) -> None:
    """The scheduler's way: set_node / remove_node / set_usage with the exact sums."""
    model = Model()
    names = [f"n{i}" for i in range(len(initial))]
    fit = FitArrays(names, initial)
    model.nodes = dict(zip(names, initial, strict=True))
    model.check(fit, final)
    serial = 0
    for op, k, arg in ops:
        name = f"n{k}"
        if op == "set_node":  # added, or its allocatable changed (usage kept)
            fit.set_node(name, arg)
            if name not in model.nodes and name in model.pods:  # pods bound before the node was seen
                fit.set_usage(name, model.used(name), len(model.pods[name]))
            model.nodes[name] = arg
        elif op == "remove":
            fit.remove_node(name)
            model.nodes.pop(name, None)
            model.pods.pop(name, None)
        elif op == "bind":
            serial += 1
            model.pods.setdefault(name, []).append(make_pod(f"b{serial}", arg))
            fit.set_usage(name, model.used(name), len(model.pods[name]))
        elif op == "unbind" and model.pods.get(name):
            model.pods[name].pop(0)
            fit.set_usage(name, model.used(name), len(model.pods[name]))
        elif op == "check":
            model.check(fit, make_pod("c", arg))
        model.check(fit, final)  # after every step: the memoised score parts must follow each change


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=st.lists(allocatables(), min_size=1, max_size=5),
    binds=st.lists(st.tuples(st.integers(0, 4), request_maps(), st.booleans()), max_size=12),
    pod=PODS,
)
def test_the_simulators_charges_keep_the_verdicts_exact(
    nodes: list[dict[str, Quantity]], binds: list[tuple[int, dict[str, str], bool]], pod: Pod
) -> None:
    """The simulator's way: a fixed node list, pods charged with add (exact) or add_vector (rounded-up
    thousandths: exact for whole-milli requests, the only ones charged that way here), some released."""
    names = [f"n{i}" for i in range(len(nodes))]
    fit = FitArrays(names, nodes)
    model = Model()
    model.nodes = dict(zip(names, nodes, strict=True))
    for i, (k, reqs, by_vector) in enumerate(binds):
        row = k % len(nodes)
        bound = make_pod(f"b{i}", reqs)
        whole = all(1000 * q.amount == int(1000 * q.amount) for q in bound.effective_requests().values())
        small = all(abs(q.amount) < 10**12 for q in bound.effective_requests().values())
        if by_vector and whole and small and set(bound.effective_requests()) <= set(fit.columns):
            fit.add_vector(row, fit.vector_of(bound))
        else:
            fit.add(row, bound.effective_requests())
        model.pods.setdefault(names[row], []).append(bound)
        if i % 3 == 2:  # release the oldest pod of that node
            gone = model.pods[names[row]].pop(0)
            fit.add(row, gone.effective_requests(), -1)
        model.check(fit, pod)
    model.check(fit, pod)


def test_rows_are_stable_and_reused_lowest_first() -> None:
    alloc = {"cpu": parse_quantity("4"), "memory": parse_quantity("8Gi"), "pods": parse_quantity("10")}
    fit = FitArrays([], [])
    rows = [fit.set_node(f"n{i}", alloc) for i in range(40)]
    assert rows == list(range(40))
    fit.remove_node("n3")
    fit.remove_node("n1")
    assert fit.names[1] is None and fit.row("n1") is None
    assert fit.set_node("new", alloc) == 1 and fit.set_node("newer", alloc) == 3
    assert fit.set_node("n7", {**alloc, "cpu": parse_quantity("2")}) == 7  # a change keeps the row
    pod = make_pod("p", {"cpu": "3"})
    feasible = fit.feasible(pod)
    assert not feasible[7] and feasible.sum() == 39


def test_a_changed_allocatable_keeps_the_usage() -> None:
    fit = FitArrays([], [])
    fit.set_node("n", {"cpu": parse_quantity("4"), "pods": parse_quantity("3")})
    fit.set_usage("n", {"cpu": parse_quantity("2")}, 2)
    fit.set_node("n", {"cpu": parse_quantity("5"), "pods": parse_quantity("3")})
    assert fit.feasible(make_pod("p", {"cpu": "3"}))[0] and not fit.feasible(make_pod("p", {"cpu": "3100m"}))[0]
    fit.set_node("n", {"cpu": parse_quantity("5"), "pods": parse_quantity("2")})
    assert not fit.feasible(make_pod("p", {"cpu": "1"}))[0]


def test_an_overcommitted_resource_fails_only_pods_that_request_it() -> None:
    """Allocatable shrank under the pods already there (or a pod was bound by someone else): like
    kube-scheduler, only the requested resources count (the simulator's former rule failed the node)."""
    fit = FitArrays([], [])
    fit.set_node("n", {"cpu": parse_quantity("4"), "memory": parse_quantity("1Gi")})
    fit.set_usage("n", {"cpu": parse_quantity("1"), "memory": parse_quantity("2Gi")}, 1)
    assert fit.feasible(make_pod("cpu-only", {"cpu": "1"}))[0]
    assert not fit.feasible(make_pod("memory", {"cpu": "1", "memory": "1Mi"}))[0]


def test_a_resource_only_used_somewhere_still_counts_for_negative_requests() -> None:
    fit = FitArrays([], [])
    fit.set_node("n", {"cpu": parse_quantity("4")})
    fit.set_usage("n", {"vendor.io/x": parse_quantity("3")}, 1)  # used, not allocatable (a foreign pod)
    node = BasicNode("n", allocatable={"cpu": parse_quantity("4")})
    used = {"vendor.io/x": parse_quantity("3")}
    for amount in ("-1", "-3", "-4", "1"):
        pod = make_pod("p", {"vendor.io/x": amount})
        assert bool(fit.feasible(pod)[0]) == (not resource_reasons(pod, node, used, 1)), amount


NODE_DOCS = st.fixed_dictionaries(
    {
        "metadata": st.fixed_dictionaries(
            {
                "name": st.sampled_from(["a", "b"]),
                "labels": st.dictionaries(st.sampled_from(["zone", "gpu"]), st.sampled_from(["x", "y"])),
            }
        ),
        "spec": st.fixed_dictionaries(
            {},
            optional={
                "unschedulable": st.booleans(),
                "taints": st.lists(
                    st.fixed_dictionaries(
                        {
                            "key": st.sampled_from(["gpu", "dedicated"]),
                            "value": st.sampled_from(["", "yes"]),
                            "effect": st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"]),
                        }
                    ),
                    max_size=2,
                ),
            },
        ),
    }
)
POD_SPECS = st.fixed_dictionaries(
    {},
    optional={
        "nodeName": st.sampled_from(["", "a", "b"]),
        "nodeSelector": st.one_of(st.none(), st.just({}), st.dictionaries(st.just("zone"), st.just("x"))),
        "affinity": st.one_of(
            st.none(),
            st.just({}),
            st.just({"nodeAffinity": {}}),
            st.just({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}),
            st.just({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}),
            st.just(
                {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]
                        }
                    }
                }
            ),
        ),
        "tolerations": st.lists(
            st.fixed_dictionaries(
                {"key": st.sampled_from(["gpu", ""]), "operator": st.sampled_from(["Exists", "Equal"])}
            ),
            max_size=1,
        ),
    },
)


@settings(max_examples=300, deadline=None)
@given(node_doc=NODE_DOCS, spec=POD_SPECS)
def test_unconstrained_pods_can_only_be_refused_by_restricted_nodes(
    node_doc: dict[str, Any], spec: dict[str, Any]
) -> None:
    node = parse_node(node_doc)
    doc = {"metadata": {"name": "p"}, "spec": {**spec, "containers": [{"name": "c"}]}}
    pod = parse_pod(doc)
    if not has_node_constraints(pod) and not is_restricted(node):
        assert node_reasons(pod, node) == []


def test_sub_milli_and_huge_quantities_are_exact() -> None:
    """Rounded-up thousandths decide verdicts exactly, not scores: a sub-milli request on a small
    node takes exact arithmetic; nodes with sub-milli or huge amounts are evaluated one by one."""
    nodes = [
        {"cpu": parse_quantity("10m"), "memory": parse_quantity("1Gi")},
        {"cpu": parse_quantity("10500u"), "memory": parse_quantity("1Gi")},  # sub-milli allocatable
        {"cpu": parse_quantity("9E"), "memory": parse_quantity("100P")},  # beyond int64 thousandths
    ]
    fit = FitArrays(["small", "odd", "huge"], nodes)
    for cpu in ("500u", "10m", "10500u", "11m", "1n", "-1"):
        pod = make_pod("p", {"cpu": cpu})
        feasible, scores = fit.feasible(pod), fit.scores(pod)
        for row, alloc in enumerate(nodes):
            node = BasicNode("x", allocatable=alloc)
            assert bool(feasible[row]) == (not resource_reasons(pod, node, {}, 0)), (cpu, row)
            assert int(scores[row]) == default_score(pod, node, {}), (cpu, row)
    assert int(fit.scores(make_pod("p", {"cpu": "500u"}))[0]) == (95 + 80) // 2  # not (90 + 80) // 2
