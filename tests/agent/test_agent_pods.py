"""With API access the agent reads its node's Pods (read-only) and their exact requests win over NRI's view."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from agent_helpers import FIXED_RUNTIME, container, guaranteed, sandbox
from test_agent_nri import TOPOLOGY, create, options, running_agent

from numaplane.agent.daemon import Agent
from numaplane.kube.client import LightkubePort
from numaplane.kube.resources import POD
from numaplane.nri.proto import api_pb2
from numaplane.topology.cpuset import CPUSet
from numaplane_harness.nrifake import FakeRuntime

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
        assert agent.state is not None and agent.state.check() == []
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


def reuse_pod_doc(node: str) -> dict[str, object]:
    """An init container of 6 CPUs, then a sidecar of 2 and an app container of 2 (Guaranteed)."""

    def c(name: str, cpu: str, **extra: str) -> dict[str, object]:
        q = {"cpu": cpu, "memory": "64Mi"}
        return {"name": name, "image": "x", "resources": {"requests": q, "limits": q}, **extra}

    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "reuse", "namespace": "default"},
        "spec": {
            "nodeName": node,
            "initContainers": [c("init", "6"), c("proxy", "2", restartPolicy="Always")],
            "containers": [c("app", "2")],
        },
    }


async def test_a_known_pod_is_admitted_as_a_whole_and_survives_a_restart(
    short_tmp: Path, fake_kube: LightkubePort
) -> None:
    """Through the wire and the API: RUN_POD_SANDBOX admits the pod, the sidecar and the app container
    reuse the init container's CPUs (the sidecar's are never reused), the init container's removal
    releases the rest; after a restart (checkpoint) the whole pod is in place and Synchronize changes nothing."""
    created = await fake_kube.create(POD, reuse_pod_doc("node-a"))
    runtime = FakeRuntime(**FIXED_RUNTIME)
    await runtime.listen(str(short_tmp / "nri.sock"))
    agent_options = options(short_tmp)
    try:
        agent = Agent(agent_options, topology=TOPOLOGY, kube=fake_kube)
        await agent.start()
        try:
            session = await runtime.wait_session(1)
            await agent.wait_ready()
            assert agent.pods is not None and agent.state is not None
            await asyncio.wait_for(agent.pods.informer.wait_for_sync(), 10)
            be = sandbox("be", qos="BestEffort")
            await create(runtime, be, container(be))
            sb = sandbox("reuse")
            sb.uid = created["metadata"]["uid"]
            await runtime.state_change(api_pb2.RUN_POD_SANDBOX, sb)
            await agent.sender.wait_idle()  # type: ignore[union-attr]
            assert set(agent.state.manager.pods) == {sb.uid}  # admitted before any container exists
            init_ctr = guaranteed(sb, "init", n=6)
            init = (await create(runtime, sb, init_ctr)).adjust.linux.resources.cpu.cpus
            proxy = (await create(runtime, sb, guaranteed(sb, "proxy", n=2))).adjust.linux.resources.cpu.cpus
            app = (await create(runtime, sb, guaranteed(sb, "app", n=2))).adjust.linux.resources.cpu.cpus
            init_set, proxy_set, app_set = CPUSet.parse(init), CPUSet.parse(proxy), CPUSet.parse(app)
            # both later containers reuse the init container's CPUs; the app never reuses the sidecar's
            assert (proxy_set | app_set).is_subset_of(init_set) and not proxy_set & app_set
            assert agent.state.check() == []
            # the init container exited long ago; its removal gives back what the app does not reuse
            runtime.containers.remove(init_ctr)
            await runtime.state_change(api_pb2.REMOVE_CONTAINER, sb, init_ctr)
            await agent.sender.wait_idle()  # type: ignore[union-attr]
            pool = agent.state.shared_pool
            assert (init_set - app_set - proxy_set).size() == 2 and (init_set - app_set - proxy_set).is_subset_of(pool)
            sent = [(u.container_id, u.linux.resources.cpu.cpus) for r in session.updates for u in r.update]
            assert sent[-1] == ("ctr-be-main", pool.format())
            await agent.writer.flush()  # type: ignore[union-attr]
            before = agent.state.snapshot()
            runtime.containers[0].linux.resources.cpu.cpus = pool.format()  # the fake keeps what it was told
        finally:
            await agent.stop()
        # restart: the checkpoint brings the whole pod back; the runtime's state matches it
        agent = Agent(agent_options, topology=TOPOLOGY, kube=fake_kube)
        await agent.start()
        try:
            session = await runtime.wait_session(2)
            await asyncio.wait_for(session.synchronized.wait(), 5)
            assert agent.checkpoint_status == "restored"
            assert session.sync_response is not None and list(session.sync_response.update) == []
            assert agent.state is not None and agent.state.snapshot() == before and agent.state.check() == []
            # the pod's sandbox stops: everything it held returns to the pool
            await runtime.state_change(api_pb2.STOP_POD_SANDBOX, sb)
            assert agent.state.manager.pods == {} and agent.state.shared_pool == TOPOLOGY.all_cpus
        finally:
            await agent.stop()
    finally:
        await runtime.close()


async def test_running_pods_are_adopted_as_whole_pods_at_the_first_synchronize(
    short_tmp: Path, fake_kube: LightkubePort
) -> None:
    """No checkpoint, a pod already running (its init container stopped): the agent waits for the
    informer's first list before dialling the runtime, so Synchronize admits the pod as a whole."""
    created = await fake_kube.create(POD, reuse_pod_doc("node-a"))
    sb = sandbox("reuse")
    sb.uid = created["metadata"]["uid"]
    running = [
        guaranteed(sb, "init", n=6, cpus="0-15", state=api_pb2.CONTAINER_STOPPED),
        guaranteed(sb, "proxy", n=2, cpus="0-15", state=api_pb2.CONTAINER_RUNNING),
        guaranteed(sb, "app", n=2, cpus="0-15", state=api_pb2.CONTAINER_RUNNING),
    ]
    runtime = FakeRuntime(pods=[sb], containers=running)
    await runtime.listen(str(short_tmp / "nri.sock"))
    agent = Agent(options(short_tmp), topology=TOPOLOGY, kube=fake_kube)
    try:
        await agent.start()
        session = await runtime.wait_session(1)
        await asyncio.wait_for(session.synchronized.wait(), 5)
        node_state = agent.state
        assert node_state is not None and set(node_state.manager.pods) == {sb.uid} and set(node_state.pods) == {sb.uid}
        init = node_state.manager.cpu.state.get(sb.uid, "init")
        proxy, app = node_state.records["ctr-reuse-proxy"].exclusive, node_state.records["ctr-reuse-app"].exclusive
        assert init is not None and proxy is not None and app is not None
        assert (proxy | app).is_subset_of(init) and not proxy & app and node_state.check() == []
        assert session.sync_response is not None
        assert {u.container_id: u.linux.resources.cpu.cpus for u in session.sync_response.update} == {
            "ctr-reuse-proxy": proxy.format(),
            "ctr-reuse-app": app.format(),
        }
    finally:
        await agent.stop()
        await runtime.close()
