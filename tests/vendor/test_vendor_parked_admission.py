"""A whole pod that asks an out-of-process plugin, through the agent's state machine and its driver.

RUN_POD_SANDBOX and the pod's first CreateContainer meet the same parked admission: the plugin is
asked once, both calls get the one decision; a plain pod is decided while it waits; a pod whose
sandbox goes while its plugin is asked is abandoned and holds nothing.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from accelerator_plugin import NAME, RESOURCE

from numaplane.agent.asking import Answering
from numaplane.agent.state import NodeAgentState
from numaplane.grpcapi.pluginapi.adapter import GrpcResourcePlugin
from numaplane.policy.config import parse_config
from numaplane.policy.manager import ResourceManager
from numaplane.resources.pod import Pod, parse_pod
from numaplane.topology.model import synthetic

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agent"))
from state_helpers import guaranteed, sandbox

TOPOLOGY = synthetic(sockets=2, numa_per_socket=1, cores_per_numa=4, threads_per_core=2)
CONFIG = {"topologyManager": {"policy": "single-numa-node"}, "cpuManager": {"reservedCPUCount": 2}}


def _pod(name: str, accelerators: int) -> Pod:
    res: dict[str, Any] = {"cpu": "1", "memory": "64Mi"}
    if accelerators:
        res[RESOURCE] = str(accelerators)
    spec = {"containers": [{"name": "main", "image": "x", "resources": {"requests": res, "limits": res}}]}
    return parse_pod({"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": spec})


async def _core(socket: Path, *pods: Pod) -> tuple[NodeAgentState, GrpcResourcePlugin]:
    config = parse_config(CONFIG)
    plugin = GrpcResourcePlugin(NAME, {RESOURCE}, str(socket), topology=TOPOLOGY, config=config, timeout_seconds=5)
    await asyncio.to_thread(plugin.connect)
    by_uid = {p.uid: p for p in pods}
    node_state = NodeAgentState(ResourceManager(TOPOLOGY, config, extra_plugins=[plugin]), pod_lookup=by_uid.get)
    return node_state, plugin


async def test_run_pod_and_create_share_one_parked_admission(accelerator_socket: Path) -> None:
    node_state, plugin = await _core(accelerator_socket, _pod("ml", 1), _pod("plain", 0))
    answering = Answering(node_state)
    try:
        sb = sandbox("ml")
        started, created = await asyncio.gather(
            answering.call(lambda: node_state.run_pod(sb)),
            answering.call(lambda: node_state.create(sb, guaranteed(sb, "main", n=1))),
        )
        assert answering.asked == 1 and node_state.parked == {}
        assert started.admitted and created.exclusive
        assert dict(created.env)["ACCELERATOR_VISIBLE_DEVICES"] in {"acc0-0", "acc1-0", "acc0-1", "acc1-1"}
        assert list(plugin.allocations()) == [("uid-ml", "main")]
        plain = sandbox("plain")
        assert (await answering.call(lambda: node_state.create(plain, guaranteed(plain, n=1)))).exclusive
        assert answering.asked == 1  # the plain pod never waited on the plugin
        assert node_state.check() == []
    finally:
        await plugin.aclose()


async def test_a_pod_whose_sandbox_goes_while_asked_holds_nothing(accelerator_socket: Path) -> None:
    node_state, plugin = await _core(accelerator_socket, _pod("ml", 1))
    answering = Answering(node_state)
    try:
        sb = sandbox("ml")
        waiting = asyncio.create_task(answering.call(lambda: node_state.run_pod(sb)))
        while not node_state.parked:
            await asyncio.sleep(0)
        node_state.remove_pod(sb.id, sb.uid)  # StopPodSandbox while the plugin is asked
        assert node_state.parked == {} and node_state.manager.cpu.state.get("uid-ml", "main") is None
        started = await waiting
        assert not started.admitted and started.rejection is not None
        assert started.rejection.reason == "PluginUnavailable" and "abandoned" in started.rejection.message
        assert node_state.manager.pods == {} and node_state.check() == []
    finally:
        await plugin.aclose()
