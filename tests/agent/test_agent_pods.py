"""With API access the agent reads its node's Pods (read-only) and their exact requests win over NRI's view."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from agent_helpers import container, sandbox
from test_agent_nri import TOPOLOGY, create, options, running_agent

from numaplane.agent.daemon import Agent
from numaplane.kube.client import LightkubePort
from numaplane.kube.resources import POD
from numaplane.nri.fake_runtime import FakeRuntime
from numaplane.nri.proto import api_pb2

pytestmark = pytest.mark.timeout(60)


def pod_doc(name: str, node: str, cpu: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "containers": [
                {"name": "main", "image": "x", "resources": {"limits": {"cpu": cpu, "memory": "64Mi"}}},
            ],
        },
    }


async def test_the_api_pod_gives_exact_requests(short_tmp: Path, fake_kube: LightkubePort) -> None:
    mine = await fake_kube.create(POD, pod_doc("mine", "node-a", "2"))
    await fake_kube.create(POD, pod_doc("elsewhere", "node-b", "2"))
    runtime = FakeRuntime()
    await runtime.listen(str(short_tmp / "nri.sock"))
    agent_options = options(short_tmp)

    agent = Agent(agent_options, topology=TOPOLOGY, kube=fake_kube)
    await agent.start()
    try:
        await runtime.wait_session(1)
        await agent.wait_ready()
        assert agent.pods is not None
        await asyncio.wait_for(agent.pods.informer.wait_for_sync(), 10)
        assert len(agent.pods.informer.store) == 1  # only this node's pods
        # the runtime's view says "burstable, 100m"; the API says Guaranteed with 2 CPUs
        sb = sandbox("mine", qos="Burstable")
        sb.uid = mine["metadata"]["uid"]
        response = await create(runtime, sb, container(sb, cpu_milli=100, memory=64 << 20))
        assert response.adjust.linux.resources.cpu.cpus == "1,9"
        # a pod the API does not know falls back to what NRI carries
        other = sandbox("unknown", qos="Burstable")
        response = await create(runtime, other, container(other, cpu_milli=2000, memory=64 << 20))
        assert response.adjust.linux.resources.cpu.cpus == "0,2-8,10-15"
        assert agent.core is not None and agent.core.check() == []
    finally:
        await agent.stop()
        await runtime.close()


async def test_update_container_keeps_the_agents_cpuset(short_tmp: Path) -> None:
    runtime = FakeRuntime()
    await runtime.listen(str(short_tmp / "nri.sock"))
    try:
        async with running_agent(options(short_tmp)) as agent:
            await runtime.wait_session(1)
            await agent.wait_ready()
            pod = sandbox("g")
            ctr = container(pod, cpu_milli=2000, cpu_limit_milli=2000, memory=64 << 20)
            await create(runtime, pod, ctr)
            request = api_pb2.UpdateContainerRequest(pod=pod, container=ctr)
            request.linux_resources.cpu.cpus = "0-15"  # e.g. a kubelet resize writing a cpuset
            answer = await runtime.call("UpdateContainer", request, api_pb2.UpdateContainerResponse)
            assert [(u.container_id, u.linux.resources.cpu.cpus) for u in answer.update] == [("ctr-g-main", "1,9")]
            request.linux_resources.cpu.cpus = "1,9"
            answer = await runtime.call("UpdateContainer", request, api_pb2.UpdateContainerResponse)
            assert list(answer.update) == []
    finally:
        await runtime.close()
