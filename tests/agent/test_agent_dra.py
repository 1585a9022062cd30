"""The agent aligns exclusive CPUs with a pod's DRA devices (claims and slices from the API, NRI in)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import guaranteed, sandbox
from dra_helpers import allocation_status, claim, pod_with_claim, resource_slice
from test_agent_nri import TOPOLOGY, create, options

from numaplane.agent.daemon import NO_API_FOR_DRA, Agent
from numaplane.agent.errors import AgentConfigError
from numaplane.grpcapi.podresources.client import PodResourcesClient
from numaplane.kube.client import LightkubePort
from numaplane.kube.resources import POD, RESOURCE_CLAIM, RESOURCE_SLICE
from numaplane.nri.errors import StatusError
from numaplane.policy.config import parse_config
from numaplane.policy.errors import PolicyConfigError
from numaplane.topology.cpuset import CPUSet
from numaplane_harness.nrifake import FakeRuntime

pytestmark = pytest.mark.timeout(60)

NODE0 = CPUSet.parse("0-3,8-11")
NODE1 = CPUSet.parse("4-7,12-15")
DRA_CONFIG = {
    "topologyManager": {"policy": "single-numa-node"},
    "cpuManager": {"reservedCPUs": "0"},
    "dra": {"enabled": True},
}


async def _allocated_pod(kube: LightkubePort, name: str, device: str) -> dict[str, Any]:
    """A pod bound to node-a whose claim ``<name>-accel`` is allocated ``device`` and reserved for it."""
    pod = await kube.create(POD, pod_with_claim(name, "node-a", f"{name}-accel"))
    created = await kube.create(RESOURCE_CLAIM, claim(f"{name}-accel"))
    await kube.update_status(RESOURCE_CLAIM, {**created, "status": allocation_status("node-a", device, pod)})
    return pod


async def _agent(folder: Path, kube: LightkubePort, config: dict[str, Any], **kw: Any) -> Agent:
    (folder / "config.json").write_text(json.dumps(config))
    agent = Agent(options(folder, **kw), topology=TOPOLOGY, kube=kube)
    await agent.start()
    return agent


async def _synced(agent: Agent) -> None:
    assert agent.pods is not None and agent.claims is not None and agent.claims.started
    await asyncio.wait_for(agent.pods.informer.wait_for_sync(), 10)
    await asyncio.wait_for(agent.claims.wait_for_sync(), 10)


async def _wait_known(agent: Agent, kube: LightkubePort, claims: int, slices: int) -> None:
    assert agent.claims is not None and agent.pods is not None
    for _ in range(500):
        seen = len(agent.claims.claims.store) >= claims and len(agent.claims.slices.store) >= slices
        # the claims' status writes must have arrived too
        if seen and all(o.get("status", {}).get("allocation") for o in agent.claims.claims.store.list_objects()):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the agent's informers did not see the claims and slices")


async def test_exclusive_cpus_and_podresources_follow_the_claimed_device(
    short_tmp: Path, fake_kube: LightkubePort
) -> None:
    """Without DRA the kubelet's choice for 2 CPUs is node 0 (``1,9``); with the claim's device on node 1
    the agent pins them on node 1, records the device, and lists it in PodResources ``dynamic_resources``."""
    await fake_kube.create(RESOURCE_SLICE, resource_slice("node-a", {"accel0": 0, "accel1": 1}))
    await fake_kube.create(RESOURCE_SLICE, resource_slice("node-b", {"accel0": 1}, name="other-node"))
    pod = await _allocated_pod(fake_kube, "gpu", "accel1")
    runtime = FakeRuntime()
    await runtime.listen(str(short_tmp / "nri.sock"))
    socket = short_tmp / "pr.sock"
    agent = await _agent(short_tmp, fake_kube, DRA_CONFIG, podresources_socket=str(socket))
    try:
        await runtime.wait_session(1)
        await agent.wait_ready()
        await _synced(agent)
        await _wait_known(agent, fake_kube, claims=1, slices=1)
        assert agent.claims is not None and len(agent.claims.slices.store) == 1  # this node's slices only
        sb = sandbox("gpu")
        sb.uid = pod["metadata"]["uid"]
        answer = await create(runtime, sb, guaranteed(sb, n=2))
        cpus = CPUSet.parse(answer.adjust.linux.resources.cpu.cpus)
        assert cpus.size() == 2 and cpus.is_subset_of(NODE1), cpus
        assert agent.state is not None and agent.state.check() == []
        admission = agent.state.manager.admissions[sb.uid]
        (container,) = admission.containers
        assert container.hint is not None and container.hint.numa is not None and container.hint.numa.ids() == (1,)
        (dra,) = [a for a in container.allocations if a.plugin == "dra"]
        assert [d["device"] for d in dra.extra["devices"]] == ["accel1"] and dra.extra["devices"][0]["numa"] == [1]
        async with PodResourcesClient(str(socket), timeout_seconds=5) as client:
            listed = {p.name: p for p in await client.list()}
        (main,) = listed["gpu"].containers
        assert set(main.cpu_ids) == set(cpus)
        (dynamic,) = main.dynamic_resources
        assert (dynamic.claim_name, dynamic.claim_namespace) == ("gpu-accel", "default")
        assert [(r.driver_name, r.pool_name, r.device_name) for r in dynamic.claim_resources] == [
            ("accel.example.com", "node-a", "accel1")
        ]
    finally:
        await agent.stop()
        await runtime.close()


async def test_single_numa_node_refuses_a_device_whose_zone_has_no_cpus_left(
    short_tmp: Path, fake_kube: LightkubePort
) -> None:
    await fake_kube.create(RESOURCE_SLICE, resource_slice("node-a", {"accel0": 0, "accel1": 1}))
    pod = await _allocated_pod(fake_kube, "late", "accel1")
    runtime = FakeRuntime()
    await runtime.listen(str(short_tmp / "nri.sock"))
    agent = await _agent(short_tmp, fake_kube, DRA_CONFIG)
    try:
        await runtime.wait_session(1)
        await agent.wait_ready()
        await _synced(agent)
        await _wait_known(agent, fake_kube, claims=1, slices=1)
        filler = sandbox("filler")  # not in the API: admitted alone, takes all 8 CPUs of node 1
        answer = await create(runtime, filler, guaranteed(filler, n=8))
        assert CPUSet.parse(answer.adjust.linux.resources.cpu.cpus) == NODE1
        sb = sandbox("late")
        sb.uid = pod["metadata"]["uid"]
        with pytest.raises(StatusError) as refused:
            await runtime.create_container(sb, guaranteed(sb, n=2))
        assert "TopologyAffinityError" in refused.value.message and "default/late" in refused.value.message
        assert agent.state is not None and sb.uid not in agent.state.manager.admissions
        dra = agent.state.manager.plugins[-1]
        assert dra.name == "dra" and not dra.allocations()
    finally:
        await agent.stop()
        await runtime.close()


async def test_without_dra_enabled_the_claim_takes_no_part(short_tmp: Path, fake_kube: LightkubePort) -> None:
    """The same pod with ``dra`` off gets the kubelet's own choice (node 0): the node config switches it."""
    await fake_kube.create(RESOURCE_SLICE, resource_slice("node-a", {"accel1": 1}))
    pod = await _allocated_pod(fake_kube, "off", "accel1")
    runtime = FakeRuntime()
    await runtime.listen(str(short_tmp / "nri.sock"))
    config = {k: v for k, v in DRA_CONFIG.items() if k != "dra"}
    agent = await _agent(short_tmp, fake_kube, config)
    try:
        await runtime.wait_session(1)
        await agent.wait_ready()
        assert agent.claims is not None and not agent.claims.started  # no informer on resource.k8s.io
        assert agent.pods is not None
        await asyncio.wait_for(agent.pods.informer.wait_for_sync(), 10)
        sb = sandbox("off")
        sb.uid = pod["metadata"]["uid"]
        answer = await create(runtime, sb, guaranteed(sb, n=2))
        assert answer.adjust.linux.resources.cpu.cpus == "1,9"
    finally:
        await agent.stop()
        await runtime.close()


async def test_an_unallocated_claim_is_recorded_not_aligned(short_tmp: Path, fake_kube: LightkubePort) -> None:
    await fake_kube.create(RESOURCE_SLICE, resource_slice("node-a", {"accel1": 1}))
    pod = await fake_kube.create(POD, pod_with_claim("pending", "node-a", "pending-accel"))
    await fake_kube.create(RESOURCE_CLAIM, claim("pending-accel"))
    runtime = FakeRuntime()
    await runtime.listen(str(short_tmp / "nri.sock"))
    agent = await _agent(short_tmp, fake_kube, DRA_CONFIG)
    try:
        await runtime.wait_session(1)
        await agent.wait_ready()
        await _synced(agent)
        sb = sandbox("pending")
        sb.uid = pod["metadata"]["uid"]
        await create(runtime, sb, guaranteed(sb, n=2))
        assert agent.state is not None
        (container,) = agent.state.manager.admissions[sb.uid].containers
        (dra,) = [a for a in container.allocations if a.plugin == "dra"]
        assert dra.extra["unresolved"] == ["claim 'accel': ResourceClaim default/pending-accel is not allocated"]
    finally:
        await agent.stop()
        await runtime.close()


async def test_dra_needs_api_access(short_tmp: Path) -> None:
    (short_tmp / "config.json").write_text(json.dumps(DRA_CONFIG))
    agent = Agent(options(short_tmp), topology=TOPOLOGY)
    with pytest.raises(AgentConfigError, match=r"dra\.enabled: the agent reads ResourceClaims"):
        await agent.start()
    await agent.stop()
    # started without it, a config that enables it later is refused (the old one stays)
    (short_tmp / "config.json").write_text(json.dumps({"cpuManager": {"reservedCPUs": "0"}}))
    agent = Agent(options(short_tmp), topology=TOPOLOGY)
    await agent.start()
    try:
        assert agent.state is not None
        problems = agent.state.manager.check_config(DRA_CONFIG)
        assert problems == [f"dra.enabled: {NO_API_FOR_DRA}"]
    finally:
        await agent.stop()


@pytest.mark.parametrize(
    ("dra", "problem"),
    [
        ({"enabled": "yes"}, "dra.enabled must be a boolean"),
        ({"numaAttributes": "gpu.amd.com/numaNode"}, "dra.numaAttributes must be a list"),
        ({"numaAttributes": ["numaNode"]}, "dra.numaAttributes[0]: 'numaNode' is not a qualified attribute name"),
        ({"numaAttributes": ["x/y"] * 17}, "dra.numaAttributes: 17 names, at most 16"),
        ({"enabled": True, "driver": "x"}, "dra.driver: unknown field"),
    ],
)
def test_the_dra_section_is_validated(dra: dict[str, Any], problem: str) -> None:
    with pytest.raises(PolicyConfigError) as exc:
        parse_config({"dra": dra})
    assert problem in str(exc.value)


def test_the_dra_section_round_trips_and_stays_out_of_old_documents() -> None:
    config = parse_config({"dra": {"enabled": True, "numaAttributes": ["gpu.amd.com/numaNode"]}})
    assert config.dra_enabled and config.dra_numa_attributes == ("gpu.amd.com/numaNode",)
    assert parse_config(config.to_dict()) == config
    assert "dra" not in parse_config({}).to_dict()
