"""Extender wire parsing and replies, score scaling, and configuration documents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from sched_helpers import captures, load_capture

from numaplane.limits import MAX_EXTENDER_NODES, MAX_JSON_DEPTH
from numaplane.scheduler.config import SchedulerConfig, config_from_document, parse_cache_mode
from numaplane.scheduler.errors import ExtenderRequestError, SchedulerConfigError
from numaplane.scheduler.wire import (
    bind_result,
    decode_body,
    encode,
    field_value,
    filter_result,
    parse_binding_args,
    parse_extender_args,
    priority_list,
    priority_scores,
    scale_score,
)

CAPTURES = [
    f"nodecachecapable-{mode}.{verb}.{qos}.json"
    for mode in ("false", "true")
    for verb in ("filter", "prioritize", "bind")
    for qos in ("guaranteed", "besteffort")
]


def test_the_capture_set_is_complete(shared_dir: Path) -> None:
    assert sorted(p.name for p in captures(shared_dir).glob("*.json")) == sorted(CAPTURES)


@pytest.mark.parametrize("name", CAPTURES)
def test_every_capture_parses(shared_dir: Path, name: str) -> None:
    doc = load_capture(shared_dir, name)
    if ".bind." in name:
        args = parse_binding_args(doc)
        assert args.pod_name and args.pod_namespace == "numaplane-wire" and args.node == "rig-node"
        assert args.pod_uid == doc["PodUID"]
        return
    parsed = parse_extender_args(doc)
    assert parsed.names == ["numaplane-fake-node", "rig-node"]
    if "nodecachecapable-true" in name:
        assert parsed.nodes is None and parsed.node_names == ("numaplane-fake-node", "rig-node")
    else:
        assert parsed.node_names is None and len(parsed.nodes or ()) == 2
        assert set(parsed.node_objects) == {"numaplane-fake-node", "rig-node"}
    assert parsed.pod.qos_class == ("Guaranteed" if "guaranteed" in name else "BestEffort")


def test_field_names_match_like_go() -> None:
    assert field_value({"Pod": 1, "pod": 2}, "Pod") == 1
    assert field_value({"pOD": 2}, "Pod") == 2
    assert field_value({}, "Pod") is None
    args = parse_binding_args({"podname": "p", "PODNAMESPACE": "ns", "Node": "n"})
    assert (args.key, args.node, args.pod_uid) == ("ns/p", "n", "")
    assert parse_binding_args({"PodName": "p", "Node": "n"}).pod_namespace == "default"


def test_reply_shapes(shared_dir: Path) -> None:
    by_nodes = parse_extender_args(load_capture(shared_dir, "nodecachecapable-false.filter.guaranteed.json"))
    reply = filter_result(by_nodes, ["rig-node"], {"a": "cannot align pod"}, {})
    assert list(reply) == ["Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"]
    assert reply["NodeNames"] is None and [n["metadata"]["name"] for n in reply["Nodes"]["items"]] == ["rig-node"]
    assert reply["Nodes"]["items"][0] is by_nodes.node_objects["rig-node"]  # handed back untouched
    by_names = parse_extender_args(load_capture(shared_dir, "nodecachecapable-true.filter.guaranteed.json"))
    reply = filter_result(by_names, ["rig-node"], {}, {"b": "x"}, "")
    assert reply == {
        "Nodes": None,
        "NodeNames": ["rig-node"],
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": {"b": "x"},
        "Error": "",
    }
    assert priority_list([("a", 100), ("b", 0), ("c", 46)]) == [
        {"Host": "a", "Score": 10},
        {"Host": "b", "Score": 0},
        {"Host": "c", "Score": 5},
    ]
    assert bind_result() == {"Error": ""}


_POD = '{"metadata": {"name": "p"}}'
NODE_NAMES_REASONS = [
    ('["a", ""]', "NodeNames must be a list of non-empty strings"),
    ('["a", 1]', "NodeNames must be a list of non-empty strings"),
    ('{"a": "b"}', "NodeNames must be a list of non-empty strings"),
    ('"a"', "NodeNames must be a list of non-empty strings"),
    (json.dumps(["n"] * (MAX_EXTENDER_NODES + 1)), f"more than {MAX_EXTENDER_NODES} nodes"),
]


@pytest.mark.parametrize(("names", "reason"), NODE_NAMES_REASONS)
def test_node_names_are_refused_with_the_same_reason_raw_or_decoded(names: str, reason: str) -> None:
    body = f'{{"Pod": {_POD}, "NodeNames": {names}}}'.encode()
    for doc in (decode_body(body), json.loads(body)):  # raw: the typed decode, then the general path
        with pytest.raises(ExtenderRequestError) as raised:
            parse_extender_args(doc)
        assert raised.value.reason == reason


def test_deep_node_names_in_a_body_are_refused_for_their_depth() -> None:
    body = f'{{"Pod": {_POD}, "NodeNames": {"[" * 100 + "]" * 100}}}'.encode()
    with pytest.raises(ExtenderRequestError) as raised:
        parse_extender_args(decode_body(body))
    assert raised.value.reason == f"NodeNames nests deeper than {MAX_JSON_DEPTH} levels"


def test_node_names_decode_the_same_raw_or_decoded() -> None:
    body = json.dumps({"Pod": {"metadata": {"name": "p"}}, "NodeNames": ["b", "a", "b", "\u00e9"]}).encode()
    raw, decoded = parse_extender_args(decode_body(body)), parse_extender_args(json.loads(body))
    assert raw.node_names == decoded.node_names == ("b", "a", "b", "\u00e9")
    assert raw.names == ["b", "a", "b", "\u00e9"]


def test_priority_scores_encode_as_the_per_pair_list() -> None:
    scores = list(range(-5, 106))
    hosts = [f"n{i}" for i in range(len(scores))]
    pairs = list(zip(hosts, scores, strict=True))
    assert encode(priority_scores(hosts, np.array(scores, dtype=np.int64))) == encode(priority_list(pairs))


def test_scale_score_is_monotonic_and_bounded() -> None:
    values = [scale_score(s) for s in range(-5, 106)]
    assert values == sorted(values)
    assert (scale_score(0), scale_score(4), scale_score(5), scale_score(94), scale_score(95), scale_score(100)) == (
        0,
        0,
        1,
        9,
        10,
        10,
    )
    assert scale_score(250) == 10 and scale_score(-3) == 0


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"   ", "empty request body"),
        (b"\xff\xfe", "not JSON"),
        (b"null", "JSON object"),
    ],
)
def test_bad_bodies(body: bytes, reason: str) -> None:
    with pytest.raises(ExtenderRequestError, match=reason):
        parse_extender_args(decode_body(body))


def test_config_defaults_and_flat_document() -> None:
    config = SchedulerConfig()
    assert config.cache_mode == "overreserve" and config.cache.resync_period_seconds == 5.0
    assert type(config.make_cache()).__name__ == "OverReserveCache"
    doc = yaml.safe_load(
        """
        schedulerNames: [a, b]
        scoringStrategy: {type: MostAllocated, resources: [{name: cpu, weight: 3}]}
        cacheResyncPeriodSeconds: 0
        cache: {foreignPodsDetect: OnlyExclusiveResources}
        kubeletAdmission: true
        podMaxBackoffSeconds: 3
        """
    )
    config = config_from_document(doc)
    assert config.scheduler_names == ("a", "b")
    assert config.strategy.type == "MostAllocated" and config.strategy.weight("cpu") == 3
    assert config.cache_mode == "passthrough" and type(config.make_cache()).__name__ == "PassthroughCache"
    assert config.cache.foreign_pods_detect == "OnlyExclusiveResources"
    assert config.filter_options.kubelet_admission and config.backoff_max_seconds == 3
    assert config_from_document({"discardReservedNodes": True, "cacheResyncPeriodSeconds": 5}).cache_mode == (
        "discard-reserved"
    )


def test_config_from_kube_scheduler_configuration() -> None:
    doc = yaml.safe_load(
        """
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: KubeSchedulerConfiguration
        profiles:
        - schedulerName: default-scheduler
        - schedulerName: topo-aware-scheduler
          pluginConfig:
          - name: NodeResourceTopologyMatch
            args:
              scoringStrategy: {type: LeastNUMANodes}
              cacheResyncPeriodSeconds: 7
        """
    )
    config = config_from_document(doc)
    assert config.scheduler_names == ("topo-aware-scheduler",)
    assert config.strategy.type == "LeastNUMANodes"
    assert (config.cache_mode, config.cache.resync_period_seconds) == ("overreserve", 7.0)
    assert config.over_reserve_config().profile_names == frozenset({"topo-aware-scheduler"})


_NRTM = {"name": "NodeResourceTopologyMatch"}


def _ksc(profiles: list[object]) -> dict[str, object]:
    return {"kind": "KubeSchedulerConfiguration", "profiles": profiles}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([1], "must be a YAML/JSON object"),
        ({"scoringStrategy": {"type": "Random"}}, "invalid ScoringStrategyType"),
        ({"cacheResyncPeriodSeconds": "5"}, "must be a number"),
        ({"cache": {"resyncMethod": "Sometimes"}}, "cache.resyncMethod"),
        ({"schedulerNames": []}, "at least one"),
        ({"podInitialBackoffSeconds": 20}, "podInitialBackoffSeconds"),
        ({"kind": "KubeSchedulerConfiguration", "profiles": [{"schedulerName": "x"}]}, "no profile"),
        # issue 25 item 11: TypeError / OverflowError escaped; nan and 1e400 seconds were accepted
        (_ksc([{"pluginConfig": 1}]), r"profiles\[0\]\.pluginConfig must be a list"),
        (_ksc([{"pluginConfig": [1]}]), r"profiles\[0\]\.pluginConfig\[0\] must be an object"),
        (_ksc([{"schedulerName": 1, "pluginConfig": [_NRTM]}]), r"profiles\[0\]\.schedulerName must be a"),
        (
            _ksc([{"pluginConfig": [{**_NRTM, "args": {"cacheResyncPeriodSeconds": 10**400}}]}]),
            "cacheResyncPeriodSeconds",
        ),
        ({"cacheResyncPeriodSeconds": 10**400}, "cacheResyncPeriodSeconds must be a number of seconds within"),
        ({"podMaxBackoffSeconds": float("nan")}, "podMaxBackoffSeconds must be a number of seconds within"),
        ({"cacheResyncPeriodSeconds": float("inf")}, "cacheResyncPeriodSeconds must be a number of seconds within"),
        ({"numaScoreWeight": 10**400}, "numaScoreWeight must be an integer within"),
        ({"bindConcurrency": 10**9}, "bindConcurrency must be an integer within"),
        ({"scoringStrategy": {"resources": [{"name": "cpu", "weight": 10**400}]}}, "weight .* 'cpu' must be within"),
    ],
)
def test_config_errors_name_the_key(doc: object, message: str) -> None:
    with pytest.raises(SchedulerConfigError, match=message):
        config_from_document(doc)


def test_cache_mode_spellings() -> None:
    assert parse_cache_mode("Over-Reserve") == "overreserve"
    assert parse_cache_mode("discard_reserved") == "discard-reserved"
    with pytest.raises(SchedulerConfigError):
        parse_cache_mode("lru")
    with pytest.raises(SchedulerConfigError, match="unknown setting"):
        SchedulerConfig().with_overrides(color="blue")


def test_upstream_difference_switches_reach_the_over_reserve_cache() -> None:
    default = SchedulerConfig().over_reserve_config()
    switches = ("adopt_new_nrts", "keep_late_reservations", "recharge_uncovered", "match_without_terminal_pods")
    assert [getattr(default, name) for name in switches] == [True] * 4
    keys = ("adoptNewNRTs", "keepLateReservations", "rechargeUncovered", "matchWithoutTerminalPods")
    doc = {"cache": dict.fromkeys(keys, False)}
    upstream = config_from_document(doc).over_reserve_config()
    assert [getattr(upstream, name) for name in switches] == [False] * 4
    assert config_from_document(doc).describe()["upstreamDifferences"] == dict.fromkeys(keys, False)


def test_a_misspelt_key_is_refused_naming_its_path() -> None:
    with pytest.raises(SchedulerConfigError, match=r"^cache\.matchWithoutTerminalPod: unknown key"):
        config_from_document({"cache": {"matchWithoutTerminalPod": False}})
    with pytest.raises(SchedulerConfigError, match=r"^cacheResyncPeriodSecond: unknown key"):
        config_from_document({"cacheResyncPeriodSecond": 3})
    ksc = {
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "s",
                "pluginConfig": [
                    {
                        "name": "NodeResourceTopologyMatch",
                        "args": {"kind": "NodeResourceTopologyMatchArgs", "cache": {"informerMod": "Shared"}},
                    }
                ],
            }
        ],
    }
    with pytest.raises(
        SchedulerConfigError, match=r"^profiles\[0\]\.pluginConfig\[0\]\.args\.cache\.informerMod: unknown"
    ):
        config_from_document(ksc)
    # the names come from the profiles: a schedulerName among the args would be ignored, so it is refused
    ksc["profiles"][0]["pluginConfig"][0]["args"] = {"schedulerName": "other"}  # type: ignore[index]
    with pytest.raises(SchedulerConfigError, match=r"args\.schedulerName: unknown key"):
        config_from_document(ksc)


def test_upstream_difference_switch_must_be_a_boolean() -> None:
    with pytest.raises(SchedulerConfigError, match="rechargeUncovered must be true or false"):
        config_from_document({"cache": {"rechargeUncovered": "yes"}})


def test_percentage_of_nodes_to_score_is_a_scheduler_setting() -> None:
    """Default 100 (every node); plugin args or a KubeSchedulerConfiguration's top-level field set it."""
    assert SchedulerConfig().selection.percentage_of_nodes_to_score == 100
    assert config_from_document({"percentageOfNodesToScore": 0}).selection.percentage_of_nodes_to_score == 0
    doc = {
        "kind": "KubeSchedulerConfiguration",
        "percentageOfNodesToScore": 40,
        "profiles": [{"schedulerName": "s", "pluginConfig": [{"name": "NodeResourceTopologyMatch", "args": {}}]}],
    }
    assert config_from_document(doc).selection.percentage_of_nodes_to_score == 40
    with pytest.raises(SchedulerConfigError, match="percentageOfNodesToScore"):
        config_from_document({"percentageOfNodesToScore": 101})


def test_over_reserve_settings_are_defined_once_in_the_cache_config() -> None:
    """SchedulerConfig holds an OverReserveConfig instead of restating its fields; overrides by the
    cache's field names reach it, and a bad mode is a SchedulerConfigError naming the ``cache.*`` key."""
    from dataclasses import fields

    from numaplane.placement.caches.overreserve import OverReserveConfig

    restated = {f.name for f in fields(SchedulerConfig)} & {f.name for f in fields(OverReserveConfig)}
    assert restated == set()
    config = SchedulerConfig(scheduler_names=("a", "b")).with_overrides(
        resync_period_seconds=2.5, informer_mode="Shared", recharge_uncovered=False
    )
    cache = config.over_reserve_config()
    assert (cache.resync_period_seconds, cache.informer_mode, cache.recharge_uncovered) == (2.5, "Shared", False)
    assert cache.profile_names == frozenset({"a", "b"})
    with pytest.raises(SchedulerConfigError, match=r"cache\.resyncScope must be one of All, OnlyResources, not 'x'"):
        config_from_document({"cache": {"resyncScope": "x"}})


def test_the_same_pod_text_is_parsed_once_and_a_changed_one_again() -> None:
    """kube-scheduler sends a pod's filter and prioritize back to back: the second parse is the first's
    (immutable) Pod; any other text, even one byte apart, is parsed on its own."""
    pod = {"metadata": {"name": "memo", "namespace": "default", "uid": "u-memo"}, "spec": {"containers": []}}
    body = json.dumps({"Pod": pod, "NodeNames": ["n1"]}).encode()
    first = parse_extender_args(decode_body(body)).pod
    again = parse_extender_args(decode_body(json.dumps({"Pod": pod, "NodeNames": ["n2"]}).encode())).pod
    assert again is first
    pod["metadata"]["uid"] = "u-other"
    other = parse_extender_args(decode_body(json.dumps({"Pod": pod, "NodeNames": ["n1"]}).encode())).pod
    assert other is not first and other.uid == "u-other" and first.uid == "u-memo"


def test_a_small_pod_nested_too_deep_is_refused_after_decoding_with_the_same_reason() -> None:
    deep: Any = "x"
    for _ in range(MAX_JSON_DEPTH + 2):
        deep = {"a": deep}
    pod = {"metadata": {"name": "deep", "annotations": {}}, "spec": {"containers": []}, "extra": deep}
    with pytest.raises(ExtenderRequestError) as raised:
        parse_extender_args(decode_body(json.dumps({"Pod": pod, "NodeNames": ["n1"]}).encode()))
    assert raised.value.reason == f"Pod nests deeper than {MAX_JSON_DEPTH} levels"
