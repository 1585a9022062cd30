"""Bounded work and file safety (issue 15, items 15 and 16)."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from numaplane.grpcapi.podresources.server import PodResourcesServer, StaticProvider
from numaplane.limits import MAX_CPUSET_CHARS, MAX_WORKLOAD_PODS
from numaplane.sim.errors import WorkloadError
from numaplane.sim.workload import parse_workload
from numaplane.topology.cpuset import CPUSet
from numaplane.topology.errors import CPUSetParseError

REPO = Path(__file__).resolve().parents[2]


def test_a_huge_cpuset_is_refused_at_once() -> None:
    text = ",".join(str(i % 8192) for i in range(800_000))  # ~3.9 MiB
    started = time.perf_counter()
    with pytest.raises(CPUSetParseError) as info:
        CPUSet.parse(text)
    assert time.perf_counter() - started < 0.05
    assert len(str(info.value)) < 300


def test_the_largest_allowed_cpuset_parses_fast() -> None:
    ids, length, cpu = [], 0, 65535
    while length + len(str(cpu)) + 1 <= MAX_CPUSET_CHARS:
        ids.append(str(cpu))
        length += len(str(cpu)) + 1
        cpu -= 2
    started = time.perf_counter()
    CPUSet.parse(",".join(ids))
    assert time.perf_counter() - started < 0.5


@pytest.mark.parametrize("count", [10**9, 10**5000, MAX_WORKLOAD_PODS + 1], ids=["1e9", "1e5000", "max+1"])
def test_a_huge_workload_count_is_a_workload_error(count: int) -> None:
    started = time.perf_counter()
    with pytest.raises(WorkloadError, match="at most"):
        parse_workload({"pods": [{"name": "a", "count": count, "spec": {"containers": [{"name": "c"}]}}]})
    assert time.perf_counter() - started < 0.1


def test_many_entries_are_capped_together() -> None:
    entry = {"name": "a", "count": MAX_WORKLOAD_PODS // 2 + 1, "spec": {"containers": [{"name": "c"}]}}
    with pytest.raises(WorkloadError, match="more than"):
        parse_workload({"pods": [entry, entry]})


async def test_the_podresources_socket_has_its_mode_from_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "chmod", lambda *a, **k: None)  # no fix-up afterwards: the bind itself must do it
    old = os.umask(0o022)
    try:
        server = PodResourcesServer(StaticProvider(), tmp_path / "pr.sock", socket_mode=0o600)
        await server.start()
        try:
            assert stat.S_IMODE((tmp_path / "pr.sock").stat().st_mode) & 0o077 == 0
        finally:
            await server.stop()
    finally:
        os.umask(old)


def test_the_checkpoint_temp_file_is_never_written_through_a_symlink(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import itertools

    from numaplane.agent import checkpoint

    monkeypatch.setattr(checkpoint, "_WRITES", itertools.count())  # the names the next writes will use
    store = checkpoint.CheckpointStore(tmp_path / "agent_state.json", checkpoint.CheckpointIdentity("n", "t"))
    victim = tmp_path / "victim"
    victim.write_text("keep")
    for i in range(64):
        (tmp_path / f".agent_state.json.tmp-{os.getpid()}-{i}").symlink_to(victim)
    with pytest.raises(FileExistsError):
        for _ in range(64):
            store.save({"a": 1})
    assert victim.read_text() == "keep"


def test_the_containerfile_pins_the_base_image_and_installs_from_a_hashed_lock() -> None:
    text = (REPO / "Containerfile").read_text()
    assert "@sha256:" in text and "--require-hashes" in text
    lock = REPO / "image" / "requirements.lock"  # the one the test suite builds its image from
    assert lock.exists()
    lines = [line for line in lock.read_text().splitlines() if line and not line.startswith(("#", " "))]
    assert lines and all("==" in line for line in lines)
    assert "--hash=sha256:" in lock.read_text()
