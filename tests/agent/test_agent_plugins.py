"""Out-of-process plugins: registration checks, isolation on crash or timeout, re-registration with state."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from agent_helpers import container, guaranteed, sandbox, stop_process, wait_for_socket
from test_agent_nri import create, options, running_agent
from widget_plugin import RESOURCE, WidgetPlugin

from numaplane.agent.daemon import Agent
from numaplane.grpcapi.pluginapi.errors import RegistrationRefused
from numaplane.grpcapi.pluginapi.server import PluginServer, register
from numaplane.nri.errors import StatusError
from numaplane.nri.proto import api_pb2
from numaplane.resources.pod import Pod, parse_pod
from numaplane_harness.nrifake import FakeRuntime

pytestmark = pytest.mark.timeout(90)

WIDGET_PLUGIN = Path(__file__).with_name("widget_plugin.py")
WANTS_WIDGET = {"resources.numaplane.io/main": json.dumps({RESOURCE: 1})}


def start_widgets(plugin_dir: Path, *args: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(WIDGET_PLUGIN.parent), os.environ.get("PYTHONPATH", "")]))
    process = subprocess.Popen(
        [sys.executable, str(WIDGET_PLUGIN), "--plugin-dir", str(plugin_dir), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
    )
    wait_for_socket(plugin_dir / "widgets.sock", process)
    return process


async def wait_plugin(agent: Agent, name: str, reachable: bool = True, timeout_seconds: float = 10) -> None:
    assert agent.registry is not None
    async with asyncio.timeout(timeout_seconds):
        while True:
            plugin = agent.registry.plugins.get(name)
            if plugin is not None and plugin.reachable == reachable:
                return
            await asyncio.sleep(0.02)


def widget_pod(agent: Agent, name: str) -> tuple[api_pb2.PodSandbox, api_pb2.Container]:
    """A Guaranteed 1-CPU pod whose spec requests one widget. Annotations never grant
    (``test_agent_annotations.py``): the widget comes from the pod spec, which the agent knows here
    as its Pod informer would give it (installed as the state's ``pod_lookup``); the annotation
    only repeats the spec's request."""
    pod = sandbox(name, annotations=WANTS_WIDGET)
    limits = {"cpu": "1", "memory": "64Mi", RESOURCE: "1"}
    spec = parse_pod(
        {
            "metadata": {"name": name, "namespace": pod.namespace, "uid": pod.uid, "annotations": WANTS_WIDGET},
            "spec": {
                "containers": [{"name": "main", "image": "x", "resources": {"requests": limits, "limits": limits}}]
            },
        }
    )
    assert agent.state is not None
    known = getattr(agent.state.pod_lookup, "pods", None)
    if known is None:
        known = {}
        agent.state.pod_lookup = _Lookup(known)
    known[spec.uid] = spec
    return pod, guaranteed(pod, n=1)


class _Lookup:
    """The Pod informer's role: pod uid → Pod."""

    def __init__(self, pods: dict[str, Pod]) -> None:
        self.pods = pods

    def __call__(self, uid: str) -> Pod | None:
        return self.pods.get(uid)


def held_widgets(agent: Agent) -> dict[str, tuple[str, ...]]:
    assert agent.state is not None
    out = {}
    for plugin in agent.state.manager.plugins:
        if plugin.name == "example.com/widgets":
            for (uid, _name), alloc in plugin.allocations().items():
                out[uid] = alloc.devices[RESOURCE]
    return out


async def test_crash_isolates_then_reregistration_restores(short_tmp: Path) -> None:
    plugin_dir = short_tmp / "plugins"
    runtime = FakeRuntime()
    await runtime.listen(str(short_tmp / "nri.sock"))
    process = None
    try:
        async with running_agent(options(short_tmp, plugin_dir=plugin_dir, plugin_health_seconds=0.1)) as agent:
            await runtime.wait_session(1)
            await agent.wait_ready()
            process = start_widgets(plugin_dir)
            await wait_plugin(agent, "example.com/widgets")
            pod, ctr = widget_pod(agent, "w1")
            r = await create(runtime, pod, ctr)
            assert r.adjust.linux.resources.cpu.cpus == "8"  # node 0, beside reserved 0; the widget on node 0 too
            assert held_widgets(agent) == {"uid-w1": ("w00",)}
            # crash: the plugin's resources fail admission with a clear reason, the rest keeps working
            process.kill()
            process.wait()
            pod, ctr = widget_pod(agent, "w2")
            with pytest.raises(StatusError) as exc:
                await runtime.create_container(pod, ctr)
            assert "PluginUnavailable" in exc.value.message and "example.com/widgets" in exc.value.message
            g = sandbox("g")
            assert (await create(runtime, g, guaranteed(g, n=2))).adjust.linux.resources.cpu.cpus == "1,9"
            be = sandbox("be", qos="BestEffort")
            await create(runtime, be, container(be))
            assert agent.readiness()[1]["plugins"]["example.com/widgets"].startswith("isolated")
            # restart: it registers again, gets its state back, and allocates the next widget
            process = start_widgets(plugin_dir)
            await wait_plugin(agent, "example.com/widgets")
            pod, ctr = widget_pod(agent, "w3")
            await create(runtime, pod, ctr)
            assert held_widgets(agent) == {"uid-w1": ("w00",), "uid-w3": ("w01",)}
            assert agent.state is not None and agent.state.check() == []
            assert (
                agent.metrics.registry.get_sample_value(
                    "numaplane_agent_admissions_total", {"result": "rejected", "reason": "PluginUnavailable"}
                )
                == 1
            )
            # the checkpoint carries the plugin's state
            await agent.writer.flush()  # type: ignore[union-attr]
            state = json.loads((short_tmp / "state" / "agent_state.json").read_text())
            assert state["data"]["manager"]["plugins"]["example.com/widgets"]["held"] == {
                "uid-w1|main": ["w00"],
                "uid-w3|main": ["w01"],
            }
    finally:
        if process is not None:
            stop_process(process)
        await runtime.close()


async def test_a_plugin_that_times_out_is_isolated(short_tmp: Path) -> None:
    plugin_dir = short_tmp / "plugins"
    runtime = FakeRuntime()
    await runtime.listen(str(short_tmp / "nri.sock"))
    process = None
    try:
        async with running_agent(options(short_tmp, plugin_dir=plugin_dir, plugin_health_seconds=30)) as agent:
            await runtime.wait_session(1)
            await agent.wait_ready()
            process = start_widgets(plugin_dir, "--allocate-delay", "1.0")
            await wait_plugin(agent, "example.com/widgets")
            pod, ctr = widget_pod(agent, "slow")
            loop = asyncio.get_running_loop()
            started = loop.time()
            with pytest.raises(StatusError) as exc:
                await runtime.create_container(pod, ctr)
            assert loop.time() - started < 1.0  # the agent's 0.25 s deadline, far below the runtime's 2 s
            assert "PluginUnavailable" in exc.value.message and "DEADLINE_EXCEEDED" in exc.value.message
            g = sandbox("g")
            assert (await create(runtime, g, guaranteed(g, n=2))).adjust.linux.resources.cpu.cpus
    finally:
        if process is not None:
            stop_process(process)
        await runtime.close()


async def test_a_hung_plugin_delays_no_other_pod(short_tmp: Path) -> None:
    """A plugin that sleeps 3 s in Allocate behind a 1 s deadline: its pod is refused at the deadline,
    Guaranteed pods created meanwhile (over the same NRI connection) are answered at once."""
    plugin_dir = short_tmp / "plugins"
    runtime = FakeRuntime()
    await runtime.listen(str(short_tmp / "nri.sock"))
    process = None
    opts = options(short_tmp, plugin_dir=plugin_dir, plugin_health_seconds=30, plugin_call_timeout_seconds=1.0)
    try:
        async with running_agent(opts) as agent:
            await runtime.wait_session(1)
            await agent.wait_ready()
            process = start_widgets(plugin_dir, "--allocate-delay", "3")
            await wait_plugin(agent, "example.com/widgets")
            loop = asyncio.get_running_loop()
            started = loop.time()
            pod, ctr = widget_pod(agent, "hung")
            hung = asyncio.create_task(runtime.create_container(pod, ctr))
            await asyncio.sleep(0.1)  # its admission is parked, its Allocate call in flight
            assert agent.state is not None and set(agent.state.parked) == {"uid-hung"}
            latencies = []
            for i in range(60):
                g = sandbox(f"g{i}")
                t = loop.time()
                response = await create(runtime, g, guaranteed(g, n=1))
                latencies.append(loop.time() - t)
                assert response.adjust.linux.resources.cpu.cpus
                stopped = api_pb2.StopContainerRequest(pod=g, container=runtime.containers[-1])
                await runtime.call("StopContainer", stopped, api_pb2.StopContainerResponse)
                await runtime.state_change(api_pb2.STOP_POD_SANDBOX, g)  # releases its CPUs
            assert not hung.done()  # all of them were answered while the plugin hung
            p99 = statistics.quantiles(latencies, n=100)[98]
            assert p99 < 0.1, f"p99 {p99 * 1000:.1f} ms"
            with pytest.raises(StatusError) as exc:
                await hung
            elapsed = loop.time() - started
            assert 0.9 < elapsed < 2.9  # the 1 s deadline, not the plugin's 3 s
            assert "PluginUnavailable" in exc.value.message and "DEADLINE_EXCEEDED" in exc.value.message
            assert agent.state.parked == {} and agent.state.check() == []
            assert agent.state.manager.cpu.state.get("uid-hung", "main") is None  # nothing held
    finally:
        if process is not None:
            stop_process(process)
        await runtime.close()


async def test_registration_checks(short_tmp: Path) -> None:
    plugin_dir = short_tmp / "plugins"
    outside = short_tmp / "outside"
    runtime = FakeRuntime()
    await runtime.listen(str(short_tmp / "nri.sock"))

    def factory(topology: object, config: object) -> WidgetPlugin:
        return WidgetPlugin(topology, config, "example.com/widgets")  # type: ignore[arg-type]

    servers = []
    try:
        async with running_agent(options(short_tmp, plugin_dir=plugin_dir)) as agent:
            await runtime.wait_session(1)
            registry = plugin_dir / "numaplane.sock"

            def serve(
                path: Path, name: str = "example.com/widgets", resources: frozenset[str] = frozenset({RESOURCE})
            ) -> PluginServer:
                server = PluginServer(factory, name=name, resources=resources, socket_path=path)
                server.start()
                servers.append(server)
                return server

            async def refused(server: PluginServer) -> RegistrationRefused:
                with pytest.raises(RegistrationRefused) as exc:
                    await asyncio.to_thread(register, registry, server)
                return exc.value

            # a socket outside the plugin directory, reached through a symlink inside it
            out = serve(outside / "w.sock")
            os.symlink(outside / "w.sock", plugin_dir / "link.sock")
            out.socket_path = plugin_dir / "link.sock"
            assert (await refused(out)).code == "PERMISSION_DENIED"
            # not a socket
            (plugin_dir / "file.sock").write_text("")
            fake = PluginServer(factory, name="x", resources={RESOURCE}, socket_path=plugin_dir / "file.sock")
            assert (await refused(fake)).code == "PERMISSION_DENIED"
            # a path instead of a name
            bad = PluginServer(factory, name="x", resources={RESOURCE}, socket_path=plugin_dir / "w.sock")
            bad.socket_path = Path("../outside/w.sock")
            assert (await refused(bad)).code == "PERMISSION_DENIED"
            # resources another plugin (the built-in CPU plugin) manages
            cpu = serve(plugin_dir / "cpu.sock", name="example.com/cpu", resources=frozenset({"cpu"}))
            error = await refused(cpu)
            assert error.code == "ALREADY_EXISTS" and "'cpu'" in error.message
            # a good one
            good = serve(plugin_dir / "w.sock")
            await asyncio.to_thread(register, registry, good)
            assert agent.registry is not None and agent.registry.plugins["example.com/widgets"].reachable
            assert (
                agent.metrics.registry.get_sample_value(
                    "numaplane_agent_plugin_registrations_total", {"result": "refused"}
                )
                == 4
            )

        # an agent that expects plugins to run as another uid refuses ours (SO_PEERCRED)
        async with running_agent(options(short_tmp, plugin_dir=plugin_dir, plugin_uid=os.geteuid() + 4242)) as agent:
            with pytest.raises(RegistrationRefused) as exc:
                await asyncio.to_thread(register, plugin_dir / "numaplane.sock", servers[-1])
            assert exc.value.code == "PERMISSION_DENIED" and "uid" in exc.value.message
    finally:
        for server in servers:
            server.stop()
        await runtime.close()
