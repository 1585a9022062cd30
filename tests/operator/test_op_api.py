"""The numaplane.io/v1 API types: parsing, defaults, normalisation, and the rules beyond the schema."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numaplane.operator.api.meta import is_paused, meta_to_dict, read_meta
from numaplane.operator.api.numaresources import (
    Enforcement,
    InfoRefreshMode,
    NUMAResourcesOperator,
    PodsFingerprinting,
)
from numaplane.operator.api.policy import NodeResourcePolicy, config_revision
from numaplane.operator.api.scheduler import InformerMode, NUMAResourcesScheduler, SchedulerMode, ScoringType
from numaplane.operator.api.selector import NodeSelector, Requirement
from numaplane.operator.errors import SpecError
from numaplane.resources.duration import format_duration, parse_duration


def nro(*groups: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "numaplane.io/v1",
        "kind": "NUMAResourcesOperator",
        "metadata": {"name": "numaresourcesoperator"},
        "spec": {"nodeGroups": list(groups), **spec},
    }


def group(name: str, labels: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"name": name, "nodeSelector": {"matchLabels": labels if labels is not None else {"pool": name}}, **extra}


def test_defaults_follow_upstream_node_group_config() -> None:
    cr = NUMAResourcesOperator.from_dict(nro(group("worker")))
    (g,) = cr.node_groups
    assert g.enforcement is Enforcement.KUBELET
    assert g.config.to_dict() == {
        "podsFingerprinting": "EnabledExclusiveResources",
        "infoRefreshMode": "Periodic",
        "infoRefreshPeriod": "10s",
        "infoRefreshPause": "Disabled",
    }
    assert cr.log_level.value == "Normal" and cr.manage_nrt_crd


def test_round_trip_keeps_everything() -> None:
    doc = nro(
        group(
            "a",
            enforcement="agent",
            config={
                "podsFingerprinting": "Enabled",
                "infoRefreshMode": "Events",
                "infoRefreshPeriod": "1m30s",
                "infoRefreshPause": "Enabled",
                "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "numa", "effect": "NoSchedule"}],
            },
        ),
        podExcludes=[{"namespace": "kube-*"}],
        logLevel="Debug",
    )
    cr = NUMAResourcesOperator.from_dict(doc)
    again = NUMAResourcesOperator.from_dict(cr.to_dict())
    assert again == cr
    cfg = cr.node_groups[0].config
    assert cfg.pods_fingerprinting is PodsFingerprinting.ENABLED
    assert cfg.info_refresh_mode is InfoRefreshMode.EVENTS
    assert cfg.info_refresh_period_seconds == 90
    assert cr.pod_excludes[0].flag_value == "kube-*/*"


def test_wrong_name_is_its_own_reason() -> None:
    doc = nro(group("a"))
    doc["metadata"]["name"] = "other"
    with pytest.raises(SpecError) as err:
        NUMAResourcesOperator.from_dict(doc)
    assert err.value.reason == "IncorrectName" and "singleton" in str(err.value)


def test_metadata_read_through_the_shared_reader_keeps_the_operator_words() -> None:
    meta = read_meta(
        {
            "metadata": {
                "name": "numaresourcesoperator",
                "uid": "u1",
                "generation": 4,
                "labels": {"ignored": "by the operator"},
                "managedFields": [{"manager": "kubectl"}],
                "annotations": {"numaplane.io/pause-reconciliation": "True"},
            }
        }
    )
    assert (meta.name, meta.uid, meta.generation, is_paused(meta)) == ("numaresourcesoperator", "u1", 4, True)
    assert meta.labels == {} and meta.extra == {"uid": "u1", "generation": 4}  # equality: what the operator reads
    assert meta_to_dict(meta) == {
        "name": "numaresourcesoperator",
        "annotations": {"numaplane.io/pause-reconciliation": "True"},
    }
    assert read_meta({}).name == ""
    with pytest.raises(SpecError) as err:
        read_meta(
            {
                "metadata": {
                    "name": 1,
                    "labels": 2,  # a field the operator does not read: not reported
                    "annotations": {"a": 3},
                    "generation": -1,
                    "creationTimestamp": 5,
                }
            }
        )
    assert err.value.problems == [
        "metadata.annotations.a: must be a string",
        "metadata.name: must be a string",
        "metadata.generation: must be at least 0, not -1",
        "metadata.creationTimestamp: must be a string",
    ]
    with pytest.raises(SpecError, match=r"^metadata: must be an object$"):
        read_meta({"metadata": 1})


def test_every_problem_is_reported_at_once() -> None:
    doc = nro(
        {"name": "Bad_Name", "nodeSelector": {}, "enforcement": "cgroups", "config": {"infoRefreshPeriod": "ten"}},
        logLevel="Loud",
        bogus=1,
    )
    with pytest.raises(SpecError) as err:
        NUMAResourcesOperator.from_dict(doc)
    text = str(err.value)
    for fragment in (
        "spec.bogus: unknown field",
        "Bad_Name",
        "'cgroups' is not one of kubelet, agent",
        "'ten'",
        "Loud",
    ):
        assert fragment in text
    assert len(err.value.problems) == 5


def test_periodic_refresh_needs_a_positive_period() -> None:
    with pytest.raises(SpecError, match="must be positive"):
        NUMAResourcesOperator.from_dict(nro(group("a", config={"infoRefreshPeriod": "0s"})))
    cr = NUMAResourcesOperator.from_dict(
        nro(group("a", config={"infoRefreshPeriod": "0s", "infoRefreshMode": "PeriodicAndEvents"}))
    )
    assert cr.node_groups[0].config.info_refresh_period_seconds == 0


@pytest.mark.parametrize(
    ("toleration", "fragment"),
    [
        ({"key": "a", "operator": "Exists", "value": "x"}, "must be empty when operator is Exists"),
        ({"operator": "Equal", "value": "x"}, "must be Exists when key is empty"),
        ({"key": "a", "operator": "Equal", "effect": "NoSchedule", "tolerationSeconds": 5}, "only valid with effect"),
        ({"key": "a", "effect": "Sometimes"}, "'Sometimes' is not one of"),
    ],
)
def test_bad_tolerations(toleration: dict[str, Any], fragment: str) -> None:
    with pytest.raises(SpecError, match=fragment):
        NUMAResourcesOperator.from_dict(nro(group("a", config={"tolerations": [toleration]})))


def test_duplicate_group_names() -> None:
    with pytest.raises(SpecError) as err:
        NUMAResourcesOperator.from_dict(nro(group("a", {"x": "1"}), group("a", {"x": "2"})))
    assert err.value.reason == "DuplicateNodeGroups"


def test_duplicate_selectors_named() -> None:
    with pytest.raises(SpecError) as err:
        NUMAResourcesOperator.from_dict(
            nro(
                group("a", {"pool": "p"}),
                {
                    "name": "b",
                    "nodeSelector": {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["p"]}]},
                },
            )
        )
    assert err.value.reason == "DuplicateNodeSelectors"
    assert "node groups 'a' and 'b' have the same selector (pool=p)" in str(err.value)


def test_overlapping_selectors_rejected_with_a_witness() -> None:
    with pytest.raises(SpecError) as err:
        NUMAResourcesOperator.from_dict(
            nro(
                group("a", {"role": "worker"}),
                {"name": "b", "nodeSelector": {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}},
            )
        )
    assert err.value.reason == "OverlappingNodeGroups"
    assert "a node labelled gpu=v0,role=worker would match both" in str(err.value)


def test_empty_selector_overlaps_everything() -> None:
    with pytest.raises(SpecError, match=r"any node would match both|a node labelled"):
        NUMAResourcesOperator.from_dict(nro(group("all", {}), group("b", {"x": "y"})))


@pytest.mark.parametrize(
    "b_selector",
    [
        {"matchLabels": {"pool": "b"}},
        {"matchExpressions": [{"key": "pool", "operator": "NotIn", "values": ["a"]}]},
        {"matchExpressions": [{"key": "pool", "operator": "DoesNotExist"}]},
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["b", "c"]}]},
    ],
)
def test_disjoint_selectors_accepted(b_selector: dict[str, Any]) -> None:
    cr = NUMAResourcesOperator.from_dict(nro(group("a", {"pool": "a"}), {"name": "b", "nodeSelector": b_selector}))
    assert [g.name for g in cr.node_groups] == ["a", "b"]


# -- selector overlap is exact: property test against brute force over a small label universe ----------

KEYS = ("k1", "k2")
VALUES = ("a", "b", "c")
requirements = st.builds(
    lambda key, op, vals: Requirement(key, op, tuple(sorted(set(vals))) if op in ("In", "NotIn") else ()),
    st.sampled_from(KEYS),
    st.sampled_from(("In", "NotIn", "Exists", "DoesNotExist")),
    st.lists(st.sampled_from(VALUES), min_size=1, max_size=2),
)
selectors = st.builds(lambda reqs: NodeSelector.of({}, reqs), st.lists(requirements, max_size=3))


def _universe() -> list[dict[str, str]]:
    choices = [None, *VALUES, "other"]
    out = []
    for combo in itertools.product(choices, repeat=len(KEYS)):
        out.append({k: v for k, v in zip(KEYS, combo, strict=True) if v is not None})
    return out


@settings(max_examples=300, deadline=None)
@given(selectors, selectors)
def test_witness_is_exact(a: NodeSelector, b: NodeSelector) -> None:
    witness = a.witness(b)
    if witness is None:
        assert not any(a.matches(labels) and b.matches(labels) for labels in _universe())
    else:
        assert a.matches(witness) and b.matches(witness)


def test_selector_as_node_affinity() -> None:
    sel = NodeSelector.of({"b": "2", "a": "1"}, [Requirement("c", "Exists")])
    assert sel.node_affinity_terms() == [
        {
            "matchExpressions": [
                {"key": "a", "operator": "In", "values": ["1"]},
                {"key": "b", "operator": "In", "values": ["2"]},
                {"key": "c", "operator": "Exists"},
            ]
        }
    ]
    assert NodeSelector().node_affinity_terms() == []


# -- durations -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "seconds"), [("10s", 10), ("1m30s", 90), ("250ms", 0.25), ("0", 0), ("1h", 3600)])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "10", "1d", "-5s", "s"])
def test_bad_duration(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text, non_negative=True)


@given(st.integers(min_value=0, max_value=10**7))
def test_duration_round_trip(millis: int) -> None:
    assert parse_duration(format_duration(millis / 1000)) == pytest.approx(millis / 1000)


# -- scheduler -----------------------------------------------------------------------------------------


def nrs(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "numaplane.io/v1",
        "kind": "NUMAResourcesScheduler",
        "metadata": {"name": "numaresourcesscheduler"},
        "spec": spec,
    }


def test_scheduler_defaults() -> None:
    s = NUMAResourcesScheduler.from_dict(nrs())
    assert s.scheduler_name == "numaplane-scheduler"
    assert s.mode is SchedulerMode.STANDALONE
    assert s.cache_resync_period_seconds == 5
    assert s.scoring_strategy.type is ScoringType.LEAST_ALLOCATED
    assert s.scoring_strategy.flag_values == ["cpu=1", "memory=1"]
    assert s.scheduler_informer is InformerMode.DEDICATED
    assert s.replicas == 1 and not s.leader_elect
    assert NUMAResourcesScheduler.from_dict(s.to_dict()) == s


def test_scheduler_replicas_enable_leader_election() -> None:
    assert NUMAResourcesScheduler.from_dict(nrs(replicas=3)).leader_elect


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ({"replicas": 0}, "between 1 and 5"),
        ({"schedulerName": "default-scheduler"}, "must not be default-scheduler"),
        ({"mode": "plugin"}, "'plugin' is not one of"),
        ({"cacheResyncPeriod": "soon"}, "'soon' is not a duration"),
        ({"scoringStrategy": {"type": "Random"}}, "'Random' is not one of"),
        ({"scoringStrategy": {"resources": [{"name": "cpu", "weight": 0}]}}, "between 1 and 100"),
        ({"scoringStrategy": {"resources": [{"name": "cpu"}, {"name": "cpu"}]}}, "duplicate resource 'cpu'"),
    ],
)
def test_scheduler_bad_input(spec: dict[str, Any], fragment: str) -> None:
    with pytest.raises(SpecError, match=fragment):
        NUMAResourcesScheduler.from_dict(nrs(**spec))


def test_scheduler_wrong_name() -> None:
    doc = nrs()
    doc["metadata"]["name"] = "mine"
    with pytest.raises(SpecError) as err:
        NUMAResourcesScheduler.from_dict(doc)
    assert err.value.reason == "IncorrectName"


# -- node resource policy ------------------------------------------------------------------------------


def nrp(config: dict[str, Any], group_name: str = "latency", name: str = "p") -> dict[str, Any]:
    return {
        "apiVersion": "numaplane.io/v1",
        "kind": "NodeResourcePolicy",
        "metadata": {"name": name},
        "spec": {"nodeGroup": group_name, "config": config},
    }


def test_policy_document_and_revision() -> None:
    config = {"topologyManager": {"policy": "single-numa-node", "scope": "pod"}}
    p = NodeResourcePolicy.from_dict(nrp(config))
    doc = p.config_document()
    assert doc["apiVersion"] == "numaplane.io/v1" and doc["kind"] == "NodeResourceConfig"
    assert doc["metadata"] == {"policy": "p", "nodeGroup": "latency", "revision": config_revision(config)}
    assert doc["topologyManager"] == config["topologyManager"]
    # key order does not change the revision; content does
    assert config_revision({"b": 1, "a": 2}) == config_revision({"a": 2, "b": 1})
    assert config_revision({"a": 1}) != config_revision({"a": 2})


def test_policy_validated_by_the_agents_own_parser() -> None:
    with pytest.raises(SpecError) as err:
        NodeResourcePolicy.from_dict(nrp({"cpuManager": {"reservedCPUs": "0-1", "reservedCPUCount": 3}}))
    assert err.value.reason == "InvalidPolicy"
    assert "reservedCPUs has 2 CPUs but reservedCPUCount is 3" in str(err.value)


def test_policy_may_not_set_operator_fields() -> None:
    with pytest.raises(SpecError, match=r"spec\.config\.metadata: is set by the operator"):
        NodeResourcePolicy.from_dict(nrp({"metadata": {"x": 1}}))
