"""Pod parsing, QoS classes and effective requests (init containers, sidecars, overhead)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from numaplane.resources import PodSpecError, parse_pod, parse_quantity
from numaplane.resources.pod import compute_qos


def _c(name: str, req: dict[str, str] | None = None, lim: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if req is not None:
        res["requests"] = req
    if lim is not None:
        res["limits"] = lim
    return {"name": name, "resources": res, **extra}


def _pod(containers: list[dict[str, Any]], inits: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "uid": "u"},
        "spec": {"containers": containers, "initContainers": inits or [], **spec},
    }


GU = {"cpu": "2", "memory": "1Gi"}


def test_qos_guaranteed_burstable_besteffort() -> None:
    assert parse_pod(_pod([_c("a", GU, GU)])).qos_class == "Guaranteed"
    assert parse_pod(_pod([_c("a", {"cpu": "1"}, GU)])).qos_class == "Burstable"
    assert parse_pod(_pod([_c("a")])).qos_class == "BestEffort"
    # zero quantities are ignored
    assert parse_pod(_pod([_c("a", {"cpu": "0"}, {"memory": "0"})])).qos_class == "BestEffort"
    # only limits for cpu: not guaranteed (memory limit missing)
    assert parse_pod(_pod([_c("a", {"cpu": "1"}, {"cpu": "1"})])).qos_class == "Burstable"
    # extended resources do not count for QoS
    gu_gpu = {**GU, "vendor/gpu": "1"}
    assert parse_pod(_pod([_c("a", gu_gpu, GU)])).qos_class == "Guaranteed"


def test_status_qos_class_wins() -> None:
    doc = _pod([_c("a")])
    doc["status"] = {"qosClass": "Guaranteed"}
    assert parse_pod(doc).qos_class == "Guaranteed"


def test_effective_requests_init_and_sidecar_rules() -> None:
    doc = _pod(
        [_c("app", {"cpu": "2"})],
        inits=[
            _c("side", {"cpu": "1"}, restartPolicy="Always"),
            _c("init-big", {"cpu": "4"}),
        ],
        overhead={"cpu": "100m"},
    )
    reqs = parse_pod(doc).effective_requests()
    # max(app 2 + sidecar 1, init 4 + sidecar started before it 1) + overhead
    assert reqs["cpu"] == parse_quantity("5100m")


def test_sidecar_after_init_is_not_counted_for_that_init() -> None:
    doc = _pod(
        [_c("app", {"cpu": "1"})], inits=[_c("init", {"cpu": "3"}), _c("side", {"cpu": "1"}, restartPolicy="Always")]
    )
    assert parse_pod(doc).effective_requests()["cpu"] == parse_quantity("3")


@pytest.mark.parametrize(
    ("doc", "path"),
    [
        ({"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "x"}}}]}}, "requests.cpu"),
        ({"spec": {"containers": [{"resources": {}}]}}, "spec.containers[0].name"),
        ({"spec": {"containers": "nope"}}, "spec"),
        ([], "$"),
    ],
)
def test_malformed_pods_name_the_field(doc: Any, path: str) -> None:
    with pytest.raises(PodSpecError) as info:
        parse_pod(doc)
    assert path in str(info.value)


def test_derived_values_are_computed_once_and_follow_replace() -> None:
    from dataclasses import replace

    doc = {
        "metadata": {"name": "p"},
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}}],
            "overhead": {"cpu": "100m"},
        },
    }
    pod = parse_pod(doc)
    assert pod.qos_class == "Burstable" and pod.qos_class == compute_qos(pod)
    first = pod.effective_requests()
    first["cpu"] = parse_quantity("99")  # callers own the dict they get
    assert pod.effective_requests() == {"cpu": parse_quantity("1100m")}
    assert pod.effective_requests(include_overhead=False) == {"cpu": parse_quantity("1")}
    again = replace(pod, status_qos_class="BestEffort", overhead={})
    assert again.qos_class == "BestEffort" and again.effective_requests() == {"cpu": parse_quantity("1")}
    assert pod.qos_class == "Burstable" and pod == replace(pod)


def _reference_qos(pod: Any) -> str:
    """``compute_qos`` as first written (Fraction sums from zero, sets of names): the oracle."""
    from fractions import Fraction

    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    if pod.pod_requests_spec is not None or pod.pod_limits_spec is not None:
        sources = [(pod.pod_requests_spec or {}, pod.pod_limits_spec or {})]
    else:
        sources = [(c.requests, c.limits) for c in pod.all_containers()]
    for reqs, lims in sources:
        for name in ("cpu", "memory"):
            q = reqs.get(name)
            if q is not None and not q.is_zero():
                requests[name] = requests.get(name, Fraction(0)) + q.amount
        found = set()
        for name in ("cpu", "memory"):
            q = lims.get(name)
            if q is not None and not q.is_zero():
                found.add(name)
                limits[name] = limits.get(name, Fraction(0)) + q.amount
        if found != {"cpu", "memory"}:
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed:
        for name, amount in requests.items():
            if limits.get(name) != amount:
                guaranteed = False
                break
    if guaranteed and len(requests) == len(limits):
        return "Guaranteed"
    return "Burstable"


_AMOUNTS = st.sampled_from(["0", "1", "2", "500m", "1500m", "1Gi", "2Gi", "0.5Gi"])
_RESOURCES = st.dictionaries(st.sampled_from(["cpu", "memory", "hugepages-1Gi"]), _AMOUNTS, max_size=3)


@given(
    st.lists(st.tuples(_RESOURCES, _RESOURCES), min_size=1, max_size=3),
    st.lists(st.tuples(_RESOURCES, _RESOURCES), max_size=2),
    st.one_of(st.none(), st.tuples(_RESOURCES, _RESOURCES)),
)
def test_compute_qos_equals_the_reference(
    apps: list[tuple[dict[str, str], dict[str, str]]],
    inits: list[tuple[dict[str, str], dict[str, str]]],
    pod_level: tuple[dict[str, str], dict[str, str]] | None,
) -> None:
    def ctr(i: int, pair: tuple[dict[str, str], dict[str, str]]) -> dict[str, Any]:
        return {"name": f"c{i}", "resources": {"requests": pair[0], "limits": pair[1]}}

    spec: dict[str, Any] = {
        "containers": [ctr(i, p) for i, p in enumerate(apps)],
        "initContainers": [ctr(10 + i, p) for i, p in enumerate(inits)],
    }
    if pod_level is not None:
        spec["resources"] = {"requests": pod_level[0], "limits": pod_level[1]}
    pod = parse_pod({"metadata": {"name": "p"}, "spec": spec})
    assert compute_qos(pod) == _reference_qos(pod)


@given(
    st.lists(st.tuples(_RESOURCES, _RESOURCES), min_size=1, max_size=2),
    st.sampled_from(["node_name", "phase", "scheduler_name", "name", "status_qos_class", "containers", "overhead"]),
)
def test_with_changes_equals_dataclasses_replace(apps: list[tuple[dict[str, str], dict[str, str]]], name: str) -> None:
    from dataclasses import replace

    spec = {
        "containers": [
            {"name": f"c{i}", "resources": {"requests": r, "limits": lim}} for i, (r, lim) in enumerate(apps)
        ]
    }
    pod = parse_pod({"metadata": {"name": "p"}, "spec": spec, "status": {}})
    assert pod.qos_class and pod.effective_requests() is not None  # derived values now cached
    value: Any = {
        "status_qos_class": "BestEffort",
        "containers": pod.containers[:1] * 2,
        "overhead": {"cpu": parse_quantity("1")},
    }.get(name, "x")
    got, want = pod.with_changes(**{name: value}), replace(pod, **{name: value})
    assert got == want and repr(got) == repr(want)
    assert got.qos_class == want.qos_class  # ``want`` computes its own from its fields
    assert got.effective_requests() == want.effective_requests()
    with pytest.raises(TypeError):
        pod.with_changes(nodeName="x")


# --- negative quantities (the API server's ValidateNonnegativeQuantity) -------------------------------

_NEGATIVE = st.one_of(
    st.sampled_from(["-1", "-1m", "-1n", "-0.5", "-1Gi", "-9E", "-1e1000", "-9223372036854775808"]),
    st.integers(-(2**70), -1).map(str),
    st.integers(-(2**70), -1),  # a JSON number
)
_NON_NEGATIVE = st.one_of(
    st.sampled_from(["0", "-0", "+0", "0m", "-0.0", "0Gi", "1n", "1", "+1", "500m", "1Gi", "9E", "1e1000"]),
    st.integers(0, 2**70).map(str),
    st.integers(0, 2**70),
)
_NAMES = st.sampled_from(["cpu", "memory", "hugepages-2Mi", "ephemeral-storage", "example.com/nic"])
# Every place of a pod's own quantities: (kind, index); the document keeps ``value`` at resource ``name``.
_PLACES = st.one_of(
    st.tuples(
        st.sampled_from(["containers", "initContainers"]), st.integers(0, 2), st.sampled_from(["requests", "limits"])
    ),
    st.tuples(st.just("overhead"), st.just(0), st.just("")),
    st.tuples(st.just("resources"), st.just(0), st.sampled_from(["requests", "limits"])),
)


def _pod_with(place: tuple[str, int, str], name: str, value: Any) -> tuple[dict[str, Any], str]:
    """A valid pod document (positive quantities elsewhere) with ``value`` at ``place``; and its path."""
    kind, index, which = place
    apps = [_c(f"a{i}", {"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}) for i in range(3)]
    inits = [_c(f"i{i}", {"cpu": "1"}, {"cpu": "1"}) for i in range(3)]
    doc = _pod(apps, inits, overhead={"cpu": "10m"}, resources={"requests": {"cpu": "4"}, "limits": {"cpu": "4"}})
    spec = doc["spec"]
    if kind in ("containers", "initContainers"):
        spec[kind][index]["resources"][which][name] = value
        return doc, f"spec.{kind}[{index}].resources.{which}.{name}"
    if kind == "overhead":
        spec["overhead"][name] = value
        return doc, f"spec.overhead.{name}"
    spec["resources"][which][name] = value
    return doc, f"spec.resources.{which}.{name}"


@given(place=_PLACES, name=_NAMES, value=_NEGATIVE)
def test_negative_quantities_are_refused_naming_the_field(place: tuple[str, int, str], name: str, value: Any) -> None:
    doc, path = _pod_with(place, name, value)
    with pytest.raises(PodSpecError) as info:
        parse_pod(doc)
    assert info.value.path == path
    assert info.value.reason == f"quantity {value!r} must be greater than or equal to 0"
    assert str(info.value) == f"invalid pod at {path}: quantity {value!r} must be greater than or equal to 0"


@given(place=_PLACES, name=_NAMES, value=_NON_NEGATIVE)
def test_zero_and_positive_quantities_are_accepted(place: tuple[str, int, str], name: str, value: Any) -> None:
    doc, _ = _pod_with(place, name, value)
    pod = parse_pod(doc)
    kind, index, which = place
    if kind == "overhead":
        got = pod.overhead[name]
    elif kind == "resources":
        got = dict((pod.pod_requests_spec if which == "requests" else pod.pod_limits_spec) or {})[name]
    else:
        ctr = (pod.containers if kind == "containers" else pod.init_containers)[index]
        got = (ctr.requests if which == "requests" else ctr.limits)[name]
    assert got == parse_quantity(value) and got.amount >= 0


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"containers": [_c("a"), _c("b", {"cpu": "-1"})]}, "spec.containers[1].resources.requests.cpu"),
        ({"containers": [_c("a", None, {"memory": "-1Gi"})]}, "spec.containers[0].resources.limits.memory"),
        (
            {"initContainers": [_c("i", {"cpu": "-500m"})], "containers": [_c("a")]},
            "spec.initContainers[0].resources.requests.cpu",
        ),
        (
            {"initContainers": [_c("s", None, {"example.com/nic": "-1"}, restartPolicy="Always")]},
            "spec.initContainers[0].resources.limits.example.com/nic",
        ),
        ({"containers": [_c("a")], "overhead": {"cpu": "250m", "memory": "-1"}}, "spec.overhead.memory"),
        ({"containers": [_c("a")], "resources": {"requests": {"cpu": "-1n"}}}, "spec.resources.requests.cpu"),
        ({"containers": [_c("a")], "resources": {"limits": {"memory": -1}}}, "spec.resources.limits.memory"),
    ],
)
def test_each_negative_quantity_place_is_named(spec: dict[str, Any], path: str) -> None:
    with pytest.raises(PodSpecError) as info:
        parse_pod({"metadata": {"name": "p"}, "spec": spec})
    assert info.value.path == path
    assert "must be greater than or equal to 0" in info.value.reason


def test_a_malformed_quantity_is_reported_as_before_not_as_negative() -> None:
    with pytest.raises(PodSpecError) as info:
        parse_pod({"spec": {"containers": [_c("a", {"cpu": "--1"})]}})
    assert info.value.path == "spec.containers[0].resources.requests.cpu"
    assert "greater than or equal" not in info.value.reason
