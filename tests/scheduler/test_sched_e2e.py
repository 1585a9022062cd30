"""Acceptance: the standalone scheduler against the fake API server through the real lightkube client.

Fake kubelets admit bound pods the way ``single-numa-node`` does (lowest zone that fits, else
``TopologyAffinityError``) and, when asked, an exporter republishes each node's NRT with the pod
fingerprint after every admission.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace

import pytest
import pytest_asyncio
from sched_helpers import FakeKubelets, events_for, eventually, node_doc, pod_doc, seed_crd
from structlog.testing import capture_logs

from numaplane.kube.leader import LeaderElectionConfig
from numaplane.kube.resources import LEASE, NODE, POD
from numaplane.scheduler.config import SchedulerConfig
from numaplane.scheduler.service import EXIT_LEADERSHIP_LOST, EXIT_OK, SchedulerService
from numaplane.testing.fakeapi import FakeApiServer

NODES = ["worker-a", "worker-b", "worker-c"]
FAST = SchedulerConfig().with_overrides(
    resync_period_seconds=0.1,
    backoff_initial_seconds=0.02,
    backoff_max_seconds=0.2,
    max_unschedulable_seconds=1.0,
)


EXPECTED_ERRORS = {"test_lost_lease_stops_the_instance": {"leader election lost"}}


@pytest.fixture(autouse=True)
def no_errors_logged(caplog: pytest.LogCaptureFixture, request: pytest.FixtureRequest) -> Iterator[None]:
    """Failures in handlers and loops are caught and logged at ERROR (stdlib or structlog): none may happen."""
    with capture_logs() as events:
        yield
    errors = [r for r in caplog.get_records("call") if r.levelno >= logging.ERROR and r.name.startswith("numaplane")]
    assert not errors, [r.getMessage() for r in errors]
    expected = EXPECTED_ERRORS.get(request.node.name, set())
    unexpected = [e for e in events if e.get("log_level") in ("error", "critical") and e["event"] not in expected]
    assert not unexpected


@pytest_asyncio.fixture
async def api() -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer() as server:
        await seed_crd(server.store)
        yield server


async def bound(api: FakeApiServer) -> dict[str, str]:
    return {
        p["metadata"]["name"]: p["spec"]["nodeName"]
        for p in (await api.store.list(POD)).items
        if (p.get("spec") or {}).get("nodeName")
    }


async def start(
    api: FakeApiServer, config: SchedulerConfig, **kw: object
) -> tuple[SchedulerService, asyncio.Task[int]]:
    service = SchedulerService(api.port_client(), config, metrics_address=None, health_address="127.0.0.1:0", **kw)  # type: ignore[arg-type]
    task = asyncio.get_running_loop().create_task(service.run())
    await eventually(lambda: _ready(service), timeout=10)
    return service, task


async def _ready(service: SchedulerService) -> bool:
    return service.ready


async def stop(service: SchedulerService, task: asyncio.Task[int]) -> int:
    if not task.done():
        healthy, details = service._liveness()
        assert healthy, details  # no background task (resync loop, informers) died
    service.stop()
    return await asyncio.wait_for(task, 10)


async def test_stream_of_guaranteed_pods_with_fresh_nrts(api: FakeApiServer) -> None:
    """Pods stream in; the exporter keeps NRTs current: every zone is filled, none over-filled, the rest fail
    with kube-scheduler's aggregated message; events and metrics record it."""
    kubelets = FakeKubelets(api.store, NODES, zones=2, cpu=5, publish=True)
    await kubelets.seed()
    await api.store.create(NODE, node_doc("small", cpu=2))  # no NRT; too small for every pod
    kubelets.start()
    service, task = await start(api, FAST)
    try:
        for i in range(8):
            await api.store.create(POD, pod_doc(f"gu-{i}", cpu=3))
            await asyncio.sleep(0.03)

        async def settled() -> bool:
            pending = [f"gu-{i}" for i in range(8) if f"gu-{i}" not in await bound(api)]
            if len(pending) != 2:
                return False
            for name in pending:
                events = await events_for(api.store, name, "FailedScheduling")
                if not any("3 cannot align container" in e["message"] for e in events):
                    return False
            return True

        await eventually(settled, timeout=20)
        placed = await bound(api)
        assert sorted(placed.values()) == sorted(NODES * 2)  # two pods per node, one per zone
        await eventually(lambda: _kubelet_done(kubelets, 6))
        assert kubelets.rejected == []
        assert kubelets.pods_per_zone() == {n: [1, 1] for n in NODES}
        pending = sorted(f"gu-{i}" for i in range(8) if f"gu-{i}" not in placed)
        last = (await events_for(api.store, pending[0], "FailedScheduling"))[-1]
        assert last["message"] == "0/4 nodes are available: 1 Insufficient cpu, 3 cannot align container."
        assert last["type"] == "Warning"
        assert last["involvedObject"]["kind"] == "Pod"

        async def condition_set() -> bool:  # the event and the condition are two independent writes
            status = (await api.store.get(POD, pending[0], namespace="default"))["status"]
            return any(c["type"] == "PodScheduled" for c in status.get("conditions") or ())

        await eventually(condition_set, timeout=10)
        status = (await api.store.get(POD, pending[0], namespace="default"))["status"]
        condition = next(c for c in status["conditions"] if c["type"] == "PodScheduled")
        assert (condition["status"], condition["reason"], condition["message"]) == (
            "False",
            "Unschedulable",
            last["message"],
        )
        scheduled = await events_for(api.store, next(iter(placed)), "Scheduled")
        assert scheduled and scheduled[0]["message"].startswith("Successfully assigned default/")
        await eventually(lambda: _binds(service, 6))  # the API may show a binding before its caller resumes
        port = service.ports["health"]
        import aiohttp

        async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/readyz") as r:
            assert r.status == 200
    finally:
        assert await stop(service, task) == EXIT_OK
        await kubelets.stop()


@pytest.mark.parametrize("cache_mode", ["overreserve", "passthrough"])
async def test_stale_nrts_overreserve_never_overcommits(api: FakeApiServer, cache_mode: str) -> None:
    """NRTs are never updated between binds. Over-reserve charges each reservation to every zone: no zone is
    over-committed (extra pods wait with FailedScheduling). Passthrough trusts the stale data and sends more
    pods to a node than its zones hold: the kubelet rejects them with TopologyAffinityError."""
    kubelets = FakeKubelets(api.store, NODES, zones=2, cpu=5, publish=False)
    await kubelets.seed()
    kubelets.start()
    service, task = await start(api, replace(FAST, cache_mode=cache_mode))  # type: ignore[arg-type]
    try:
        for i in range(9):
            await api.store.create(POD, pod_doc(f"gu-{i}", cpu=3))
        names = [f"gu-{i}" for i in range(9)]
        if cache_mode == "passthrough":
            await eventually(lambda: _count_bound(api, 9), timeout=15)
            await eventually(lambda: _kubelet_done(kubelets, 9), timeout=5)
            assert len(kubelets.rejected) == 3  # one pod per node found no zone: over-commit
            per_node = {n: list((await bound(api)).values()).count(n) for n in NODES}
            assert per_node == dict.fromkeys(NODES, 3)  # 3 pods x 3 CPUs per node, zones hold 1 each
        else:

            async def waiting_pods_reported() -> bool:
                placed = await bound(api)
                pending = [n for n in names if n not in placed]
                return len(pending) == 6 and all([await events_for(api.store, n, "FailedScheduling") for n in pending])

            await eventually(waiting_pods_reported, timeout=15)
            await asyncio.sleep(0.5)  # several resync periods and retries later: still no over-commit
            placed = await bound(api)
            assert sorted(placed.values()) == sorted(NODES)
            assert kubelets.rejected == []
            for node, zones in kubelets.pods_per_zone().items():
                assert all(count * 3 <= 5 for count in zones), (node, zones)
    finally:
        assert await stop(service, task) == EXIT_OK
        await kubelets.stop()


async def _count_bound(api: FakeApiServer, n: int) -> bool:
    return len(await bound(api)) == n


async def _kubelet_done(kubelets: FakeKubelets, n: int) -> bool:
    return sum(len(p) for p in kubelets.placed.values()) + len(kubelets.rejected) == n


async def test_binding_errors_are_retried_with_backoff(api: FakeApiServer) -> None:
    kubelets = FakeKubelets(api.store, NODES[:1], zones=2, cpu=5)
    await kubelets.seed()
    api.faults.add(500, times=2, resource="pods/binding")
    service, task = await start(api, FAST)
    try:
        await api.store.create(POD, pod_doc("retry", cpu=1))
        await eventually(lambda: _count_bound(api, 1), timeout=10)
        await eventually(lambda: _binds(service, 1))
        assert service.metrics.binds.labels(result="error")._value.get() == 2
    finally:
        await stop(service, task)


def _lease(identity: str, *, renew_deadline_seconds: float = 4.0) -> LeaderElectionConfig:
    # generous by default: a loaded CI machine must not lose the lease by accident
    return LeaderElectionConfig(
        "numaplane-scheduler",
        "default",
        identity,
        lease_duration_seconds=renew_deadline_seconds * 1.5,
        renew_deadline_seconds=renew_deadline_seconds,
        retry_period_seconds=0.1,
    )


async def test_leader_election_handover(api: FakeApiServer) -> None:
    """Two instances share a Lease: only the leader binds; when it stops, the standby takes over at once
    and, having learned the leader's placements from its informer, keeps zones from being over-committed."""
    kubelets = FakeKubelets(api.store, NODES[:1], zones=2, cpu=5, publish=False)
    await kubelets.seed()
    kubelets.start()
    a, task_a = await start(api, FAST, leader_election=_lease("instance-a"))
    await eventually(lambda: _leading(a), timeout=5)
    b, task_b = await start(api, FAST, leader_election=_lease("instance-b"))
    try:
        await api.store.create(POD, pod_doc("first", cpu=3))
        await eventually(lambda: _count_bound(api, 1), timeout=10)
        assert not b.leading
        await eventually(lambda: _binds(a, 1))
        assert await stop(a, task_a) == EXIT_OK
        lease = await api.store.get(LEASE, "numaplane-scheduler", namespace="default")
        await eventually(lambda: _leading(b), timeout=15)  # one retry period, on a loaded machine
        lease = await api.store.get(LEASE, "numaplane-scheduler", namespace="default")
        assert lease["spec"]["holderIdentity"] == "instance-b"
        await api.store.create(POD, pod_doc("second", cpu=3))
        await api.store.create(POD, pod_doc("third", cpu=1))
        await eventually(lambda: _count_bound(api, 2), timeout=10)
        await eventually(lambda: _has_event(api, "second", "FailedScheduling"), timeout=5)
        placed = await bound(api)
        assert "third" in placed and "second" not in placed  # "first" still charged on both zones in b's cache
        await eventually(lambda: _binds(b, 1))
        assert kubelets.rejected == []
    finally:
        if not task_a.done():
            await stop(a, task_a)
        await stop(b, task_b)
        await kubelets.stop()


async def _binds(service: SchedulerService, count: int) -> bool:
    return service.metrics.binds.labels(result="success")._value.get() == count


async def _leading(service: SchedulerService) -> bool:
    return service.leading


async def _has_event(api: FakeApiServer, pod: str, reason: str) -> bool:
    return bool(await events_for(api.store, pod, reason))


async def test_lost_lease_stops_the_instance(api: FakeApiServer) -> None:
    await FakeKubelets(api.store, NODES[:1]).seed()
    service, task = await start(api, FAST, leader_election=_lease("only", renew_deadline_seconds=0.5))
    await eventually(lambda: _leading(service), timeout=5)
    api.faults.add(500, times=None, resource="leases")
    code = await asyncio.wait_for(task, 10)
    assert code == EXIT_LEADERSHIP_LOST
    assert not service.leading
