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


# ---------------------------------------------------------------- renewals on a loaded node (issue 25 item 14)


class Stuck(Flaky):
    """A port whose next lease reads hang (a request on a dead keep-alive connection) while ``stuck`` is set."""

    def __init__(self, inner: KubePort) -> None:
        super().__init__(inner)
        self.stuck = 0
        self.reads = 0

    async def get(self, res: Resource, name: str, *, namespace: str | None = None) -> JsonObj:
        self.reads += 1
        if self.stuck:
            self.stuck -= 1
            await asyncio.Event().wait()
        return await super().get(res, name, namespace=namespace)


async def test_a_renewal_stuck_on_a_dead_connection_is_retried_within_the_deadline(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    kube = InMemoryKube(clock=clock)
    stuck = Stuck(kube)
    a = Candidate(stuck, "a", clock, release_on_cancel=False)
    await clock.tick(0)
    assert a.elector.is_leader
    stuck.stuck = 1  # the next renewal's request never answers
    for _ in range(30):
        await clock.tick(1)
        assert a.elector.is_leader, a.log  # the stuck attempt is abandoned and the retry renews
    assert await holder(kube) == "a"
    assert any("renewal attempt 1 failed: no answer within" in r.getMessage() for r in caplog.records)
    await a.cancel()


async def test_a_renewal_that_fails_transiently_then_succeeds_keeps_the_lease(
    fake_apiserver: FakeApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    timings = {"lease_duration_seconds": 3.0, "renew_deadline_seconds": 2.0, "retry_period_seconds": 0.2}
    a = Candidate(fake_apiserver.port_client(), "a", release_on_cancel=False, **timings)
    await asyncio.wait_for(a.leading.wait(), 5)
    fake_apiserver.faults.add(503, times=3, verb="update", resource="leases", message="etcd is slow")
    fake_apiserver.faults.add(500, times=2, verb="get", resource="leases", message="overloaded")
    await asyncio.sleep(3.5)
    assert a.elector.is_leader and not a.task.done() and a.log[-1] == "started"
    failed = [r.getMessage() for r in caplog.records if "renewal attempt" in r.getMessage()]
    assert failed and all("failed" in m for m in failed)
    lease = await fake_apiserver.store.get(LEASE, "numaplane", namespace="kube-system")
    assert lease["spec"]["holderIdentity"] == "a" and lease["spec"]["leaseTransitions"] == 0
    await a.cancel()


async def test_a_blocked_event_loop_does_not_lose_a_lease_that_still_holds(
    fake_apiserver: FakeApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    """CPU-bound work holds the loop past the renew deadline (not past the lease): the lease is kept."""
    import time

    timings = {"lease_duration_seconds": 3.0, "renew_deadline_seconds": 1.5, "retry_period_seconds": 0.3}
    blocked = asyncio.Event()

    async def busy() -> None:
        await asyncio.sleep(0.1)
        time.sleep(1.8)  # a reconcile hogging the loop: longer than the renew deadline, shorter than the lease
        blocked.set()
        await asyncio.Event().wait()

    elector = LeaderElector(fake_apiserver.port_client(), config("a", **timings), on_started_leading=busy)
    task = asyncio.create_task(elector.run())
    await asyncio.wait_for(blocked.wait(), 5)
    await asyncio.sleep(1.5)
    assert elector.is_leader and not task.done()
    assert any("event loop blocked" in r.getMessage() for r in caplog.records)
    lease = await fake_apiserver.store.get(LEASE, "numaplane", namespace="kube-system")
    assert lease["spec"]["holderIdentity"] == "a"
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_a_lost_lease_is_logged_with_its_cause(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    kube = InMemoryKube(clock=clock)
    flaky = Flaky(kube)
    a = Candidate(flaky, "a", clock, release_on_cancel=False)
    await clock.tick(0)
    flaky.broken = True
    await clock.tick(15)
    assert a.task.done() and not a.elector.is_leader
    lost = [r.getMessage() for r in caplog.records if "lost the lease" in r.getMessage()]
    assert len(lost) == 1
    assert "no renewal succeeded for" in lost[0] and "last attempt: get failed: Unavailable: network down" in lost[0]
    assert a.elector.lost_cause in lost[0]


async def test_a_lease_taken_over_is_lost_at_once_naming_the_new_holder(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    kube = InMemoryKube(clock=clock)
    a = Candidate(kube, "a", clock, release_on_cancel=False)
    await clock.tick(0)
    lease = await kube.get(LEASE, "numaplane", namespace="kube-system")
    await kube.replace(LEASE, dict(lease, spec={**lease["spec"], "holderIdentity": "intruder"}))
    await clock.tick(3)
    assert a.task.done()
    assert a.elector.lost_cause == "the lease is held by intruder"
