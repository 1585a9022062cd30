"""On a runtime whose NRI deadlocks on unsolicited updates (containerd 1.7.24, the version the project
targets), the agent never calls ``Runtime.UpdateContainers``: every cpuset change for another container
travels in an answer the runtime asked for (issue 25 item 16). And a runtime that never sends
Synchronize (a state over NRI's 4 MiB message limit) is backed off from for real (issue 23 item 7).

Through the real wire protocol against the fake runtime, which says ``containerd 1.7.24~ds1`` in
Configure as the real one does (``../shared/wire/captures/nri/03-c1-s1-Configure-request.bin``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import CONTAINERD_1_7, FIXED_RUNTIME, container, guaranteed, sandbox
from test_agent_nri import TOPOLOGY, create, options, running_agent

from numaplane.agent.daemon import Agent
from numaplane.nri.proto import api_pb2
from numaplane.nri.runtimes import parse_version, splits_synchronize, unsolicited_updates_safe
from numaplane_harness.nrifake import FakeRuntime, FakeSession

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def runtime(short_tmp: Path) -> AsyncIterator[FakeRuntime]:
    rt = FakeRuntime(**CONTAINERD_1_7)
    await rt.listen(str(short_tmp / "nri.sock"))
    try:
        yield rt
    finally:
        await rt.close()


def cpus(updates: object) -> dict[str, str]:
    return {u.container_id: u.linux.resources.cpu.cpus for u in updates}  # type: ignore[attr-defined]


def owed(agent: Agent) -> float | None:
    return agent.metrics.registry.get_sample_value("numaplane_agent_owed_updates")


def unsolicited(session: FakeSession) -> list[api_pb2.UpdateContainersRequest]:
    return session.updates


def test_which_runtimes_may_be_sent_unsolicited_updates() -> None:
    assert parse_version("1.7.24~ds1") == (1, 7, 24)
    assert parse_version("v2.4.0-beta.0") == (2, 4, 0)
    assert parse_version("devel") is None
    assert not unsolicited_updates_safe("containerd", "1.7.24~ds1")
    assert not unsolicited_updates_safe("containerd", "v1.7.34")
    assert not unsolicited_updates_safe("containerd", "2.3.4")
    assert unsolicited_updates_safe("containerd", "v2.4.0-beta.0")
    assert unsolicited_updates_safe("containerd", "2.4.1")
    assert not unsolicited_updates_safe("cri-o", "1.34.0")  # unknown: assumed unsafe
    assert not unsolicited_updates_safe("containerd", "")
    assert splits_synchronize("containerd", "1.7.24~ds1") is False
    assert splits_synchronize("containerd", "1.7.26") is True
    assert splits_synchronize("containerd", "2.0.0") is True
    assert splits_synchronize("cri-o", "1.30") is None


async def test_pool_changes_travel_in_answers_never_in_unsolicited_calls(runtime: FakeRuntime, short_tmp: Path) -> None:
    async with running_agent(options(short_tmp)) as agent:
        session = await runtime.wait_session(1)
        await agent.wait_ready()  # ready at once: the Synchronize answer is the delivery
        be_pod = sandbox("be", qos="BestEffort")
        await create(runtime, be_pod, container(be_pod))
        g_pod = sandbox("g")
        r = await create(runtime, g_pod, guaranteed(g_pod, n=2))
        # the pool shrinks in the creating container's own answer
        assert r.adjust.linux.resources.cpu.cpus == "1,9" and cpus(r.update) == {"ctr-be-main": "0,2-8,10-15"}
        # the pod goes: its release is answered with an empty StateChange reply, so the growth is owed
        await runtime.state_change(api_pb2.STOP_POD_SANDBOX, g_pod)
        await runtime.state_change(api_pb2.REMOVE_POD_SANDBOX, g_pod)
        assert owed(agent) == 1
        # ... and travels in the next answer the runtime asks for: here another pod's creation
        other = sandbox("other", qos="BestEffort")
        r = await create(runtime, other, container(other))
        assert cpus(r.update) == {"ctr-be-main": "0-15"} and owed(agent) == 0
        # a StopContainer answer carries what is owed too
        g2 = sandbox("g2")
        r = await create(runtime, g2, guaranteed(g2, n=2))
        assert cpus(r.update) == {"ctr-be-main": "0,2-8,10-15", "ctr-other-main": "0,2-8,10-15"}
        await runtime.state_change(api_pb2.REMOVE_POD_SANDBOX, g2)
        stop = await runtime.call(
            "StopContainer",
            api_pb2.StopContainerRequest(pod=other, container=runtime.containers[1]),
            api_pb2.StopContainerResponse,
        )
        assert cpus(stop.update) == {"ctr-be-main": "0-15", "ctr-other-main": "0-15"}
        # an UpdateContainer answer: the owed updates first, the container asked about last
        g3 = sandbox("g3")
        await create(runtime, g3, guaranteed(g3, n=2))
        await runtime.state_change(api_pb2.REMOVE_POD_SANDBOX, g3)
        asked = runtime.containers[0]
        request = api_pb2.UpdateContainerRequest(pod=be_pod, container=asked)
        request.linux_resources.cpu.cpus = "3"
        answer = await runtime.call("UpdateContainer", request, api_pb2.UpdateContainerResponse)
        assert [u.container_id for u in answer.update][-1] == "ctr-be-main"
        assert answer.update[-1].linux.resources.cpu.cpus == "0-15"
        assert unsolicited(session) == []  # never a Runtime.UpdateContainers
        sample = agent.metrics.registry.get_sample_value
        assert sample("numaplane_agent_container_updates_total", {"path": "remove", "result": "in-reply"}) >= 3  # type: ignore[operator]
        assert sample("numaplane_agent_container_updates_total", {"path": "remove", "result": "unsent"}) is None


async def test_adopted_and_waiting_containers_are_pinned_in_answers(runtime: FakeRuntime, short_tmp: Path) -> None:
    """After a restart: the Synchronize answer pins what it adopts; a POST_START re-pin and the pin of a
    container that waited in the shared pool go out with the next answer once a CPU frees."""
    # adopted in pod uid order: holder takes node 1 (4-7,12-15), late 6 of node 0's 7 free CPUs, and the
    # waiter's 2 CPUs fit nowhere
    holder = sandbox("holder")
    held = guaranteed(holder, n=8, cpus="0-15", state=api_pb2.CONTAINER_RUNNING)
    late_pod = sandbox("late")
    late = guaranteed(late_pod, n=6, cpus="0-15", state=api_pb2.CONTAINER_RUNNING)
    waiter_pod = sandbox("waiter")
    waiter = guaranteed(waiter_pod, n=2, cpus="0-15", state=api_pb2.CONTAINER_RUNNING)
    runtime.pods.extend([holder, late_pod, waiter_pod])
    runtime.containers.extend([held, late, waiter])
    async with running_agent(options(short_tmp)) as agent:
        session = await runtime.wait_session(1)
        await asyncio.wait_for(session.synchronized.wait(), 5)
        await agent.wait_ready()
        assert session.sync_response is not None
        synced = cpus(session.sync_response.update)
        assert agent.state is not None and list(agent.state.waiting) == ["ctr-waiter-main"]
        assert synced["ctr-holder-main"] == "4-7,12-15"
        assert synced["ctr-waiter-main"] == agent.state.shared_pool.format()  # waits in the shared pool
        # the late container starts: re-pinned with the next answer (the sync update may have raced it)
        await runtime.state_change(api_pb2.POST_START_CONTAINER, late_pod, late)
        # the holder goes: the waiting container fits now and is owed its pin
        await runtime.state_change(api_pb2.REMOVE_POD_SANDBOX, holder)
        assert agent.state.waiting == {}
        be = sandbox("be", qos="BestEffort")
        r = await create(runtime, be, container(be))
        got = cpus(r.update)
        records = agent.state.records
        assert got["ctr-late-main"] == records["ctr-late-main"].applied
        assert records["ctr-waiter-main"].exclusive is not None
        assert got["ctr-waiter-main"] == records["ctr-waiter-main"].exclusive.format() == "4,12"
        assert unsolicited(session) == [] and agent.state.check() == []


async def test_a_fixed_runtime_still_gets_the_release_at_once(short_tmp: Path) -> None:
    rt = FakeRuntime(**FIXED_RUNTIME)
    await rt.listen(str(short_tmp / "nri.sock"))
    try:
        async with running_agent(options(short_tmp)) as agent:
            session = await rt.wait_session(1)
            await agent.wait_ready()
            be_pod = sandbox("be", qos="BestEffort")
            await create(rt, be_pod, container(be_pod))
            g = sandbox("g")
            await create(rt, g, guaranteed(g, n=2))
            await rt.state_change(api_pb2.REMOVE_POD_SANDBOX, g)
            await agent.sender.wait_idle()  # type: ignore[union-attr]
            assert [cpus(req.update) for req in session.updates] == [{"ctr-be-main": "0-15"}]
    finally:
        await rt.close()


async def test_a_runtime_that_never_synchronizes_is_backed_off_from_and_reported(
    short_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A state over the runtime's message limit (containerd 1.7.24 cannot split Synchronize): the runtime
    drops the plugin after Configure, every time. The agent backs off for real (the old agent reset the
    backoff at every registration and re-dialled every 0.05 s here), warns once naming cause and fix,
    and says it in a metric and the readiness reason."""
    pods = [sandbox(f"p{i}") for i in range(40)]
    running = [container(p, cpus="0-15", state=api_pb2.CONTAINER_RUNNING) for p in pods]
    rt = FakeRuntime(pods=pods, containers=running, sync_limit_bytes=2000, **CONTAINERD_1_7)
    await rt.listen(str(short_tmp / "nri.sock"))
    caplog.set_level(logging.INFO, logger="numaplane.nri.plugin")
    try:
        async with running_agent(options(short_tmp, nri_backoff_initial_seconds=0.05)) as agent:
            await asyncio.sleep(3.0)
            sessions = len(rt.sessions)
            # 0.05 s doubling to the 5 s cap: 0.05+0.1+0.2+0.4+0.8+1.6 s → at most 7 sessions in 3 s
            assert 3 <= sessions <= 7, sessions
            ready, details = agent.readiness()
            assert not ready
            assert "never sent Synchronize" in details["reason"] and "4 MiB" in details["reason"]
            assert "containerd >= 1.7.26" in details["reason"] and "1.7.24~ds1" in details["reason"]
            metric = agent.metrics.registry.get_sample_value("numaplane_agent_nri_sessions_without_synchronize")
            assert metric is not None and metric >= 2
            warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "Synchronize" in r.getMessage()]
            assert len(warnings) == 1 and "cannot split Synchronize" in warnings[0].getMessage()
            # the state shrinks (or the runtime is upgraded): the next session synchronizes, all clear
            rt.pods, rt.containers = rt.pods[:2], rt.containers[:2]
            await agent.wait_ready(10)
            assert agent.nri is not None and agent.nri.sync_problem == "" and agent.nri.sessions_without_sync == 0
            assert "reason" not in agent.readiness()[1]
    finally:
        await rt.close()


async def test_a_waiting_container_is_an_event_on_its_pod_and_its_pinning_too(
    runtime: FakeRuntime, short_tmp: Path, fake_kube: Any
) -> None:
    """Created while the agent was down and not admissible at Synchronize (its CPUs taken): the container
    runs in the shared pool, and its pod gets a Warning Event with the reason; once a release makes room
    it is pinned (with the runtime's next answer) and the pod gets a Normal Event with its CPUs."""
    from numaplane.agent.waitreport import PINNED_REASON, WAITING_REASON
    from numaplane.kube.resources import EVENT

    holder = sandbox("holder")
    held = guaranteed(holder, n=8, cpus="0-15", state=api_pb2.CONTAINER_RUNNING)  # node 1, adopted first
    late_pod = sandbox("late")
    late = guaranteed(late_pod, n=6, cpus="0-15", state=api_pb2.CONTAINER_RUNNING)  # 6 of node 0's 7
    waiter_pod = sandbox("waiter", namespace="team-a")
    waiter = guaranteed(waiter_pod, n=2, cpus="0-15", state=api_pb2.CONTAINER_RUNNING)  # fits nowhere
    runtime.pods.extend([holder, late_pod, waiter_pod])
    runtime.containers.extend([held, late, waiter])
    agent = Agent(options(short_tmp, pod_sync_timeout_seconds=0.5), topology=TOPOLOGY, kube=fake_kube)
    await agent.start()
    try:
        await agent.wait_ready(10)

        async def events() -> list[dict[str, Any]]:
            return [dict(e) for e in (await fake_kube.list(EVENT, namespace="team-a")).items]

        async with asyncio.timeout(5):
            while not await events():
                await asyncio.sleep(0.02)
        (warning,) = await events()
        assert warning["reason"] == WAITING_REASON and warning["type"] == "Warning"
        assert warning["involvedObject"]["name"] == "waiter" and warning["involvedObject"]["uid"] == "uid-waiter"
        assert "TopologyAffinityError" in warning["message"] and "shared pool" in warning["message"]
        await runtime.state_change(api_pb2.REMOVE_POD_SANDBOX, holder)  # room on node 1
        async with asyncio.timeout(5):
            while len(await events()) < 2:
                await asyncio.sleep(0.02)
        pinned = next(e for e in await events() if e["reason"] == PINNED_REASON)
        assert pinned["type"] == "Normal" and pinned["message"] == "container main is pinned to CPUs 4,12"
        be = sandbox("be", qos="BestEffort")
        r = await create(runtime, be, container(be))
        assert cpus(r.update)["ctr-waiter-main"] == "4,12"  # delivered with the next answer
    finally:
        await agent.stop()


async def test_a_session_without_synchronize_is_ended_and_counted(short_tmp: Path) -> None:
    """A runtime that keeps the connection after Configure but never sends Synchronize: the plugin ends
    the session ``sync_timeout_seconds`` after Configure, backs off, and reports it after two."""
    from numaplane.nri.plugin import NRIPlugin
    from numaplane_harness.nriexample import FixedCpusetHandler

    rt = FakeRuntime(send_synchronize=False, **CONTAINERD_1_7)
    await rt.listen(str(short_tmp / "nri.sock"))
    plugin = NRIPlugin(
        FixedCpusetHandler("0"),
        name="probe",
        idx="10",
        socket_path=str(short_tmp / "nri.sock"),
        sync_timeout_seconds=0.2,
        backoff_initial_seconds=0.05,
    )
    task = asyncio.create_task(plugin.run())
    try:
        async with asyncio.timeout(10):
            while plugin.sessions_without_sync < 3:
                await asyncio.sleep(0.02)
        assert "never sent Synchronize" in plugin.sync_problem and "containerd 1.7.24~ds1" in plugin.sync_problem
    finally:
        await plugin.stop()
        await task
        await rt.close()


async def _churn(rt: FakeRuntime, rounds: int) -> None:
    """Guaranteed pods created and removed back to back next to a BestEffort one: every removal grows
    the pool, every creation shrinks it."""
    be = sandbox("be", qos="BestEffort")
    await create(rt, be, container(be))
    for i in range(rounds):
        pod = sandbox(f"g{i}")
        await create(rt, pod, guaranteed(pod, n=2))
        await rt.state_change(api_pb2.STOP_POD_SANDBOX, pod)
        await rt.state_change(api_pb2.REMOVE_POD_SANDBOX, pod)


@pytest.mark.parametrize(("says", "wedged"), [(CONTAINERD_1_7, False), (FIXED_RUNTIME, True)])
async def test_the_lock_inversion_of_containerd_1_7_never_meets_the_agent(
    short_tmp: Path, says: dict[str, str], wedged: bool
) -> None:
    """The fake runtime takes its two locks as containerd 1.7 does (containerd#13733). The agent told it
    is containerd 1.7 makes no unsolicited call and 30 rounds of churn finish; the same agent told it is
    a fixed containerd sends the pool growth unsolicited, and the runtime wedges within those rounds —
    the model reproduces the real deadlock, which the agent avoids on the real version."""
    rt = FakeRuntime(lock_inversion=True, **says)
    await rt.listen(str(short_tmp / "nri.sock"))
    try:
        async with running_agent(options(short_tmp)) as agent:
            session = await rt.wait_session(1)
            await agent.wait_ready()
            try:
                async with asyncio.timeout(8):
                    await _churn(rt, 30)
            except TimeoutError:
                assert wedged, "the runtime wedged although the agent made no unsolicited call"
                assert session.update_calls > len(session.updates), "wedged without an unsolicited call?"
            else:
                assert not wedged, "the model did not reproduce the deadlock"
                assert session.update_calls == 0
    finally:
        await rt.close()
