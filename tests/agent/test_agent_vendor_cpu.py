"""The CPU policy out of process: the example CPU plugin (``examples/plugins/cpu_static_plugin.py``, a
real process serving gRPC on a unix socket) registered with a running agent whose built-in CPU plugin
is off (``cpuManager.policy: none``). Its exclusive CPUs reach the NRI adjustments and leave the shared
pool, exactly as the built-in static plugin's would (``test_agent_nri``: the same CPUs, "1,9")."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from agent_helpers import FIXED_RUNTIME, container, guaranteed, sandbox, stop_process, wait_for_socket
from test_agent_nri import create, options, running_agent
from test_agent_plugins import wait_plugin

from numaplane.nri.proto import api_pb2
from numaplane_harness.nrifake import FakeRuntime

pytestmark = pytest.mark.timeout(90)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plugins" / "cpu_static_plugin.py"
NAME = "example.numaplane.io/cpu-static"
TM = {"policy": "single-numa-node"}


def start_cpu_plugin(plugin_dir: Path) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--plugin-dir", str(plugin_dir), "--cpu-manager", '{"reservedCPUs": "0"}'],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    wait_for_socket(plugin_dir / "cpu-static.sock", process)
    return process


async def test_the_plugins_exclusive_cpus_are_pinned_and_leave_the_shared_pool(short_tmp: Path) -> None:
    plugin_dir = short_tmp / "plugins"
    plugin_dir.mkdir()
    (short_tmp / "config.json").write_text(json.dumps({"topologyManager": TM, "cpuManager": {"policy": "none"}}))
    runtime = FakeRuntime(**FIXED_RUNTIME)
    await runtime.listen(str(short_tmp / "nri.sock"))
    process = start_cpu_plugin(plugin_dir)
    try:
        async with running_agent(options(short_tmp, plugin_dir=plugin_dir, plugin_health_seconds=0.1)) as agent:
            session = await runtime.wait_session(1)
            await agent.wait_ready()
            await wait_plugin(agent, NAME)
            assert agent.state is not None
            be_pod = sandbox("be", qos="BestEffort")
            r = await create(runtime, be_pod, container(be_pod))
            assert r.adjust.linux.resources.cpu.cpus == "0-15"
            # a Guaranteed container: the plugin's CPUs; the shared container is moved off them
            g_pod = sandbox("g")
            r = await create(runtime, g_pod, guaranteed(g_pod, n=2))
            assert r.adjust.linux.resources.cpu.cpus == "1,9"
            assert [(u.container_id, u.linux.resources.cpu.cpus) for u in r.update] == [("ctr-be-main", "0,2-8,10-15")]
            plugin = agent.registry.plugins[NAME]  # type: ignore[union-attr]
            assert {k: str(a.cpus) for k, a in plugin.allocations().items()} == {("uid-g/main", "main"): "1,9"}
            # a shared container created now gets the pool without them
            late_pod = sandbox("late", qos="Burstable")
            r = await create(runtime, late_pod, container(late_pod, cpu_milli=500))
            assert r.adjust.linux.resources.cpu.cpus == "0,2-8,10-15"
            assert agent.state.check() == []
            # the built-in CPU plugin cannot be switched back on under the vendor plugin: the watched
            # config file's change is refused whole and the old config stays
            watcher = agent.watcher
            assert watcher is not None
            (short_tmp / "config.json").write_text(
                json.dumps({"topologyManager": TM, "cpuManager": {"policy": "static", "reservedCPUs": "0"}})
            )
            async with asyncio.timeout(5):
                while watcher.rejected < 1:
                    await asyncio.sleep(0.02)
            assert f"plugin '{NAME}' manages ['cpu']" in watcher.last_error
            assert agent.state.manager.config.cpu_policy == "none"
            # removing the pod gives its CPUs back to the shared pool (and the plugin releases them)
            await runtime.state_change(api_pb2.REMOVE_POD_SANDBOX, g_pod)
            await agent.sender.wait_idle()  # type: ignore[union-attr]
            sent = {(u.container_id, u.linux.resources.cpu.cpus) for req in session.updates for u in req.update}
            assert sent == {("ctr-be-main", "0-15"), ("ctr-late-main", "0-15")}
            assert agent.state.shared_pool.format() == "0-15" and plugin.allocations() == {}
            assert agent.state.check() == []
    finally:
        stop_process(process)
        await runtime.close()
