"""Refresh events: coalescing, the rate limit, and the notify-file watcher (inotify and polling)."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest
from exp_helpers import eventually

from numaplane.exporter.errors import ExporterConfigError
from numaplane.exporter.events import (
    Batch,
    EventGate,
    KubeletWatcher,
    NotifyFileWatcher,
    Trigger,
    inotify_available,
    periodic,
)
from numaplane.exporter.options import NotifyBackend


async def test_events_posted_before_a_scan_fold_into_one_batch() -> None:
    gate = EventGate()
    gate.post(Trigger.PERIODIC)
    gate.post(Trigger.REACTIVE)
    gate.post(Trigger.REACTIVE)
    batch = await gate.next()
    assert batch.triggers == {Trigger.PERIODIC, Trigger.REACTIVE}
    assert batch.trigger is Trigger.REACTIVE
    assert batch.update_kind == "reactive" and batch.refresh
    assert (gate.posted, gate.coalesced) == (3, 2)
    assert not gate.pending


async def test_rate_limit_delays_and_coalesces_never_drops() -> None:
    gate = EventGate(max_per_second=20.0)  # one scan per 50 ms
    gate.post(Trigger.REACTIVE)
    first = await gate.next()
    started = time.monotonic()
    for _ in range(5):
        gate.post(Trigger.REACTIVE)
    waiter = asyncio.create_task(gate.next())
    await asyncio.sleep(0.01)
    gate.post(Trigger.POD_PHASE)  # arrives while waiting for the token: folded in, not dropped
    second = await waiter
    assert time.monotonic() - started >= 0.04
    assert first.triggers == {Trigger.REACTIVE}
    assert second.triggers == {Trigger.REACTIVE, Trigger.POD_PHASE}
    assert not gate.pending


async def test_burst_allows_back_to_back_batches() -> None:
    gate = EventGate(max_per_second=1.0, burst=3)
    started = time.monotonic()
    for _ in range(3):
        gate.post(Trigger.REACTIVE)
        await gate.next()
    assert time.monotonic() - started < 0.5


async def stopped(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def test_batch_labels() -> None:
    timer = Batch(frozenset({Trigger.PERIODIC, Trigger.RETRY}), 0.0)
    assert timer.trigger is Trigger.RETRY and timer.update_kind == "periodic" and timer.refresh
    reactive = Batch(frozenset({Trigger.OBJECT}), 0.0)
    assert reactive.update_kind == "reactive" and not reactive.refresh


async def test_periodic_posts() -> None:
    gate = EventGate()
    task = asyncio.create_task(periodic(gate, 0.02))
    batch = await asyncio.wait_for(gate.next(), 1.0)
    await stopped(task)
    assert batch.triggers == {Trigger.PERIODIC}


@pytest.mark.parametrize("backend", [NotifyBackend.INOTIFY, NotifyBackend.POLL])
async def test_notify_file_touch_write_and_replace(tmp_path: Path, backend: NotifyBackend) -> None:
    if backend is NotifyBackend.INOTIFY and not inotify_available():
        pytest.skip("asyncinotify is not installed")
    path = tmp_path / "run" / "rte" / "notify"
    hits: list[float] = []
    watcher = NotifyFileWatcher(path, lambda: hits.append(time.monotonic()), backend=backend, poll_seconds=0.01)
    task = asyncio.create_task(watcher.run())
    await asyncio.wait_for(watcher.started.wait(), 2.0)
    assert watcher.backend == backend.value
    assert path.is_file() and oct(path.parent.stat().st_mode & 0o777) == "0o750"
    try:
        os.utime(path, ns=(10**9, 10**9))  # touch
        await eventually(lambda: hits, 2.0)
        count = len(hits)
        path.write_text("x")  # write
        await eventually(lambda: len(hits) > count, 2.0)
        count = len(hits)
        fresh = path.with_name("notify.tmp")
        fresh.write_text("y")
        fresh.replace(path)  # atomic replacement
        await eventually(lambda: len(hits) > count, 2.0)
        count = len(hits)
        (path.parent / "other").write_text("z")  # other files in the folder do not count
        await asyncio.sleep(0.1)
        assert len(hits) == count
    finally:
        await stopped(task)


def test_notify_path_must_be_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    watcher = NotifyFileWatcher(tmp_path / "dir", lambda: None)
    with pytest.raises(ExporterConfigError, match="not a regular file"):
        watcher.prepare()


async def test_without_asyncinotify_auto_falls_back_to_polling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "asyncinotify", None)  # import fails as if not installed
    assert not inotify_available()
    hits: list[int] = []
    watcher = NotifyFileWatcher(tmp_path / "notify", lambda: hits.append(1), poll_seconds=0.01)
    task = asyncio.create_task(watcher.run())
    try:
        await asyncio.wait_for(watcher.started.wait(), 2.0)
        assert watcher.backend == "poll"
        (tmp_path / "notify").write_text("x")
        await eventually(lambda: hits, 2.0)
    finally:
        await stopped(task)
    forced = NotifyFileWatcher(tmp_path / "notify", lambda: None, backend=NotifyBackend.INOTIFY)
    with pytest.raises(ExporterConfigError, match="inotify unavailable"):
        await forced.run()


def _kubelet_write(path: Path, text: str) -> None:
    """How the kubelet's checkpoint manager writes: a temporary file renamed over the checkpoint."""
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f".{path.name}.tmp")
    scratch.write_text(text)
    scratch.replace(path)


@pytest.mark.parametrize("backend", [NotifyBackend.INOTIFY, NotifyBackend.POLL])
async def test_kubelet_checkpoints_and_config_post_their_triggers(tmp_path: Path, backend: NotifyBackend) -> None:
    if backend is NotifyBackend.INOTIFY and not inotify_available():
        pytest.skip("asyncinotify is not installed")
    root = tmp_path / "kubelet"
    root.mkdir()
    config = tmp_path / "etc" / "config.yaml"
    _kubelet_write(config, "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n")
    gate = EventGate()
    watcher = KubeletWatcher(gate, state_dir=root, config_file=config, backend=backend, poll_seconds=0.01)
    task = asyncio.create_task(watcher.run())
    try:
        await asyncio.wait_for(watcher.started.wait(), 2.0)
        assert watcher.backend == backend.value
        for name in ("cpu_manager_state", "memory_manager_state"):
            _kubelet_write(root / name, "{}")
            batch = await asyncio.wait_for(gate.next(), 2.0)
            assert batch.triggers == {Trigger.KUBELET_STATE} and not batch.refresh
        (root / "cpu_manager_state").unlink()  # the kubelet restarted with another policy
        assert (await asyncio.wait_for(gate.next(), 2.0)).triggers == {Trigger.KUBELET_STATE}
        _kubelet_write(
            config,
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ntopologyManagerPolicy: restricted\n",
        )
        batch = await asyncio.wait_for(gate.next(), 2.0)
        assert Trigger.KUBELET_CONFIG in batch.triggers and batch.refresh  # the config is re-read
        (root / "unrelated").write_text("x")  # other files of the kubelet's folder do not count
        await asyncio.sleep(0.1)
        assert not gate.pending
    finally:
        await stopped(task)


async def test_a_lost_inotify_event_is_caught_by_the_bounded_check(tmp_path: Path) -> None:
    """The device manager's folder does not exist when the watch starts (no inotify watch can be set
    on it): its checkpoint appearing later is still seen, within the check interval."""
    if not inotify_available():
        pytest.skip("asyncinotify is not installed")
    root = tmp_path / "kubelet"
    root.mkdir()
    gate = EventGate()
    watcher = KubeletWatcher(gate, state_dir=root, config_file=None, check_seconds=0.05)
    task = asyncio.create_task(watcher.run())
    try:
        await asyncio.wait_for(watcher.started.wait(), 2.0)
        assert watcher.backend == "inotify"
        _kubelet_write(root / "device-plugins" / "kubelet_internal_checkpoint", "{}")
        started = time.monotonic()
        batch = await asyncio.wait_for(gate.next(), 2.0)
        assert batch.triggers == {Trigger.KUBELET_STATE}
        assert time.monotonic() - started < 1.0
    finally:
        await stopped(task)


def test_event_modes_need_an_event_source_and_the_state_folder_belongs_to_kubelet_mode(tmp_path: Path) -> None:
    from numaplane.exporter.options import ExporterOptions, RefreshMode

    with pytest.raises(ExporterConfigError, match="needs an event source"):
        ExporterOptions(node_name="n", kubelet_config_file=tmp_path / "c", refresh_mode=RefreshMode.EVENTS)
    with pytest.raises(ExporterConfigError, match="kubelet mode only"):
        ExporterOptions(
            node_name="n",
            topology_manager_policy="none",
            topology_manager_scope="container",
            refresh_mode=RefreshMode.EVENTS,
            kubelet_state_dir=tmp_path,
        )
    ok = ExporterOptions(
        node_name="n", kubelet_config_file=tmp_path / "c", refresh_mode=RefreshMode.EVENTS, kubelet_state_dir=tmp_path
    )
    assert ok.notify_file is None
