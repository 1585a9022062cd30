"""The example accelerator plugin (``examples/plugins/accelerator_plugin.py``) registered with a running
agent: its allocation is enforced through the NRI adjustment (environment beside the cpuset) and is
visible in the agent's PodResources answers, served by the real PodResources gRPC server (every
accelerator by id and NUMA node in GetAllocatableResources, the held ones in List)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from agent_helpers import guaranteed, sandbox, stop_process, wait_for_socket
from test_agent_nri import create, options, running_agent
from test_agent_plugins import wait_plugin

from numaplane.grpcapi.podresources.client import PodResourcesClient
from numaplane.resources.pod import parse_pod
from numaplane_harness.nrifake import FakeRuntime

pytestmark = pytest.mark.timeout(90)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plugins" / "accelerator_plugin.py"
RESOURCE = "example.com/accelerator"
NAME = "example.com/accelerators"


async def test_accelerator_allocation_is_enforced_and_visible(short_tmp: Path) -> None:
    plugin_dir = short_tmp / "plugins"
    plugin_dir.mkdir()
    runtime = FakeRuntime()
    await runtime.listen(str(short_tmp / "nri.sock"))
    process = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--plugin-dir", str(plugin_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_socket(plugin_dir / "accelerator.sock", process)
        podres = short_tmp / "podres.sock"
        opts = options(short_tmp, plugin_dir=plugin_dir, plugin_health_seconds=0.1, podresources_socket=str(podres))
        async with running_agent(opts) as agent:
            await runtime.wait_session(1)
            await agent.wait_ready()
            await wait_plugin(agent, NAME)
            pod = sandbox("ml", annotations={"resources.numaplane.io/main": json.dumps({RESOURCE: 2})})
            # annotations never grant: the accelerators come from the pod spec (the informer's role here)
            limits = {"cpu": "2", "memory": "64Mi", RESOURCE: "2"}
            spec = parse_pod(
                {
                    "metadata": {"name": "ml", "namespace": pod.namespace, "uid": pod.uid},
                    "spec": {"containers": [{"name": "main", "resources": {"requests": limits, "limits": limits}}]},
                }
            )
            assert agent.state is not None
            agent.state.pod_lookup = {spec.uid: spec}.get
            response = await create(runtime, pod, guaranteed(pod, n=2))
            env = {kv.key: kv.value for kv in response.adjust.env}
            devices = env["ACCELERATOR_VISIBLE_DEVICES"].split(",")
            assert len(devices) == 2 and len({d.split("-")[0] for d in devices}) == 1  # one NUMA node
            assert env["ACCELERATOR_MEMORY_BYTES"] == str(2 * (16 << 30))
            async with PodResourcesClient(str(podres)) as client:
                listed = await client.list()
                allocatable = await client.get_allocatable_resources()
            held = sorted(
                d.device_ids[0] for p in listed for c in p.containers for d in c.devices if d.resource_name == RESOURCE
            )
            assert held == sorted(devices)
            numa = {d.device_ids[0]: d.numa_nodes for d in allocatable.devices if d.resource_name == RESOURCE}
            assert numa == {f"acc{n}-{i}": (n,) for n in (0, 1) for i in range(2)}  # the plugin's inventory
            assert all(numa[d] == numa[devices[0]] for d in devices)
    finally:
        stop_process(process)
        await runtime.close()
