"""The scheduler processes under the task supervisor: a failing task stops the process, stop leaves no task."""

from __future__ import annotations

import asyncio
import logging

import pytest

from numaplane.kube.memory import InMemoryKube
from numaplane.kube.port import Request, Response, Verb
from numaplane.kube.resources import NODE_RESOURCE_TOPOLOGY
from numaplane.scheduler.config import SchedulerConfig
from numaplane.scheduler.service import EXIT_OK, EXIT_TASK_FAILED, ExtenderService, SchedulerService


class BrokenNRTs(InMemoryKube):
    """Listing NRTs hits a bug (not an API error the informer retries)."""

    async def send(self, request: Request) -> Response:
        if request.verb is Verb.LIST and request.resource == NODE_RESOURCE_TOPOLOGY:
            raise RuntimeError("decoder bug")
        return await super().send(request)


def leftovers() -> set[asyncio.Task[object]]:
    return {t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()}


async def test_a_failing_task_stops_the_extender_with_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    before = leftovers()
    service = ExtenderService(BrokenNRTs(), SchedulerConfig(), address="127.0.0.1:0")
    with caplog.at_level(logging.ERROR, logger="numaplane.supervisor"):
        code = await asyncio.wait_for(service.run(), 10)
    assert code == EXIT_TASK_FAILED
    (line,) = [r.getMessage() for r in caplog.records if "task_failed" in r.getMessage()]
    assert "task=informer-noderesourcetopologies" in line and "decoder bug" in line
    assert leftovers() == before


@pytest.mark.parametrize("kind", ["extender", "standalone"])
async def test_stop_cancels_and_awaits_every_task(kind: str) -> None:
    before = leftovers()
    kube = InMemoryKube()
    service: ExtenderService | SchedulerService
    if kind == "extender":
        service = ExtenderService(kube, SchedulerConfig(), address="127.0.0.1:0")
    else:
        service = SchedulerService(kube, SchedulerConfig(), metrics_address=None, health_address="127.0.0.1:0")
    run = asyncio.create_task(service.run())
    await asyncio.wait_for(service.informers.wait_for_sync(), 10)
    healthy, details = service._liveness()
    assert healthy, details
    service.stop()
    assert await asyncio.wait_for(run, 10) == EXIT_OK
    assert leftovers() == before
