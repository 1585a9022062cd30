"""The one controller worker loop (``numaplane.kube.worker.run_worker``) over a real WorkQueue."""

from __future__ import annotations

import asyncio

import pytest

from numaplane.kube.clock import FakeClock
from numaplane.kube.worker import run_worker
from numaplane.kube.workqueue import WorkQueue


async def test_every_key_is_handled_and_done_errors_go_to_on_error_and_shutdown_ends_the_loop() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=FakeClock())
    handled: list[str] = []
    failed: list[tuple[str, str]] = []
    all_in = asyncio.Event()

    async def handle(key: str) -> None:
        handled.append(key)
        if len(handled) == 3:
            all_in.set()
        if key == "b":
            raise RuntimeError("b is broken")

    def on_error(key: str, exc: Exception) -> None:
        failed.append((key, str(exc)))

    for key in ("a", "b", "c"):
        queue.add(key)
    worker = asyncio.create_task(run_worker(queue, handle, on_error))
    await asyncio.wait_for(all_in.wait(), 5)
    queue.shutdown()
    await asyncio.wait_for(worker, 5)
    assert handled == ["a", "b", "c"]
    assert failed == [("b", "b is broken")]
    assert queue.processing == frozenset()  # every key was marked done, the failed one too


async def test_a_cancelled_handler_still_marks_its_key_done() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=FakeClock())
    started = asyncio.Event()

    async def handle(key: str) -> None:
        started.set()
        await asyncio.Event().wait()

    queue.add("a")
    worker = asyncio.create_task(run_worker(queue, handle, lambda key, exc: None))
    await asyncio.wait_for(started.wait(), 5)
    assert queue.processing == {"a"}
    worker.cancel()
    with pytest.raises(asyncio.CancelledError):
        await worker
    assert queue.processing == frozenset()
