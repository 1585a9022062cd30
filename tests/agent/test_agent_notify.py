"""The agent touches the exporter's notify file after allocation changes (``--notify-file``)."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest
from agent_helpers import guaranteed, sandbox
from test_agent_nri import create, options, running_agent

from numaplane.agent.errors import AgentConfigError
from numaplane.agent.notify import ChangeNotifier
from numaplane.exporter.events import NotifyFileWatcher
from numaplane.exporter.options import NotifyBackend
from numaplane_harness.nrifake import FakeRuntime

pytestmark = pytest.mark.timeout(60)


async def test_touches_are_coalesced_per_loop_step_and_strictly_increasing(tmp_path: Path) -> None:
    path = tmp_path / "run" / "notify"
    results: list[bool] = []
    notifier = ChangeNotifier(path, on_result=results.append)
    notifier.prepare()
    assert path.is_file() and oct(path.parent.stat().st_mode & 0o777) == "0o750"
    stamps = [path.stat().st_mtime_ns]
    for _ in range(5):
        for _ in range(10):  # ten changes in one step: one touch, after the step
            notifier.notify()
        assert notifier.touches == len(stamps) - 1
        await asyncio.sleep(0)
        stamps.append(path.stat().st_mtime_ns)
    assert notifier.touches == 5 and results == [True] * 5
    # mtime always moves, even faster than the kernel's file-time clock ticks
    assert all(b > a for a, b in itertools.pairwise(stamps[1:]))


def test_a_removed_file_is_created_again_and_failures_are_counted(tmp_path: Path) -> None:
    path = tmp_path / "notify"
    results: list[bool] = []
    notifier = ChangeNotifier(path, on_result=results.append)
    notifier.prepare()
    path.unlink()
    notifier.notify()  # no running loop: touches at once
    assert path.is_file() and notifier.touches == 1
    blocker = tmp_path / "file"
    blocker.write_text("")
    broken = ChangeNotifier(blocker / "notify", on_result=results.append)  # its folder is a file
    assert not broken.touch() and not broken.touch()
    assert results == [True, False, False]


def test_a_path_that_is_not_a_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AgentConfigError, match="not a regular file"):
        ChangeNotifier(tmp_path).prepare()


@pytest.mark.parametrize("backend", [NotifyBackend.POLL, NotifyBackend.AUTO])
async def test_the_exporters_watcher_sees_every_allocation_change(short_tmp: Path, backend: NotifyBackend) -> None:
    notify = short_tmp / "run" / "notify"
    events: list[float] = []
    runtime = FakeRuntime()
    await runtime.listen(str(short_tmp / "nri.sock"))
    watcher = NotifyFileWatcher(notify, lambda: events.append(0.0), backend=backend, poll_seconds=0.01)
    task = asyncio.create_task(watcher.run())
    try:
        async with running_agent(options(short_tmp, notify_file=notify)) as agent:
            await asyncio.wait_for(watcher.started.wait(), 5)
            await runtime.wait_session(1)
            await agent.wait_ready()  # Synchronize is a change too
            for i in range(3):
                before = len(events)
                pod = sandbox(f"g{i}")
                await create(runtime, pod, guaranteed(pod, n=2))
                async with asyncio.timeout(5):
                    while len(events) == before:
                        await asyncio.sleep(0.01)
            touched = agent.metrics.registry.get_sample_value("numaplane_agent_notify_touches_total", {"result": "ok"})
            assert touched is not None and touched >= 4
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await runtime.close()


def test_the_command_line_passes_the_notify_file(tmp_path: Path) -> None:
    from numaplane.cli.agent import _options
    from numaplane.cli.agent import command as agent_command

    ctx = agent_command.make_context("agent", ["--notify-file", str(tmp_path / "n"), "--node-name", "n1"])
    assert _options(ctx.params).notify_file == tmp_path / "n"
    ctx = agent_command.make_context("agent", ["--node-name", "n1"])
    assert _options(ctx.params).notify_file is None
