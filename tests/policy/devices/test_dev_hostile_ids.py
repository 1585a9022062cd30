"""Hostile device ids (issue 25 item 10): a digit run over 4,300 digits made ``int()`` in the sort key
raise, so every allocation of the resource failed on that node. The sort key never raises; the
config parser and the NodeResourcePolicy CRD bound the id's length."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numaplane.limits import MAX_DEVICE_ID_CHARS
from numaplane.operator.crds import node_resource_policy_crd
from numaplane.policy.config import parse_config
from numaplane.policy.devices import DevicePolicy, device_sort_key
from numaplane.policy.errors import PolicyConfigError
from numaplane.policy.hints import NUMAMask, TopologyHint
from numaplane.resources.pod import parse_pod

GPU = "example.com/gpu"
HUGE = "gpu" + "9" * 5000


def _int_key(device_id: str) -> tuple[tuple[object, ...], str]:
    """The order the key had before (digit runs through ``int()``), for ids where ``int()`` works."""
    parts = re.split(r"(\d+)", device_id)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), device_id


def test_a_digit_run_of_5000_digits_leaves_the_resource_allocatable() -> None:
    policy = DevicePolicy({GPU: [(HUGE, [0]), ("gpu1", [0]), ("gpu2", [0])]}, [0])
    pod = parse_pod(
        {
            "metadata": {"name": "p", "uid": "p"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {GPU: "3"}}}]},
        }
    )
    got = policy.allocate(pod, pod.containers[0], TopologyHint(NUMAMask.from_ids([0]), True))
    assert got == {GPU: ("gpu1", "gpu2", HUGE)}  # natural order: the huge number last


@settings(max_examples=300, deadline=None)
@given(st.lists(st.from_regex(r"[a-z]{0,3}([0-9]{1,6}[a-z-]{0,2}){0,3}", fullmatch=True), max_size=12))
def test_the_key_orders_like_int_where_int_works(ids: list[str]) -> None:
    assert sorted(ids, key=device_sort_key) == sorted(ids, key=_int_key)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=50), st.integers(0, 6000))
def test_the_key_never_raises(text: str, digits: int) -> None:
    ids = [text, text + "1" * digits, "0" * digits + text, "7"]
    keys = [device_sort_key(i) for i in ids]
    for a in keys:  # a total order: every pair compares, exactly one way
        for b in keys:
            assert (a < b) + (b < a) + (a == b) == 1
    assert device_sort_key(text + "1" * digits) >= device_sort_key(text) or not digits


def test_parse_config_refuses_a_device_id_over_the_bound_naming_it() -> None:
    doc = {"devices": {GPU: [{"id": "gpu0", "numa": [0]}, {"id": HUGE, "numa": [0]}]}}
    with pytest.raises(PolicyConfigError, match=rf"devices\.{re.escape(GPU)}\[1\]\.id must have 1 to 253 characters"):
        parse_config(doc)
    with pytest.raises(PolicyConfigError, match=r"\[0\]\.id must have 1 to"):
        parse_config({"devices": {GPU: [{"id": ""}]}})
    ok = parse_config({"devices": {GPU: [{"id": "g" * MAX_DEVICE_ID_CHARS}]}})
    assert ok.devices[GPU][0].id == "g" * MAX_DEVICE_ID_CHARS


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_parse_config_fuzz_device_ids(device_id: str) -> None:
    try:
        cfg = parse_config({"devices": {GPU: [{"id": device_id}]}})
    except PolicyConfigError as exc:
        assert "devices." in str(exc)
        assert not 0 < len(device_id) <= MAX_DEVICE_ID_CHARS
    else:
        assert cfg.devices[GPU][0].id == device_id and 0 < len(device_id) <= MAX_DEVICE_ID_CHARS


def test_the_crd_bounds_device_ids() -> None:
    spec = node_resource_policy_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    device = spec["properties"]["config"]["properties"]["devices"]["additionalProperties"]["items"]
    assert device["properties"]["id"]["maxLength"] == MAX_DEVICE_ID_CHARS
    assert device["properties"]["id"]["minLength"] == 1
