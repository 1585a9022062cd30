"""Hostile input to the agent: one bad pod affects only that pod (issue 15, items 5 and 12)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import state_helpers as ev
from agent_helpers import FIXED_RUNTIME, container, guaranteed, sandbox
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numaplane.agent.containers import EXTRA_RESOURCES_ANNOTATION_PREFIX, derive
from numaplane.agent.errors import AdmissionRejected
from numaplane.agent.state import NodeAgentState
from numaplane.nri.proto import api_pb2
from numaplane.policy.manager import ResourceManager
from numaplane.topology.model import synthetic

TOPOLOGY = synthetic(sockets=2, cores_per_numa=4, threads_per_core=2)
CONFIG = {"topologyManager": {"policy": "single-numa-node"}, "cpuManager": {"reservedCPUs": "0"}}

HOSTILE_ANNOTATIONS = [
    '{"example.com/gpu": [1, 2]}',  # a list as a quantity
    "[1, 2, 3]",  # a list
    '{"example.com/gpu": ' + "9" * 4400 + "}",  # a 4,400-digit number
    '{"example.com/gpu": "' + "9" * 4400 + '"}',  # a 4,400-digit quantity text
    "[" * 50_000 + "]" * 50_000,  # deeply nested
    '{"a": ' * 500 + "1" + "}" * 500,  # nested below the recursion limit, above ours
    '{"example.com/gpu": 1e400}',
    '{"example.com/gpu": null}',
    '{"example.com/gpu": {"x": 1}}',
]


@pytest.mark.parametrize("raw", HOSTILE_ANNOTATIONS, ids=range(len(HOSTILE_ANNOTATIONS)))
def test_a_hostile_resources_annotation_is_a_typed_rejection(raw: str) -> None:
    pod = ev.sandbox("bad", annotations={EXTRA_RESOURCES_ANNOTATION_PREFIX + "main": raw})
    with pytest.raises(AdmissionRejected) as info:
        derive(pod, ev.guaranteed(pod))
    assert info.value.reason == "InvalidContainer"
    assert len(str(info.value)) < 1000


@pytest.mark.parametrize("raw", HOSTILE_ANNOTATIONS, ids=range(len(HOSTILE_ANNOTATIONS)))
def test_synchronize_goes_on_with_one_hostile_pod(raw: str) -> None:
    node_state = NodeAgentState(ResourceManager(TOPOLOGY, CONFIG))
    bad = ev.sandbox("bad", annotations={EXTRA_RESOURCES_ANNOTATION_PREFIX + "main": raw})
    good = ev.sandbox("good")
    running = [
        ev.guaranteed(bad, n=2, cpus="0-15", state=api_pb2.CONTAINER_RUNNING),
        ev.guaranteed(good, n=2, cpus="0-15", state=api_pb2.CONTAINER_RUNNING),
    ]
    result = node_state.synchronize([bad, good], running)
    assert [f[0] for f in result.failed] == ["ctr-bad-main"]
    assert node_state.records["ctr-good-main"].exclusive is not None
    assert node_state.check() == []


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        st.text(max_size=200),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
            lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
            max_leaves=20,
        ).map(lambda v: __import__("json").dumps(v)),
    )
)
def test_fuzz_resources_annotation_only_rejects_with_admission_rejected(raw: str) -> None:
    pod = ev.sandbox("f", annotations={EXTRA_RESOURCES_ANNOTATION_PREFIX + "main": raw})
    try:
        derive(pod, ev.container(pod, cpu_milli=500))
    except AdmissionRejected as exc:  # malformed, or a well-formed claim no pod spec backs
        assert exc.reason in ("InvalidContainer", "UnverifiedResources")


def test_state_change_with_an_unknown_event_is_answered_and_ignored() -> None:
    from numaplane.agent.handler import AgentHandler, StateRunner
    from numaplane.nri.protocol import RequestReceived
    from numaplane.nri.stub import PLUGIN_SERVICE, Stub

    node_state = NodeAgentState(ResourceManager(TOPOLOGY, CONFIG))
    handler = AgentHandler(StateRunner(node_state))
    payload = api_pb2.StateChangeEvent(event=api_pb2.Event.ValueType(99)).SerializeToString()

    async def main() -> None:
        reply = await Stub(handler).serve(RequestReceived(1, PLUGIN_SERVICE, "StateChange", payload))
        assert (reply.code, reply.payload) == (0, b"")

    asyncio.run(main())
    assert handler.metrics.nri_requests.labels(method="EVENT_99", result="ignored")._value.get() == 1


# --- item 17: a Guaranteed container created while the agent was down is retried ----------------------


def test_a_container_synchronize_could_not_admit_is_pinned_once_cpus_free_up() -> None:
    node_state = NodeAgentState(ResourceManager(TOPOLOGY, CONFIG))
    pods = [ev.sandbox(f"g{i}") for i in range(8)]
    running = [ev.guaranteed(p, n=2, cpus="0-15", state=api_pb2.CONTAINER_RUNNING) for p in pods]
    result = node_state.synchronize(pods, running)
    assert len(result.failed) == 1
    waiting = result.failed[0][0]
    assert set(node_state.waiting) == {waiting} and node_state.records[waiting].exclusive is None
    # another pod goes: its CPUs are free, the waiting container is admitted and pinned at once
    gone = next(p for p in pods if f"ctr-{p.name}-main" != waiting)
    updates = node_state.remove_pod(gone.id, gone.uid)
    pinned = {u.container_id: u.cpus for u in updates}
    assert node_state.records[waiting].exclusive is not None
    assert pinned[waiting] == node_state.records[waiting].exclusive
    assert node_state.waiting == {} and node_state.check() == []


def test_a_restart_retries_containers_left_unpinned() -> None:
    node_state = NodeAgentState(ResourceManager(TOPOLOGY, CONFIG))
    pods = [ev.sandbox(f"g{i}") for i in range(8)]
    running = [ev.guaranteed(p, n=2, cpus="0-15", state=api_pb2.CONTAINER_RUNNING) for p in pods]
    waiting = node_state.synchronize(pods, running).failed[0][0]
    snapshot = node_state.snapshot()
    # while the agent is down, another pod goes; the restarted agent restores its checkpoint
    restarted = NodeAgentState(ResourceManager(TOPOLOGY, CONFIG))
    restarted.restore(snapshot)
    gone = next(p for p in pods if f"ctr-{p.name}-main" != waiting)
    still = [p for p in pods if p is not gone]
    result = restarted.synchronize(still, [c for c in running if c.pod_sandbox_id != gone.id])
    assert result.failed == ()
    assert restarted.records[waiting].exclusive is not None
    assert restarted.check() == []


# --- item 18: ready only once the runtime confirmed the cpusets Synchronize decided ---------------------


@pytest.mark.parametrize("runtime_fails", [False, True])
async def test_ready_only_after_the_runtime_confirmed_the_sync_cpusets(short_tmp: Any, runtime_fails: bool) -> None:
    from test_agent_nri import options, running_agent

    from numaplane_harness.nrifake import FakeRuntime

    shared = sandbox("shared", qos="BestEffort")
    pinned = sandbox("pinned")
    running = [
        # created while the agent was down: the shared one sits on CPU 1, the Guaranteed one everywhere
        container(shared, cpus="1", state=api_pb2.CONTAINER_RUNNING),
        guaranteed(pinned, n=2, cpus="0-15", state=api_pb2.CONTAINER_RUNNING),
    ]
    rt = FakeRuntime(pods=[shared, pinned], containers=running, failed_updates=runtime_fails, **FIXED_RUNTIME)
    await rt.listen(str(short_tmp / "nri.sock"))
    try:
        async with running_agent(options(short_tmp)) as agent:
            session = await rt.wait_session(1)
            await asyncio.wait_for(session.synchronized.wait(), 5)
            assert session.sync_response is not None and len(session.sync_response.update) == 2
            if runtime_fails:
                await asyncio.sleep(1.0)
                ok, details = agent.readiness()
                assert not ok and details["cpusetsConfirmed"] is False
                return
            await agent.wait_ready(5)
            confirmed = {u.container_id: u.linux.resources.cpu.cpus for r in session.updates for u in r.update}
            answered = {u.container_id: u.linux.resources.cpu.cpus for u in session.sync_response.update}
            assert confirmed == answered  # the same cpusets, re-sent and confirmed after the answer
            assert agent.readiness()[1]["cpusetsConfirmed"] is True
    finally:
        await rt.close()
