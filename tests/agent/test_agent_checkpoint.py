"""The checkpoint file: atomic writes, checksums, corrupted / truncated / foreign files, background writer."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import state_helpers as ev
from agent_helpers import guaranteed, sandbox
from test_agent_nri import TOPOLOGY, create, options, running_agent

from numaplane.agent.checkpoint import (
    FORMAT,
    CheckpointIdentity,
    CheckpointStore,
    CheckpointWriter,
    decode,
    encode,
    topology_digest,
)
from numaplane.agent.errors import CheckpointCorrupted, CheckpointForeign
from numaplane.agent.state import NodeAgentState
from numaplane.policy.manager import ResourceManager
from numaplane.topology.model import synthetic
from numaplane_harness.nrifake import FakeRuntime

ME = CheckpointIdentity("node-a", topology_digest(TOPOLOGY))
DATA = {"manager": {"version": 1}, "containers": [{"id": "c1", "podUID": "u", "name": "main"}]}


def sample() -> bytes:
    return encode(DATA, ME)


def test_round_trip_and_atomic_write(tmp_path: Path) -> None:
    assert decode(sample(), ME) == DATA
    store = CheckpointStore(tmp_path / "state" / "agent_state.json", ME)
    assert store.load() is None
    size = store.save(DATA)
    assert store.load() == DATA and size == store.path.stat().st_size
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert sorted(p.name for p in store.path.parent.iterdir()) == ["agent_state.json"]  # no temp file left
    store.save({**DATA, "containers": []})
    assert store.load() == {**DATA, "containers": []}
    # a crash between write and rename leaves a temp file: removed at the next start, the old file intact
    leftover = store.path.with_name(f".{store.path.name}.tmp-12345")
    leftover.write_bytes(b"half a checkpoi")
    assert store.remove_stale_temps() == [leftover] and store.load() == {**DATA, "containers": []}


def _reencoded(change: dict[str, Any]) -> bytes:
    """A file whose header fields were changed and whose checksum was recomputed (intact, but not ours)."""
    doc = json.loads(sample())
    doc.update(change)
    body = {k: doc[k] for k in ("format", "version", "node", "topology", "data")}
    import hashlib

    doc["checksum"] = (
        "sha256:" + hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    )
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    ("damage", "error"),
    [
        (lambda raw: b"", CheckpointCorrupted),
        (lambda raw: raw[:1], CheckpointCorrupted),
        (lambda raw: raw[: len(raw) // 2], CheckpointCorrupted),
        (lambda raw: raw[:-3], CheckpointCorrupted),
        (lambda raw: raw.replace(b'"c1"', b'"c2"'), CheckpointCorrupted),  # one changed value
        (lambda raw: raw[:-1] + b" garbage", CheckpointCorrupted),
        (lambda raw: b"\xff\xfe\x00\x01", CheckpointCorrupted),
        (lambda raw: b"[1, 2, 3]", CheckpointCorrupted),
        (
            lambda raw: json.dumps({k: v for k, v in json.loads(raw).items() if k != "checksum"}).encode(),
            CheckpointCorrupted,
        ),
        (lambda raw: b'{"policyName":"static","defaultCpuSet":"0-1","checksum":1636926438}', CheckpointForeign),
        (lambda raw: _reencoded({"version": 2}), CheckpointForeign),
        (lambda raw: _reencoded({"node": "node-b"}), CheckpointForeign),
        (lambda raw: _reencoded({"topology": "sha256:0"}), CheckpointForeign),
    ],
)
def test_damaged_and_foreign_files_are_classified(damage: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        decode(damage(sample()), ME)


def test_kubelet_checkpoints_are_foreign(shared_dir: Path) -> None:
    for path in sorted((shared_dir / "wire" / "captures" / "kubelet-state").iterdir()):
        with pytest.raises(CheckpointForeign):
            decode(path.read_bytes(), ME)


def test_topology_digest_tells_machines_apart() -> None:
    assert topology_digest(TOPOLOGY) == topology_digest(synthetic(sockets=2, cores_per_numa=4, threads_per_core=2))
    assert topology_digest(TOPOLOGY) != topology_digest(synthetic(sockets=2, cores_per_numa=4, threads_per_core=1))
    assert FORMAT in sample().decode()


NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_quarantine_keeps_every_bad_file(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "agent_state.json", ME)
    moved = []
    for _ in range(3):
        store.path.write_bytes(b"junk")
        moved.append(store.quarantine(CheckpointCorrupted("x"), NOW))
    assert all(p is not None and p.exists() for p in moved) and len(set(moved)) == 3
    # named by the time passed in (the agent's clock): the first as is, the others numbered
    assert sorted(p.name for p in moved if p is not None) == [
        "agent_state.json.corrupted-20260102T030405Z",
        "agent_state.json.corrupted-20260102T030405Z.2",
        "agent_state.json.corrupted-20260102T030405Z.3",
    ]
    assert not store.path.exists() and store.quarantine(CheckpointForeign("y"), NOW) is None


async def test_writer_coalesces_and_survives_write_errors(tmp_path: Path) -> None:
    current = [0]
    results: list[bool] = []

    async def source() -> tuple[int, dict[str, Any]]:
        return current[0], {"generation": current[0]}

    store = CheckpointStore(tmp_path / "agent_state.json", ME)
    writer = CheckpointWriter(
        store, source, min_interval_seconds=0.05, retry_seconds=0.05, on_result=lambda ok, _s: results.append(ok)
    )
    writer.start()
    try:
        for generation in range(1, 50):
            current[0] = generation
            writer.mark_dirty()
            await asyncio.sleep(0.001)
        async with asyncio.timeout(5):
            while store.load() != {"generation": 49}:
                await asyncio.sleep(0.01)
        assert 1 <= writer.writes < 20
        assert await writer.flush() and writer.writes < 20  # same generation: nothing written
        # the folder becomes unusable: failures are reported, the writer keeps going
        blocked = CheckpointStore(tmp_path / "file" / "agent_state.json", ME)
        (tmp_path / "file").write_text("not a folder")
        writer.store = blocked
        current[0] = 50
        assert not await writer.flush() and results[-1] is False
        writer.store = store
        writer.mark_dirty()
        async with asyncio.timeout(5):
            while store.load() != {"generation": 50}:
                await asyncio.sleep(0.01)
    finally:
        await writer.stop()


async def test_an_intact_but_inconsistent_checkpoint_is_rebuilt(short_tmp: Path) -> None:
    """A file with a valid checksum whose content holds a CPU twice: refused at restore, moved aside."""
    opts = options(short_tmp)
    node_state = NodeAgentState(ResourceManager(TOPOLOGY, {"cpuManager": {"reservedCPUs": "0"}}))
    for name in ("a", "b"):
        pod = ev.sandbox(name)
        node_state.create(pod, ev.guaranteed(pod, n=2))
    snap = node_state.snapshot()
    snap["containers"][1]["exclusive"] = snap["containers"][0]["exclusive"]
    state = opts.state_dir / "agent_state.json"
    state.parent.mkdir(parents=True)
    CheckpointStore(state, CheckpointIdentity("node-a", topology_digest(TOPOLOGY))).save(snap)
    runtime = FakeRuntime()
    await runtime.listen(opts.nri_socket)
    try:
        async with running_agent(opts) as agent:
            await runtime.wait_session(1)
            await agent.wait_ready()
            assert agent.checkpoint_status == "corrupted" and agent.quarantined is not None
            assert agent.state is not None and agent.state.records == {}
            pod = sandbox("c")
            assert (await create(runtime, pod, guaranteed(pod, n=2))).adjust.linux.resources.cpu.cpus == "1,9"
        assert os.path.exists(agent.quarantined)
    finally:
        await runtime.close()
