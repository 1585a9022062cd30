"""The agent as an NRI plugin against the fake runtime (real wire protocol over a unix socket)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from agent_helpers import FIXED_RUNTIME, container, guaranteed, sandbox

from numaplane.agent.checkpoint import CheckpointIdentity, encode
from numaplane.agent.daemon import CHECKPOINT_FILE, Agent, AgentOptions
from numaplane.nri.errors import StatusError
from numaplane.nri.proto import api_pb2
from numaplane.nri.stub import event_mask
from numaplane.topology.model import synthetic
from numaplane_harness.nrifake import FakeRuntime

pytestmark = pytest.mark.timeout(60)

TOPOLOGY = synthetic(sockets=2, cores_per_numa=4, threads_per_core=2)  # node 0: 0-3,8-11; node 1: 4-7,12-15
CONFIG = {"topologyManager": {"policy": "single-numa-node"}, "cpuManager": {"reservedCPUs": "0"}}


def options(folder: Path, **kw: object) -> AgentOptions:
    config = folder / "config.json"
    if not config.exists():
        config.write_text(json.dumps(CONFIG))
    base: dict[str, object] = {
        "nri_socket": str(folder / "nri.sock"),
        "state_dir": folder / "state",
        "config_file": config,
        "node_name": "node-a",
        "podresources_socket": None,
        "nri_backoff_initial_seconds": 0.05,
        "checkpoint_interval_seconds": 0.01,
        "config_poll_seconds": 0.05,
    }
    base.update(kw)
    return AgentOptions(**base)  # type: ignore[arg-type]


@contextlib.asynccontextmanager
async def running_agent(opts: AgentOptions) -> AsyncIterator[Agent]:
    agent = Agent(opts, topology=TOPOLOGY)
    await agent.start()
    try:
        yield agent
    finally:
        await agent.stop()


@pytest.fixture
async def runtime(short_tmp: Path) -> AsyncIterator[FakeRuntime]:
    rt = FakeRuntime(**FIXED_RUNTIME)
    await rt.listen(str(short_tmp / "nri.sock"))
    try:
        yield rt
    finally:
        await rt.close()


async def create(rt: FakeRuntime, pod: api_pb2.PodSandbox, ctr: api_pb2.Container) -> api_pb2.CreateContainerResponse:
    response = await rt.create_container(pod, ctr)
    ctr.linux.resources.cpu.cpus = response.adjust.linux.resources.cpu.cpus
    ctr.state = api_pb2.CONTAINER_RUNNING
    rt.pods.append(pod)
    rt.containers.append(ctr)
    return response


async def test_create_pin_reject_stop_remove(runtime: FakeRuntime, short_tmp: Path) -> None:
    async with running_agent(options(short_tmp)) as agent:
        session = await runtime.wait_session(1)
        await agent.wait_ready()
        # the subscription derived from the handler's methods is the one the agent always sent:
        # RUN/STOP/REMOVE_POD_SANDBOX, CREATE/POST_START/UPDATE/STOP/REMOVE_CONTAINER
        assert session.events == 0x6CF == event_mask(agent.handler)
        be_pod = sandbox("be", qos="BestEffort")
        be = container(be_pod)
        r = await create(runtime, be_pod, be)
        assert r.adjust.linux.resources.cpu.cpus == "0-15" and not r.update
        g_pod = sandbox("g")
        r = await create(runtime, g_pod, guaranteed(g_pod, n=2))
        assert r.adjust.linux.resources.cpu.cpus == "1,9"
        assert [(u.container_id, u.linux.resources.cpu.cpus, u.ignore_failure) for u in r.update] == [
            ("ctr-be-main", "0,2-8,10-15", True)
        ]
        big = sandbox("big")
        with pytest.raises(StatusError) as exc:
            await runtime.create_container(big, guaranteed(big, n=9))
        assert "TopologyAffinityError" in exc.value.message and "default/big" in exc.value.message
        stop = await runtime.call(
            "StopContainer",
            api_pb2.StopContainerRequest(pod=g_pod, container=runtime.containers[1]),
            api_pb2.StopContainerResponse,
        )
        assert list(stop.update) == []  # a stopped container keeps its CPUs until it is removed
        # a removal answered by StateChange: the pool growth goes out with UpdateContainers
        await runtime.state_change(api_pb2.REMOVE_CONTAINER, g_pod, runtime.containers[1])
        await agent.sender.wait_idle()  # type: ignore[union-attr]
        sent = [(u.container_id, u.linux.resources.cpu.cpus) for req in session.updates for u in req.update]
        assert sent == [("ctr-be-main", "0-15")]
        r = await create(runtime, g_pod, guaranteed(g_pod, "second", n=2))
        await runtime.state_change(api_pb2.REMOVE_POD_SANDBOX, g_pod)
        await agent.sender.wait_idle()  # type: ignore[union-attr]
        sent = [(u.container_id, u.linux.resources.cpu.cpus) for req in session.updates for u in req.update]
        assert sent == [("ctr-be-main", "0-15")] * 2
        assert agent.state is not None and agent.state.check() == []
        text = await asyncio.to_thread(
            agent.metrics.registry.get_sample_value,
            "numaplane_agent_admissions_total",
            {"result": "rejected", "reason": "TopologyAffinityError"},
        )
        assert text == 1.0


async def test_reconnect_resynchronizes_and_repins(runtime: FakeRuntime, short_tmp: Path) -> None:
    async with running_agent(options(short_tmp)) as agent:
        await runtime.wait_session(1)
        await agent.wait_ready()
        g_pod = sandbox("g")
        await create(runtime, g_pod, guaranteed(g_pod, n=2))
        runtime.disconnect()
        # while disconnected the runtime created a container without asking us
        late_pod = sandbox("late")
        late = guaranteed(late_pod, n=2, cpus="0-15", state=api_pb2.CONTAINER_RUNNING)
        runtime.pods.append(late_pod)
        runtime.containers.append(late)
        session = await runtime.wait_session(2)
        await asyncio.wait_for(session.synchronized.wait(), 5)
        assert session.sync_response is not None
        assert [(u.container_id, u.linux.resources.cpu.cpus) for u in session.sync_response.update] == [
            ("ctr-late-main", "2,10")
        ]
        # a POST_START of a container we did not pin at creation re-pins it through UpdateContainers
        await runtime.state_change(api_pb2.POST_START_CONTAINER, late_pod, late)
        await agent.sender.wait_idle()  # type: ignore[union-attr]
        assert [(u.container_id, u.linux.resources.cpu.cpus) for r in session.updates for u in r.update] == [
            ("ctr-late-main", "2,10")
        ]
        assert agent.handler is not None and agent.handler.synchronizations == 2


async def test_checkpoint_survives_restart_and_bad_files_are_moved_aside(runtime: FakeRuntime, short_tmp: Path) -> None:
    opts = options(short_tmp)
    async with running_agent(opts) as agent:
        await runtime.wait_session(1)
        await agent.wait_ready()
        for name in ("a", "b"):
            pod = sandbox(name)
            await create(runtime, pod, guaranteed(pod, n=2))
        await agent.writer.flush()  # type: ignore[union-attr]
        before = agent.state.snapshot()  # type: ignore[union-attr]
    state = opts.state_dir / CHECKPOINT_FILE
    assert json.loads(state.read_text())["data"]["containers"][0]["exclusive"] == "1,9"
    # restart: restored from the checkpoint, Synchronize finds everything in place
    async with running_agent(opts) as agent:
        session = await runtime.wait_session(2)
        await asyncio.wait_for(session.synchronized.wait(), 5)
        assert agent.checkpoint_status == "restored"
        assert session.sync_response is not None and list(session.sync_response.update) == []
        assert agent.state.snapshot()["containers"] == before["containers"]  # type: ignore[union-attr]
    # a damaged file: moved aside, state rebuilt from the runtime, same CPUs, nothing held twice
    raw = state.read_bytes()
    state.write_bytes(raw[: len(raw) // 2])
    async with running_agent(opts) as agent:
        session = await runtime.wait_session(3)
        await asyncio.wait_for(session.synchronized.wait(), 5)
        assert agent.checkpoint_status == "corrupted" and agent.quarantined is not None
        assert agent.quarantined.exists() and ".corrupted-" in agent.quarantined.name
        assert agent.state is not None and agent.state.check() == []
        assert sorted(r.exclusive.format() for r in agent.state.records.values() if r.exclusive) == ["1,9", "2,10"]
        assert (
            agent.metrics.registry.get_sample_value("numaplane_agent_checkpoint_loads_total", {"result": "corrupted"})
            == 1
        )
        await agent.writer.flush()  # type: ignore[union-attr]
    # an intact file of another node: foreign (editing the node name alone would break the checksum)
    doc = json.loads(state.read_text())
    state.write_bytes(encode(doc["data"], CheckpointIdentity("node-b", doc["topology"])))
    async with running_agent(opts) as agent:
        await runtime.wait_session(4)
        assert agent.checkpoint_status == "foreign"


async def test_live_reconfiguration(runtime: FakeRuntime, short_tmp: Path) -> None:
    opts = options(short_tmp)
    async with running_agent(opts) as agent:
        await runtime.wait_session(1)
        await agent.wait_ready()
        pod = sandbox("g")
        await create(runtime, pod, guaranteed(pod, n=2))  # holds 1,9
        watcher = agent.watcher
        assert watcher is not None
        # invalid: reserving a CPU a container holds -> rejected, old config stays
        assert opts.config_file is not None
        opts.config_file.write_text(json.dumps({**CONFIG, "cpuManager": {"reservedCPUs": "0-1"}}))
        async with asyncio.timeout(5):
            while watcher.rejected < 1:
                await asyncio.sleep(0.02)
        assert "held exclusively" in watcher.last_error
        assert agent.readiness()[1]["configRejected"] == watcher.last_error
        assert agent.metrics.registry.get_sample_value("numaplane_agent_config_last_reload_valid") == 0
        # syntax error -> rejected too
        opts.config_file.write_text("{not: [valid")
        async with asyncio.timeout(5):
            while watcher.rejected < 2:
                await asyncio.sleep(0.02)
        # valid: policy none for new pods; the existing allocation is untouched
        opts.config_file.write_text(
            json.dumps({"topologyManager": {"policy": "best-effort"}, "cpuManager": {"reservedCPUs": "0,8"}})
        )
        async with asyncio.timeout(5):
            while watcher.applied < 1:
                await asyncio.sleep(0.02)
        assert agent.state is not None and agent.state.manager.config.topology_policy == "best-effort"
        assert agent.state.records["ctr-g-main"].exclusive is not None
        assert agent.state.records["ctr-g-main"].exclusive.format() == "1,9"
        big = sandbox("big")
        r = await create(runtime, big, guaranteed(big, n=9))  # fits across NUMA nodes under best-effort
        assert len(r.adjust.linux.resources.cpu.cpus.split(",")) >= 2
        assert (
            agent.metrics.registry.get_sample_value("numaplane_agent_config_reloads_total", {"result": "applied"}) == 1
        )


async def test_many_shared_containers_are_moved_in_the_background(runtime: FakeRuntime, short_tmp: Path) -> None:
    async with running_agent(options(short_tmp)) as agent:
        session = await runtime.wait_session(1)
        await agent.wait_ready()
        for i in range(20):  # more than the 16 updates that may travel in an answer
            pod = sandbox(f"be{i}", qos="BestEffort")
            await create(runtime, pod, container(pod))
        g = sandbox("g")
        r = await create(runtime, g, guaranteed(g, n=2))
        assert r.adjust.linux.resources.cpu.cpus == "1,9" and not r.update
        await agent.sender.wait_idle()  # type: ignore[union-attr]
        sent = {u.container_id: u.linux.resources.cpu.cpus for req in session.updates for u in req.update}
        assert sent == {f"ctr-be{i}-main": "0,2-8,10-15" for i in range(20)}
        assert agent.state is not None and agent.state.stale_shared() == []


async def test_a_synchronize_split_over_several_requests_is_reconciled_once_complete(short_tmp: Path) -> None:
    """NRI >= 0.8 sends a large state in parts flagged ``SynchronizeRequest.more``; the stub answers each
    with ``SynchronizeResponse.more`` and no updates, and the agent's handler sees one call with the
    whole list at the last part."""
    from numaplane.agent.handler import AgentHandler, StateRunner
    from numaplane.agent.state import NodeAgentState
    from numaplane.nri.protocol import RequestReceived
    from numaplane.nri.stub import PLUGIN_SERVICE, Stub
    from numaplane.policy.manager import ResourceManager

    handler = AgentHandler(StateRunner(NodeAgentState(ResourceManager(TOPOLOGY, CONFIG))))
    stub = Stub(handler)
    pods = [sandbox(f"g{i}") for i in range(3)]
    running = [guaranteed(p, n=2, cpus="0-15", state=api_pb2.CONTAINER_RUNNING) for p in pods]
    first = api_pb2.SynchronizeRequest(pods=pods[:2], containers=running[:2], more=True)
    # the wire form of the flags: SynchronizeRequest field 3, SynchronizeResponse field 2 (varint true)
    assert first.SerializeToString().endswith(b"\x18\x01")

    async def sync(request: api_pb2.SynchronizeRequest) -> api_pb2.SynchronizeResponse:
        reply = await stub.serve(RequestReceived(1, PLUGIN_SERVICE, "Synchronize", request.SerializeToString()))
        assert reply.code == 0, reply.message
        return api_pb2.SynchronizeResponse.FromString(reply.payload)

    answer = await sync(first)
    assert answer.SerializeToString() == b"\x10\x01" and answer.more and handler.state.records == {}
    assert handler.synchronizations == 0
    assert handler.metrics.nri_requests.labels(method="Synchronize", result="partial")._value.get() == 1
    answer = await sync(api_pb2.SynchronizeRequest(pods=pods[2:], containers=running[2:]))
    assert not answer.more and handler.synchronizations == 1
    assert sorted(u.container_id for u in answer.update) == ["ctr-g0-main", "ctr-g1-main", "ctr-g2-main"]
    assert len(handler.state.records) == 3 and handler.state.check() == []


async def test_a_split_synchronize_from_the_runtime(short_tmp: Path) -> None:
    """Through the wire: the fake runtime splits the state into parts of two, as NRI 0.8 does, and
    drops a plugin that answers a ``more`` part wrongly; the agent stays connected and adopts all."""
    pods = [sandbox(f"g{i}") for i in range(5)]
    running = [guaranteed(p, n=2, cpus="0-15", state=api_pb2.CONTAINER_RUNNING) for p in pods]
    rt = FakeRuntime(pods=pods, containers=running, sync_chunk=2)
    await rt.listen(str(short_tmp / "nri.sock"))
    try:
        async with running_agent(options(short_tmp)) as agent:
            session = await rt.wait_session(1)
            await asyncio.wait_for(session.synchronized.wait(), 5)
            assert session.sync_parts == 3 and session.sync_response is not None
            assert len(session.sync_response.update) == 5
            assert agent.handler is not None and agent.handler.synchronizations == 1
            assert agent.state is not None and len(agent.state.records) == 5 and agent.state.check() == []
            assert len(rt.sessions) == 1  # never dropped
    finally:
        await rt.close()
