"""Leader election: acquire, renew, crash handover after the lease duration, release, losing the lease."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

import pytest
from kube_helpers import eventually

from numaplane.kube.clock import FakeClock
from numaplane.kube.errors import Unavailable
from numaplane.kube.leader import LeaderElectionConfig, LeaderElector
from numaplane.kube.memory import InMemoryKube
from numaplane.kube.port import LEASE, JsonObj, KubePort
from numaplane.kube.resources import Resource
from numaplane.supervisor import TaskFailed
from numaplane.testing.fakeapi import FakeApiServer


def config(identity: str, **kwargs: Any) -> LeaderElectionConfig:
    return LeaderElectionConfig("numaplane", "kube-system", identity, jitter_factor=1.0, **kwargs)


class Flaky:
    """A port whose lease writes fail while ``broken`` is set (one candidate's network goes away)."""

    def __init__(self, inner: KubePort) -> None:
        self.inner = inner
        self.broken = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def get(self, res: Resource, name: str, *, namespace: str | None = None) -> JsonObj:
        if self.broken:
            raise Unavailable("network down")
        return await self.inner.get(res, name, namespace=namespace)

    async def replace(self, res: Resource, obj: Mapping[str, Any], *, field_manager: str | None = None) -> JsonObj:
        if self.broken:
            raise Unavailable("network down")
        return await self.inner.replace(res, obj, field_manager=field_manager)


class Candidate:
    def __init__(self, kube: Any, identity: str, clock: FakeClock | None = None, **kwargs: Any) -> None:
        self.log: list[str] = []
        self.leading = asyncio.Event()

        async def lead() -> None:
            self.log.append("started")
            self.leading.set()
            await asyncio.Event().wait()

        self.elector = LeaderElector(
            kube,
            config(identity, **kwargs),
            clock=clock,
            on_started_leading=lead,
            on_stopped_leading=lambda: self.log.append("stopped"),
            on_new_leader=lambda who: self.log.append(f"leader={who}"),
        )
        self.task = asyncio.create_task(self.elector.run())

    async def cancel(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


async def holder(kube: KubePort) -> str:
    lease = await kube.get(LEASE, "numaplane", namespace="kube-system")
    return str(lease["spec"].get("holderIdentity") or "")


def test_config_validation() -> None:
    with pytest.raises(ValueError):
        LeaderElectionConfig("l", "ns", "me", lease_duration_seconds=5, renew_deadline_seconds=10)
    with pytest.raises(ValueError):
        LeaderElectionConfig("l", "ns", "me", renew_deadline_seconds=1, retry_period_seconds=2)
    with pytest.raises(ValueError):
        LeaderElectionConfig("l", "ns", "")


async def test_crash_handover_waits_for_the_lease_duration() -> None:
    clock = FakeClock()
    kube = InMemoryKube(clock=clock)
    a = Candidate(kube, "a", clock, release_on_cancel=False)
    await clock.tick(0)
    assert a.elector.is_leader and a.log == ["leader=a", "started"]
    b = Candidate(kube, "b", clock)
    await clock.tick(30)  # a keeps renewing; b keeps waiting
    assert a.elector.is_leader and not b.elector.is_leader
    assert b.elector.leader == "a"
    lease = await kube.get(LEASE, "numaplane", namespace="kube-system")
    assert lease["spec"]["leaseDurationSeconds"] == 15 and lease["spec"]["leaseTransitions"] == 0

    await a.cancel()  # crash: no release, the lease just stops being renewed
    crashed_at = clock.monotonic()
    assert await holder(kube) == "a"
    await clock.tick(14)
    assert not b.elector.is_leader
    await clock.tick(4)  # > 15 s after b last saw the record change (+ one retry period)
    assert b.elector.is_leader
    assert await holder(kube) == "b"
    assert clock.monotonic() - crashed_at <= 15 + 2 + 1
    assert b.log[-2:] == ["leader=b", "started"]
    lease = await kube.get(LEASE, "numaplane", namespace="kube-system")
    assert lease["spec"]["leaseTransitions"] == 1
    await b.cancel()
    assert b.log[-1] == "stopped"


async def test_release_hands_over_within_one_retry_period() -> None:
    clock = FakeClock()
    kube = InMemoryKube(clock=clock)
    a = Candidate(kube, "a", clock)
    await clock.tick(0)
    b = Candidate(kube, "b", clock)
    await clock.tick(5)
    await a.cancel()  # graceful: releases the lease
    assert a.log[-1] == "stopped"
    assert await holder(kube) == ""
    await clock.tick(2.1)
    assert b.elector.is_leader
    await b.cancel()


async def test_leader_that_cannot_renew_steps_down() -> None:
    clock = FakeClock()
    kube = InMemoryKube(clock=clock)
    flaky = Flaky(kube)
    a = Candidate(flaky, "a", clock, release_on_cancel=False)
    await clock.tick(0)
    b = Candidate(kube, "b", clock)
    await clock.tick(4)
    assert a.elector.is_leader
    flaky.broken = True
    await clock.tick(9)
    assert a.elector.is_leader  # still within the renew deadline (10 s after the last renewal)
    await clock.tick(2)
    assert not a.elector.is_leader and a.log[-1] == "stopped"
    assert a.task.done()  # run() returns when leadership is lost
    assert not b.elector.is_leader  # the lease itself has not expired yet for b
    await clock.tick(8)
    assert b.elector.is_leader
    await b.cancel()


async def test_only_one_leader_among_many() -> None:
    clock = FakeClock()
    kube = InMemoryKube(clock=clock)
    candidates = [Candidate(kube, f"c{i}", clock) for i in range(5)]
    for _ in range(10):
        await clock.tick(3)
        assert sum(c.elector.is_leader for c in candidates) == 1
    for c in candidates:
        await c.cancel()


async def test_handover_through_the_fake_api_server(fake_apiserver: FakeApiServer) -> None:
    timings = {"lease_duration_seconds": 1.0, "renew_deadline_seconds": 0.6, "retry_period_seconds": 0.1}
    a = Candidate(fake_apiserver.port_client(), "a", release_on_cancel=False, **timings)
    await asyncio.wait_for(a.leading.wait(), 5)
    b = Candidate(fake_apiserver.port_client(), "b", **timings)
    await asyncio.sleep(0.5)
    assert not b.elector.is_leader
    await a.cancel()
    loop = asyncio.get_running_loop()
    crashed = loop.time()
    await asyncio.wait_for(b.leading.wait(), 5)
    assert 0.8 <= loop.time() - crashed <= 2.5
    await eventually(lambda: b.elector.is_leader)
    await b.cancel()
    assert await holder(fake_apiserver.store) == ""  # b released on cancel


async def test_leading_work_that_fails_gives_up_the_lease() -> None:
    clock = FakeClock()
    kube = InMemoryKube(clock=clock)
    stopped: list[str] = []

    async def crash() -> None:
        raise RuntimeError("scheduling loop bug")

    elector = LeaderElector(
        kube, config("a"), clock=clock, on_started_leading=crash, on_stopped_leading=lambda: stopped.append("a")
    )
    with pytest.raises(TaskFailed, match="'lead' failed: RuntimeError: scheduling loop bug"):
        await asyncio.wait_for(elector.run(), 5)
    assert stopped == ["a"] and not elector.is_leader
    assert await holder(kube) == ""  # released: another candidate takes over at once
