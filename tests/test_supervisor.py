"""The task supervisor: a failing child stops the daemon with one log line; stop and cancellation leave no task."""

from __future__ import annotations

import asyncio
import logging

import pytest

from numaplane.supervisor import Supervisor, TaskFailed


async def forever(started: list[str], name: str) -> None:
    started.append(name)
    await asyncio.Event().wait()


def ours() -> set[asyncio.Task[object]]:
    """Tasks of the running loop other than the test's own."""
    return {t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()}


async def test_stop_ends_wait_and_close_cancels_every_child() -> None:
    started: list[str] = []
    before = ours()
    async with Supervisor("daemon") as tasks:
        a = tasks.spawn(forever(started, "a"), "a")
        b = tasks.spawn(forever(started, "b"), "b")
        await asyncio.sleep(0)
        assert started == ["a", "b"] and tasks.running and tasks.dead() == {}
        tasks.stop()
        await tasks.wait()
    assert a.cancelled() and b.cancelled()
    assert tasks.dead() == {"a": "cancelled", "b": "cancelled"} and not tasks.running
    assert ours() == before


async def test_a_failing_child_stops_the_others_with_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    started: list[str] = []

    async def broken() -> None:
        await asyncio.sleep(0.01)
        raise OSError("disk gone")

    tasks = Supervisor("exporter")
    await tasks.start()
    other = tasks.spawn(forever(started, "loop"), "loop")
    tasks.spawn(broken(), "notify")
    with caplog.at_level(logging.ERROR, logger="numaplane.supervisor"), pytest.raises(TaskFailed) as failed:
        await tasks.wait()
    assert failed.value.task == "notify" and isinstance(failed.value.__cause__ or failed.value.error, OSError)
    assert "exporter: task 'notify' failed: OSError: disk gone" in str(failed.value)
    assert other.cancelled()
    (record,) = [r for r in caplog.records if "task_failed" in r.getMessage()]
    assert "daemon=exporter task=notify" in record.getMessage() and "disk gone" in record.getMessage()
    await tasks.close()  # after a failure close is quiet
    assert tasks.dead() == {"loop": "cancelled", "notify": "failed: OSError('disk gone')"}


async def test_a_child_that_returns_leaves_the_others_running() -> None:
    started: list[str] = []

    async def once() -> None:
        return None

    async with Supervisor("daemon") as tasks:
        tasks.spawn(once(), "once")
        loop = tasks.spawn(forever(started, "loop"), "loop")
        await asyncio.sleep(0.01)
        assert tasks.dead() == {"once": "returned"} and not loop.done()
    assert loop.cancelled()


async def test_cancelling_the_owner_leaves_no_task_behind() -> None:
    started: list[str] = []
    before = ours()

    async def daemon() -> None:
        async with Supervisor("daemon") as tasks:
            tasks.spawn(forever(started, "a"), "a")
            tasks.spawn(forever(started, "b"), "b")
            await tasks.wait()

    owner = asyncio.create_task(daemon())
    await asyncio.sleep(0.01)
    assert started == ["a", "b"]
    owner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await owner
    assert ours() == before


async def test_spawn_needs_an_open_group_and_unique_names() -> None:
    tasks = Supervisor("daemon")
    coro = asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="not running"):
        tasks.spawn(coro, "early")
    async with tasks:
        tasks.spawn(asyncio.sleep(1), "x")
        with pytest.raises(ValueError, match="already running"):
            tasks.spawn(asyncio.sleep(1), "x")
    with pytest.raises(RuntimeError, match="not running"):
        tasks.spawn(asyncio.sleep(0), "late")
