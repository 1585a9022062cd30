"""The asyncio plugin runtime against a fake runtime peer (unix socket or socketpair)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from numaplane.nri.errors import (
    ConnectionClosed,
    PluginConfigError,
    RegistrationFailed,
    StatusCode,
    StatusError,
    UnknownConnection,
)
from numaplane.nri.events import Adjustment, CpusetUpdate, Event, RuntimeContainer, Sandbox
from numaplane.nri.plugin import NRIPlugin
from numaplane.nri.proto import api_pb2
from numaplane.nri.stub import EVENT_METHODS, PLUGIN_SERVICE, Stub, event_mask, subscribed
from numaplane_harness.nriexample import FixedCpusetHandler, cpuset_update
from numaplane_harness.nrifake import FakeRuntime


def _pod(name: str = "pod-a") -> api_pb2.PodSandbox:
    pod = api_pb2.PodSandbox(id=f"sb-{name}", name=name, uid=f"uid-{name}", namespace="default")
    pod.linux.cgroup_parent = f"/kubepods/pod{name}"
    return pod


def _container(name: str = "main", cpus: str = "0-3") -> api_pb2.Container:
    c = api_pb2.Container(id=f"ctr-{name}", pod_sandbox_id="sb-pod-a", name=name)
    c.linux.resources.cpu.cpus = cpus
    return c


@contextlib.asynccontextmanager
async def running(plugin: NRIPlugin, runtime: FakeRuntime | None = None) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(plugin.run())
    try:
        yield task
    finally:
        await plugin.stop()
        await asyncio.wait_for(task, 5)
        if runtime is not None:
            await runtime.close()


@pytest.fixture
def sock_path(tmp_path: Path) -> str:
    return str(tmp_path / "nri.sock")


def make_plugin(handler: object, path: str, **kw: float) -> NRIPlugin:
    return NRIPlugin(handler, name="numaplane-test", idx="10", socket_path=path, backoff_initial_seconds=0.02, **kw)


async def test_configure_arrives_before_register_reply(sock_path: str) -> None:
    runtime = FakeRuntime(configure_before_register_reply=True, containers=[_container("old", "0-7")])
    await runtime.listen(sock_path)
    handler = FixedCpusetHandler("1")
    plugin = make_plugin(handler, sock_path)
    async with running(plugin, runtime):
        session = await runtime.wait_session(1)
        await plugin.wait_registered(5)
        await asyncio.wait_for(session.synchronized.wait(), 5)
        assert (session.plugin_name, session.plugin_idx) == ("numaplane-test", "10")
        assert session.events == 0x7FF  # the example implements every event
        assert [c[0] for c in handler.calls[:2]] == ["Configure", "Synchronize"]
        # Synchronize re-pinned the pre-existing container.
        assert session.sync_response is not None
        (upd,) = session.sync_response.update
        assert (upd.container_id, upd.linux.resources.cpu.cpus) == ("ctr-old", "1")


async def test_create_container_gets_pinned(sock_path: str) -> None:
    runtime = FakeRuntime()
    await runtime.listen(sock_path)
    handler = FixedCpusetHandler("2-3", mems="0")
    plugin = make_plugin(handler, sock_path)
    async with running(plugin, runtime):
        await runtime.wait_session(1)
        resp = await runtime.create_container(_pod(), _container())
        assert resp.adjust.linux.resources.cpu.cpus == "2-3"
        assert resp.adjust.linux.resources.cpu.mems == "0"
        await runtime.state_change(api_pb2.START_CONTAINER, _pod(), _container())
        await runtime.state_change(api_pb2.RUN_POD_SANDBOX, _pod())
        assert ("CreateContainer", "pod-a", "main") in handler.calls
        assert ("START_CONTAINER", "pod-a", "main") in handler.calls
        assert ("RUN_POD_SANDBOX", "pod-a", "") in handler.calls


async def test_handler_errors_become_error_statuses(sock_path: str) -> None:
    class Broken(FixedCpusetHandler):
        async def stop_container(self, pod: Sandbox, container: RuntimeContainer) -> list[CpusetUpdate]:
            raise RuntimeError("boom")

    runtime = FakeRuntime()
    await runtime.listen(sock_path)
    plugin = make_plugin(Broken("0", reject=["bad"]), sock_path)
    async with running(plugin, runtime):
        await runtime.wait_session(1)
        with pytest.raises(StatusError) as info:
            await runtime.create_container(_pod(), _container("bad"))
        assert info.value.code == StatusCode.FAILED_PRECONDITION
        assert "container 'bad' rejected" in info.value.message
        with pytest.raises(StatusError) as info:
            await runtime.call("StopContainer", api_pb2.StopContainerRequest(), api_pb2.StopContainerResponse)
        assert info.value.code == StatusCode.UNKNOWN and "RuntimeError: boom" in info.value.message
        with pytest.raises(StatusError) as info:
            await runtime.call("NoSuchMethod", api_pb2.Empty(), api_pb2.Empty)
        assert info.value.code == StatusCode.UNIMPLEMENTED
        # A garbage payload is INVALID_ARGUMENT, and the connection survives all of it.
        session = runtime.current
        with pytest.raises(StatusError) as info:
            await session.conn.call(PLUGIN_SERVICE, "CreateContainer", b"\xff\xff\xff", timeout_seconds=2)
        assert info.value.code == StatusCode.INVALID_ARGUMENT
        resp = await runtime.create_container(_pod(), _container("good"))
        assert resp.adjust.linux.resources.cpu.cpus == "0"
        assert plugin.registrations == 1


async def test_handler_past_the_deadline_answers_deadline_exceeded(sock_path: str) -> None:
    class Slow:
        async def create_container(
            self, pod: Sandbox, container: RuntimeContainer
        ) -> tuple[Adjustment, list[CpusetUpdate]]:
            await asyncio.sleep(10)
            return Adjustment(), []

    runtime = FakeRuntime()
    await runtime.listen(sock_path)
    plugin = make_plugin(Slow(), sock_path, deadline_grace_seconds=0.1)
    async with running(plugin, runtime):
        session = await runtime.wait_session(1)
        request = api_pb2.CreateContainerRequest(pod=_pod(), container=_container())
        with pytest.raises(StatusError) as info:
            await session.conn.call(
                PLUGIN_SERVICE,
                "CreateContainer",
                request.SerializeToString(),
                timeout_seconds=5,
                peer_timeout_seconds=0.1,
            )
        assert info.value.code == StatusCode.DEADLINE_EXCEEDED


async def test_a_slow_request_does_not_block_others(sock_path: str) -> None:
    release = asyncio.Event()

    class Gate:
        async def create_container(
            self, pod: Sandbox, container: RuntimeContainer
        ) -> tuple[Adjustment, list[CpusetUpdate]]:
            await release.wait()
            return Adjustment(), []

        async def run_pod_sandbox(self, pod: Sandbox) -> None:
            return None

    runtime = FakeRuntime()
    await runtime.listen(sock_path)
    plugin = make_plugin(Gate(), sock_path)
    async with running(plugin, runtime):
        await runtime.wait_session(1)
        slow = asyncio.create_task(runtime.create_container(_pod(), _container()))
        await asyncio.sleep(0.05)
        await asyncio.wait_for(runtime.state_change(api_pb2.RUN_POD_SANDBOX, _pod()), 1)
        # Our own client call completes while the slow request is still being served.
        assert await asyncio.wait_for(plugin.update_containers([cpuset_update("c1", "0")]), 1) == []
        assert not slow.done()
        release.set()
        await asyncio.wait_for(slow, 1)


async def test_eof_then_reconnect_and_resync(sock_path: str) -> None:
    runtime = FakeRuntime(containers=[_container("old", "0-7")])
    await runtime.listen(sock_path)
    handler = FixedCpusetHandler("1")
    plugin = make_plugin(handler, sock_path)
    async with running(plugin, runtime):
        await runtime.wait_session(1)
        await plugin.wait_registered(5)
        runtime.disconnect()
        second = await runtime.wait_session(2)
        await plugin.wait_registered(5)
        await asyncio.wait_for(second.synchronized.wait(), 5)
        assert plugin.registrations == 2
        assert handler.configured == 2 and handler.synchronized == 2
        resp = await runtime.create_container(_pod(), _container())
        assert resp.adjust.linux.resources.cpu.cpus == "1"


async def test_runtime_not_there_yet_then_appears(sock_path: str) -> None:
    handler = FixedCpusetHandler("0")
    plugin = make_plugin(handler, sock_path)
    runtime = FakeRuntime()
    async with running(plugin, runtime):
        await asyncio.sleep(0.15)  # a few failed dials with backoff
        assert isinstance(plugin.last_error, OSError)
        await runtime.listen(sock_path)
        await runtime.wait_session(1)
        await plugin.wait_registered(5)


async def test_registration_refused_is_retried(sock_path: str) -> None:
    runtime = FakeRuntime(register_error=(StatusCode.FAILED_PRECONDITION, "dup"))
    await runtime.listen(sock_path)
    plugin = make_plugin(FixedCpusetHandler("0"), sock_path)
    async with running(plugin, runtime):
        async with asyncio.timeout(5):
            while len(runtime.sessions) < 3:
                await asyncio.sleep(0.01)
        assert isinstance(plugin.last_error, RegistrationFailed)
        assert plugin.last_error.message == "dup"
        assert plugin.registrations == 0 and not plugin.registered
        runtime.register_error = None
        await plugin.wait_registered(5)


async def test_update_containers_round_trip(sock_path: str) -> None:
    runtime = FakeRuntime(failed_updates=True)
    await runtime.listen(sock_path)
    plugin = make_plugin(FixedCpusetHandler("0"), sock_path)
    with pytest.raises(ConnectionClosed):
        await plugin.update_containers([cpuset_update("c1", "0")])
    async with running(plugin, runtime):
        session = await runtime.wait_session(1)
        await plugin.wait_registered(5)
        failed = await plugin.update_containers([cpuset_update("c1", "4-5", "1")])
        assert failed == ["c1"]
        (req,) = session.updates
        assert req.update[0].linux.resources.cpu.cpus == "4-5"


async def test_protocol_violation_drops_the_connection_and_reconnects(sock_path: str) -> None:
    runtime = FakeRuntime()
    await runtime.listen(sock_path)
    plugin = make_plugin(FixedCpusetHandler("0"), sock_path)
    async with running(plugin, runtime):
        first = await runtime.wait_session(1)
        await plugin.wait_registered(5)
        first.conn._writer.write(struct.pack(">II", 7, 0))  # mux frame on unknown connection 7
        await runtime.wait_session(2)
        assert isinstance(plugin.last_error, UnknownConnection)


async def test_shutdown_is_delivered(sock_path: str) -> None:
    runtime = FakeRuntime()
    await runtime.listen(sock_path)
    handler = FixedCpusetHandler("0")
    plugin = make_plugin(handler, sock_path)
    async with running(plugin, runtime):
        await runtime.wait_session(1)
        await runtime.shutdown()
        assert ("Shutdown", "", "") in handler.calls


async def test_inherited_socket_over_socketpair() -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    runtime = FakeRuntime(configure_before_register_reply=True)
    handler = FixedCpusetHandler("3")
    plugin = NRIPlugin.from_env(
        handler,
        name="ignored",
        idx="99",
        environ={"NRI_PLUGIN_NAME": "from-env", "NRI_PLUGIN_IDX": "05", "NRI_PLUGIN_SOCKET": str(ours.detach())},
    )
    assert (plugin.name, plugin.idx) == ("from-env", "05")
    run = asyncio.create_task(plugin.run())
    session = await runtime.attach(theirs)
    await asyncio.wait_for(session.registered.wait(), 5)
    assert (session.plugin_name, session.plugin_idx) == ("from-env", "05")
    resp = await runtime.create_container(_pod(), _container())
    assert resp.adjust.linux.resources.cpu.cpus == "3"
    runtime.disconnect()
    await asyncio.wait_for(run, 5)  # an inherited fd is not redialled: run() ends at EOF
    assert plugin.registrations == 1
    await runtime.close()


def test_settings_are_validated() -> None:
    h = FixedCpusetHandler("0")
    for idx in ("1", "100", "ab", ""):
        with pytest.raises(PluginConfigError):
            NRIPlugin(h, name="x", idx=idx)
    with pytest.raises(PluginConfigError):
        NRIPlugin(h, name="", idx="10")
    with pytest.raises(PluginConfigError):
        NRIPlugin.from_env(h, name="x", idx="10", environ={"NRI_PLUGIN_SOCKET": "three"})


def test_the_subscription_is_derived_from_the_methods_a_handler_implements() -> None:
    class OnlyCreate:
        async def create_container(
            self, pod: Sandbox, container: RuntimeContainer
        ) -> tuple[Adjustment, list[CpusetUpdate]]:
            return Adjustment(), []

    assert subscribed(OnlyCreate()) == {Event.CREATE_CONTAINER}
    assert event_mask(OnlyCreate()) == 1 << 3 == Stub(OnlyCreate()).events
    assert event_mask(FixedCpusetHandler("0")) == 0x7FF  # every event 1..11
    # the capture's subscription (everything but UPDATE_CONTAINER / POST_UPDATE_CONTAINER) as a handler
    capture_events = [
        e for e in Event if e.value <= 11 and e not in (Event.UPDATE_CONTAINER, Event.POST_UPDATE_CONTAINER)
    ]
    methods = {EVENT_METHODS[e] for e in capture_events}
    capture_like = type("CaptureLike", (), {m: getattr(FixedCpusetHandler, m) for m in methods})()
    assert event_mask(capture_like) == 0x67F
    # configure / synchronize / shutdown are not events; a handler with nothing at all is refused
    assert event_mask(type("SyncOnly", (), {"synchronize": FixedCpusetHandler.synchronize})()) == 0
    with pytest.raises(PluginConfigError, match="implements no NRI handler method"):
        Stub(object())
    # the event numbers are NRI's
    assert {e.name: e.value for e in Event} == {
        name: value for name, value in api_pb2.Event.items() if name not in ("UNKNOWN", "LAST")
    }


async def test_example_handler_repins_unadjusted_containers_at_post_start(sock_path: str) -> None:
    runtime = FakeRuntime()
    await runtime.listen(sock_path)
    handler = FixedCpusetHandler("2")
    plugin = make_plugin(handler, sock_path)
    handler.updater = plugin.update_containers
    async with running(plugin, runtime):
        session = await runtime.wait_session(1)
        await plugin.wait_registered(5)
        adjusted = _container("adjusted", cpus="2")
        await runtime.create_container(_pod(), adjusted)
        await runtime.state_change(api_pb2.POST_START_CONTAINER, _pod(), adjusted)
        # Created while we were away (no CreateContainer seen), even if the runtime claims our cpuset.
        missed = _container("missed", cpus="2")
        await runtime.state_change(api_pb2.POST_START_CONTAINER, _pod(), missed)
        async with asyncio.timeout(5):
            while not session.updates:
                await asyncio.sleep(0.01)
        assert [u.container_id for req in session.updates for u in req.update] == ["ctr-missed"]
        assert handler.repinned == ["missed"]


async def test_the_stub_joins_a_split_synchronize_into_one_handler_call() -> None:
    from numaplane.nri.protocol import RequestReceived

    calls: list[tuple[list[str], list[str]]] = []

    class Recorder:
        async def synchronize(
            self, pods: Sequence[Sandbox], containers: Sequence[RuntimeContainer]
        ) -> list[CpusetUpdate]:
            calls.append(([p.name for p in pods], [c.name for c in containers]))
            return [cpuset_update(c.id, "1") for c in containers]

    stub = Stub(Recorder())
    parts = [
        api_pb2.SynchronizeRequest(pods=[_pod("a")], containers=[_container("x")], more=True),
        api_pb2.SynchronizeRequest(pods=[_pod("b")], more=True),
        api_pb2.SynchronizeRequest(containers=[_container("y")]),
    ]
    answers = []
    for i, part in enumerate(parts):
        reply = await stub.serve(RequestReceived(i + 1, PLUGIN_SERVICE, "Synchronize", part.SerializeToString()))
        answers.append(api_pb2.SynchronizeResponse.FromString(reply.payload))
    assert [(a.more, len(a.update)) for a in answers] == [(True, 0), (True, 0), (False, 2)]
    assert calls == [(["a", "b"], ["x", "y"])]
    assert [u.linux.resources.cpu.cpus for u in answers[2].update] == ["1", "1"]
