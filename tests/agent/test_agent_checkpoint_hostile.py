"""Hostile checkpoints (issue 15, items 7 and 8): set aside and rebuilt, never a crash at start;
restore validates the whole state against the machine; a background task that dies is logged,
counted and restarted."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import state_helpers as ev
from agent_helpers import guaranteed, sandbox
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_agent_nri import TOPOLOGY, create, options, running_agent

from numaplane.agent.background import BackgroundLoop
from numaplane.agent.checkpoint import CheckpointIdentity, CheckpointStore, decode, encode, topology_digest
from numaplane.agent.errors import CheckpointCorrupted, CheckpointError
from numaplane.agent.state import NodeAgentState
from numaplane.policy.manager import ResourceManager
from numaplane_harness.nrifake import FakeRuntime

ME = CheckpointIdentity("node-a", topology_digest(TOPOLOGY))
CONFIG = {"cpuManager": {"reservedCPUs": "0"}}


def _snapshot() -> dict[str, Any]:
    node_state = NodeAgentState(ResourceManager(TOPOLOGY, CONFIG))
    for name in ("a", "b"):
        pod = ev.sandbox(name)
        node_state.create(pod, ev.guaranteed(pod, n=2))
    return node_state.snapshot()


def _damaged(change: str) -> dict[str, Any]:
    snap = _snapshot()
    manager = snap["manager"]
    if change == "plugins-string":
        manager["plugins"] = "oops"
    elif change == "admission-without-pod":
        manager["pods"].pop(next(iter(manager["pods"])))
    elif change == "numa-2**32":
        adm = next(iter(manager["admissions"].values()))
        adm["containers"][0]["allocations"][0]["numa"] = [2**32]
    elif change == "int-device-id":
        manager["plugins"]["devices"]["devices"] = {"example.com/gpu": {"7": [0]}}
        manager["plugins"]["devices"]["podDevices"] = {"x": {"main": {"example.com/gpu": [7]}}}
    elif change == "int-device-id-in-reuse":  # issue 25 item 3: TypeError in device_sort_key
        first = next(iter(manager["admissions"]))
        manager["plugins"]["devices"]["reuse"] = {first: {"example.com/gpu": [7]}}
    elif change == "cpu-the-machine-lacks":  # issue 25 item 3: KeyError: 19 in policy/builtin.py
        uid = next(iter(manager["admissions"]))
        manager["plugins"]["cpu"]["entries"][uid]["main"] = "1,19"
        manager["admissions"][uid]["containers"][0]["allocations"][0]["cpus"] = "1,19"
        snap["containers"][0]["exclusive"] = snap["containers"][0]["applied"] = "1,19"
    elif change == "shared-cpu-the-machine-lacks":
        manager["plugins"]["cpu"]["defaultCpuSet"] += ",19"
    elif change == "cpu-2**40":
        manager["plugins"]["cpu"]["defaultCpuSet"] += f",{2**40}"
    return snap


DAMAGE = [
    "plugins-string",
    "admission-without-pod",
    "numa-2**32",
    "int-device-id",
    "int-device-id-in-reuse",
    "cpu-the-machine-lacks",
    "shared-cpu-the-machine-lacks",
    "cpu-2**40",
]


@pytest.mark.parametrize("change", DAMAGE)
def test_restore_refuses_an_inconsistent_checkpoint_quickly(change: str) -> None:
    node_state = NodeAgentState(ResourceManager(TOPOLOGY, CONFIG))
    started = time.perf_counter()
    with pytest.raises(CheckpointCorrupted):
        node_state.restore(_damaged(change))
    assert time.perf_counter() - started < 2
    assert node_state.records == {}


def test_deeply_nested_checkpoint_is_corrupted_not_a_crash() -> None:
    raw = encode({"manager": {"version": 1}}, ME).replace(b'{"version":1}', b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(CheckpointCorrupted):
        decode(raw, ME)
    nested: Any = 1
    for _ in range(500):
        nested = {"a": nested}
    with pytest.raises(CheckpointCorrupted):
        decode(encode({"manager": nested}, ME), ME)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_fuzz_decode_raises_only_checkpoint_errors(raw: bytes) -> None:
    with contextlib.suppress(CheckpointError):
        decode(raw, ME)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)
_BASE = _snapshot()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 10_000), _JSON), min_size=1, max_size=3))
def test_fuzz_restore_raises_only_checkpoint_corrupted(edits: list[tuple[int, Any]]) -> None:
    snap = copy.deepcopy(_BASE)
    for where, value in edits:
        containers: list[Any] = []
        stack: list[Any] = [snap]
        while stack:  # every (container, key) of the snapshot, in a stable order
            item = stack.pop()
            if isinstance(item, dict):
                containers.extend((item, k) for k in sorted(item))
                stack.extend(item[k] for k in sorted(item, reverse=True))
            elif isinstance(item, list):
                containers.extend((item, i) for i in range(len(item)))
                stack.extend(reversed(item))
        parent, key = containers[where % len(containers)]
        parent[key] = value
    node_state = NodeAgentState(ResourceManager(TOPOLOGY, CONFIG))
    try:
        node_state.restore(snap)
    except CheckpointCorrupted:
        return
    node_state.pod_resources()
    encode(node_state.snapshot(), ME)


@pytest.mark.parametrize(
    "change",
    [
        "nested",
        "plugins-string",
        "admission-without-pod",
        "numa-2**32",
        "int-device-id-in-reuse",
        "cpu-the-machine-lacks",
        "shared-cpu-the-machine-lacks",
    ],
)
async def test_the_agent_sets_a_bad_checkpoint_aside_and_rebuilds(short_tmp: Path, change: str) -> None:
    opts = options(short_tmp)
    state = opts.state_dir / "agent_state.json"
    state.parent.mkdir(parents=True)
    store = CheckpointStore(state, ME)
    if change == "nested":
        store.write_bytes(
            encode({"manager": {"version": 1}}, ME).replace(b'{"version":1}', b"[" * 50_000 + b"]" * 50_000)
        )
    else:
        store.save(_damaged(change))
    runtime = FakeRuntime()
    await runtime.listen(opts.nri_socket)
    try:
        async with running_agent(opts) as agent:
            await runtime.wait_session(1)
            await agent.wait_ready()
            assert agent.checkpoint_status == "corrupted" and agent.quarantined is not None
            pod = sandbox("c")
            assert (await create(runtime, pod, guaranteed(pod, n=2))).adjust.linux.resources.cpu.cpus == "1,9"
            await agent.writer.flush()
        assert os.path.exists(agent.quarantined)
        assert CheckpointStore(state, ME).load() is not None  # rebuilt and saved
    finally:
        await runtime.close()


async def test_a_background_task_that_dies_is_counted_and_restarted() -> None:
    crashed: list[str] = []

    class Flaky(BackgroundLoop):
        task_name = "flaky"
        restart_seconds = 0.01
        runs = 0

        async def _run(self) -> None:
            self.runs += 1
            if self.runs < 3:
                raise TypeError("boom")
            await asyncio.sleep(3600)

    loop = Flaky()
    loop.on_crash = crashed.append
    loop.start()
    for _ in range(200):
        if loop.runs >= 3:
            break
        await asyncio.sleep(0.01)
    assert loop.runs == 3 and crashed == ["flaky", "flaky"] and loop.crashes == 2
    await loop.stop()


def test_a_checkpoint_that_cannot_be_moved_aside_does_not_stop_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 25 item 3: every checkpoint problem is handled; a read-only or busy state folder made the
    quarantine's rename raise out of the agent's start (a crash loop)."""
    store = CheckpointStore(tmp_path / "agent_state.json", ME)
    store.save(_damaged("cpu-the-machine-lacks"))

    def refuse(src: object, dst: object) -> None:
        raise OSError(30, "Read-only file system", str(src))

    monkeypatch.setattr("numaplane.agent.checkpoint.os.replace", refuse)
    assert store.quarantine(CheckpointCorrupted("inconsistent agent state"), datetime.now(UTC)) is None
    assert store.path.exists()  # left in place: the next (atomic) write replaces it
