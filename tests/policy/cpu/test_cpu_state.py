"""CPU state: the kubelet v2 checkpoint shape (real captures), round trips, snapshot/restore, copies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from numaplane.policy.cpu_state import CPUState
from numaplane.policy.errors import StateError
from numaplane.topology.cpuset import CPUSet


def _captures(shared: Path) -> list[Path]:
    return sorted((shared / "wire" / "captures" / "kubelet-state").glob("cpu_manager_state.*.json"))


def test_real_checkpoints_round_trip_byte_for_byte(shared_dir: Path) -> None:
    files = _captures(shared_dir)
    assert len(files) == 4
    for path in files:
        raw = path.read_text(encoding="utf-8")
        doc = json.loads(raw)
        state = CPUState.from_dict(doc)
        again = state.to_dict() | {"checksum": doc["checksum"]}
        assert json.dumps(again, separators=(",", ":")) == raw


def test_checkpoint_contents(shared_dir: Path) -> None:
    path = next(p for p in _captures(shared_dir) if "with-guaranteed-pod-gu-ncc-false" in p.name)
    state = CPUState.from_dict(json.loads(path.read_text(encoding="utf-8")))
    assert state.default == CPUSet.parse("0")
    assert state.assignments == {"f64107c1-6aa5-4b7e-a972-445989e40267": {"main": CPUSet.parse("1")}}


def test_entries_are_sorted_and_omitted_when_empty() -> None:
    state = CPUState(default=CPUSet.parse("0-3"))
    assert state.to_dict() == {"policyName": "static", "defaultCpuSet": "0-3"}
    state.set("b", "y", CPUSet.parse("5"))
    state.set("a", "z", CPUSet.parse("4"))
    state.set("a", "x", CPUSet.parse("6-7"))
    assert json.dumps(state.to_dict()) == (
        '{"policyName": "static", "defaultCpuSet": "0-3", "entries": {"a": {"x": "6-7", "z": "4"}, "b": {"y": "5"}}}'
    )


def test_snapshot_restore_keeps_reuse_bookkeeping_and_copy_is_independent() -> None:
    state = CPUState(default=CPUSet.parse("2-7"))
    state.set("p", "init", CPUSet.parse("0-1"))
    state.set_reuse("p", CPUSet.parse("0-1"))
    assert CPUState.restore(state.snapshot()) == state
    assert CPUState.from_dict(state.to_dict()) != state  # the checkpoint alone drops the reuse set
    clone = state.copy()
    clone.set("p", "app", CPUSet.parse("0"))
    clone.delete("p", "init")
    assert state.get("p", "init") == CPUSet.parse("0-1") and state.get("p", "app") is None


def test_delete_drops_empty_pod_and_ignores_unknown() -> None:
    state = CPUState()
    state.set("p", "c", CPUSet.parse("1"))
    state.delete("p", "other")
    state.delete("q", "c")
    state.delete("p", "c")
    assert state.assignments == {}


@pytest.mark.parametrize(
    "doc",
    [
        {"policyName": "static", "defaultCpuSet": "0-3", "entries": {"containerid": "1"}},  # v1
        {"policyName": "static", "defaultCpuSet": "3-1"},
        {"policyName": 7, "defaultCpuSet": ""},
        {"policyName": "static", "defaultCpuSet": 5},
    ],
)
def test_bad_checkpoints_raise_state_error(doc: dict[str, object]) -> None:
    with pytest.raises(StateError):
        CPUState.from_dict(doc)
