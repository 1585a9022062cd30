"""Pod parsing, QoS classes and effective requests (init containers, sidecars, overhead)."""

from __future__ import annotations

from typing import Any

import pytest

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
