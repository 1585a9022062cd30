"""A fake NRI runtime (containerd's side of the socket), for tests of plugins without a real runtime.

It speaks the same wire protocol through :class:`~numaplane.nri.protocol.Connection` in the RUNTIME role:
it serves ``Runtime`` (RegisterPlugin, UpdateContainers) on mux connection 2 and calls ``Plugin`` methods
on connection 1. Like containerd, after a successful RegisterPlugin it calls Configure and then
Synchronize; with ``configure_before_register_reply`` it sends Configure *before* answering the
registration, which a plugin must survive. With ``sync_limit_bytes`` (and no ``sync_chunk``) a
Synchronize larger than that is never sent and the plugin is dropped after Configure, as a runtime with
NRI < 0.8 does past its 4 MiB message limit; with ``send_synchronize=False`` the runtime keeps the
connection but never sends Synchronize. With ``lock_inversion`` it takes two locks as containerd 1.7
does (NRI < 0.12.1, containerd#13733): every event takes containerd's NRI lock and then the
adaptation's, an unsolicited ``UpdateContainers`` the adaptation's and then containerd's — so an
unsolicited call that meets an event deadlocks the fake runtime as it does the real one. ``runtime_name``/``runtime_version`` are what Configure
says (the default names no real runtime: a plugin must then assume unsolicited updates are unsafe). With ``sync_chunk`` it splits Synchronize as NRI >= 0.8
does for a state too large for one message: parts of at most ``sync_chunk`` pods and containers, every
part but the last flagged ``more``; a plugin that answers such a part without ``more`` or with updates is
dropped (the connection is closed), as the real runtime does. It listens on a unix socket path (plugins dial it; every
accepted connection is a new session) or adopts one end of a socketpair.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from google.protobuf.message import Message

from numaplane.nri.errors import ConnectionClosed, StatusCode
from numaplane.nri.plugin import RUNTIME_SERVICE
from numaplane.nri.proto import api_pb2
from numaplane.nri.protocol import RequestReceived, Role
from numaplane.nri.stub import PLUGIN_SERVICE
from numaplane.nri.transport import AsyncConnection, Reply

__all__ = ["FakeRuntime", "FakeSession"]

_M = TypeVar("_M", bound=Message)

#: The Plugin methods that are container or pod events (lock order of containerd's event paths).
_EVENTS = frozenset({"CreateContainer", "UpdateContainer", "StopContainer", "StateChange"})


@dataclass
class FakeSession:
    """One plugin connection as the fake runtime sees it."""

    conn: AsyncConnection
    plugin_name: str = ""
    plugin_idx: str = ""
    events: int | None = None  # from ConfigureResponse
    registered: asyncio.Event = field(default_factory=asyncio.Event)
    synchronized: asyncio.Event = field(default_factory=asyncio.Event)
    sync_response: api_pb2.SynchronizeResponse | None = None
    updates: list[api_pb2.UpdateContainersRequest] = field(default_factory=list)
    update_calls: int = 0  # UpdateContainers requests received (also those still waiting for a lock)
    sync_parts: int = 0
    task: asyncio.Task[None] | None = None


class FakeRuntime:
    """Plays the runtime. ``sessions`` lists every plugin connection, newest last."""

    def __init__(
        self,
        *,
        configure_before_register_reply: bool = False,
        register_error: tuple[int, str] | None = None,
        request_timeout_seconds: float = 2.0,
        pods: Iterable[api_pb2.PodSandbox] = (),
        containers: Iterable[api_pb2.Container] = (),
        failed_updates: bool = False,
        sync_chunk: int | None = None,
        runtime_name: str = "fake-runtime",
        runtime_version: str = "0.0",
        sync_limit_bytes: int | None = None,
        send_synchronize: bool = True,
        lock_inversion: bool = False,
    ) -> None:
        self.configure_before_register_reply = configure_before_register_reply
        self.register_error = register_error
        self.request_timeout_seconds = request_timeout_seconds
        self.pods = list(pods)
        self.containers = list(containers)
        self.failed_updates = failed_updates
        self.sync_chunk = sync_chunk
        self.runtime_name = runtime_name
        self.runtime_version = runtime_version
        self.sync_limit_bytes = sync_limit_bytes
        self.send_synchronize = send_synchronize
        self.lock_inversion = lock_inversion
        self._local_lock = asyncio.Lock()  # containerd's NRI lock (``local`` in pkg/nri/nri.go)
        self._adapt_lock = asyncio.Lock()  # the NRI adaptation's lock (pkg/adaptation)
        self.sessions: list[FakeSession] = []
        self.new_session = asyncio.Condition()
        self._server: asyncio.Server | None = None
        self._background: set[asyncio.Task[None]] = set()  # strong refs to fire-and-forget tasks

    # -- connecting

    async def listen(self, path: str) -> None:
        """Accept plugin connections on a unix socket at ``path``."""
        self._server = await asyncio.start_unix_server(self._accept, path=path)

    async def attach(self, sock: socket.socket) -> FakeSession:
        """Serve one already-connected socket (e.g. one end of ``socket.socketpair()``)."""
        reader, writer = await asyncio.open_unix_connection(sock=sock)
        return await self._start(reader, writer)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await self._start(reader, writer)

    async def _start(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> FakeSession:
        session_box: list[FakeSession] = []

        async def serve(request: RequestReceived) -> Reply:
            return await self._serve(session_box[0], request)

        session = FakeSession(AsyncConnection(reader, writer, serve, role=Role.RUNTIME))
        session_box.append(session)
        session.task = asyncio.create_task(self._run(session))
        async with self.new_session:
            self.sessions.append(session)
            self.new_session.notify_all()
        return session

    async def _run(self, session: FakeSession) -> None:
        with contextlib.suppress(Exception):
            await session.conn.run()

    async def wait_session(self, count: int, timeout_seconds: float = 5.0) -> FakeSession:
        """Wait until ``count`` sessions have registered; return the ``count``-th."""
        async with asyncio.timeout(timeout_seconds):
            async with self.new_session:
                await self.new_session.wait_for(lambda: len(self.sessions) >= count)
            session = self.sessions[count - 1]
            await session.registered.wait()
            return session

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._background):
            task.cancel()
        for session in self.sessions:
            session.conn.close()
            if session.task is not None:
                with contextlib.suppress(BaseException):
                    await session.task
            await session.conn.wait_closed()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    @property
    def current(self) -> FakeSession:
        if not self.sessions:
            raise ConnectionClosed("no plugin has connected")
        return self.sessions[-1]

    # -- the Runtime service

    async def _serve(self, session: FakeSession, request: RequestReceived) -> Reply:
        if request.service != RUNTIME_SERVICE:
            return Reply(code=StatusCode.UNIMPLEMENTED, message=f"unknown service {request.service}")
        if request.method == "RegisterPlugin":
            reg = api_pb2.RegisterPluginRequest.FromString(request.payload)
            session.plugin_name, session.plugin_idx = reg.plugin_name, reg.plugin_idx
            if self.register_error is not None:
                return Reply(code=self.register_error[0], message=self.register_error[1])
            if self.configure_before_register_reply:
                await self._configure(session)
                asyncio.get_running_loop().call_soon(self._after_register, session, False)
            else:
                asyncio.get_running_loop().call_soon(self._after_register, session, True)
            return Reply()
        if request.method == "UpdateContainers":
            session.update_calls += 1
        if request.method == "UpdateContainers" and self.lock_inversion:
            # NRI < 0.12.1: the adaptation's lock first, then containerd's — the inverse of the events'
            # order; the pause widens the window in which an event takes containerd's lock meanwhile
            async with self._adapt_lock:
                await asyncio.sleep(0.05)
                async with self._local_lock:
                    return self._update_containers(session, request)
        if request.method == "UpdateContainers":
            return self._update_containers(session, request)
        return Reply(code=StatusCode.UNIMPLEMENTED, message=f"unknown method {request.method}")

    def _update_containers(self, session: FakeSession, request: RequestReceived) -> Reply:
        upd = api_pb2.UpdateContainersRequest.FromString(request.payload)
        session.updates.append(upd)
        failed = list(upd.update) if self.failed_updates else []
        return Reply(api_pb2.UpdateContainersResponse(failed=failed).SerializeToString())

    def _after_register(self, session: FakeSession, configure: bool) -> None:
        async def go() -> None:
            try:
                if configure:
                    await self._configure(session)
                if not self.send_synchronize:
                    return  # registered and configured, then silence: no Synchronize, no events
                session.sync_response = await self._synchronize(session)
                session.synchronized.set()
            except Exception:
                session.conn.close()
            finally:
                session.registered.set()

        task = asyncio.create_task(go())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _synchronize(self, session: FakeSession) -> api_pb2.SynchronizeResponse:
        pods, containers = list(self.pods), list(self.containers)
        n = self.sync_chunk
        if n is None:
            request = api_pb2.SynchronizeRequest(pods=pods, containers=containers)
            if self.sync_limit_bytes is not None and request.ByteSize() > self.sync_limit_bytes:
                # NRI < 0.8 cannot send it (containerd/nri#102): the runtime drops the plugin
                raise ConnectionClosed(f"Synchronize of {request.ByteSize()} bytes exceeds the message limit")
            return await self.call("Synchronize", request, api_pb2.SynchronizeResponse, session)
        while True:
            part_pods, pods = pods[:n], pods[n:]
            part_containers, containers = containers[:n], containers[n:]
            more = bool(pods or containers)
            request = api_pb2.SynchronizeRequest(pods=part_pods, containers=part_containers, more=more)
            response = await self.call("Synchronize", request, api_pb2.SynchronizeResponse, session)
            session.sync_parts += 1
            if not more:
                return response
            if response.update or not response.more:
                raise ConnectionClosed("plugin does not handle split sync requests")

    async def _configure(self, session: FakeSession) -> None:
        resp = await self.call(
            "Configure",
            api_pb2.ConfigureRequest(runtime_name=self.runtime_name, runtime_version=self.runtime_version),
            api_pb2.ConfigureResponse,
            session,
        )
        session.events = resp.events

    # -- calling the plugin

    async def call(
        self, method: str, request: Message, response_type: type[_M], session: FakeSession | None = None
    ) -> _M:
        """Call ``Plugin/<method>``; raises :class:`StatusError` if the plugin answers with an error."""
        s = session or self.current
        if self.lock_inversion and method in _EVENTS:
            # containerd 1.7: an event takes containerd's NRI lock, then the adaptation's (held while the
            # plugins are asked and their answers applied)
            async with self._local_lock:
                await asyncio.sleep(0)
                async with self._adapt_lock:
                    payload = await s.conn.call(
                        PLUGIN_SERVICE,
                        method,
                        request.SerializeToString(),
                        timeout_seconds=self.request_timeout_seconds,
                    )
            return response_type.FromString(payload)
        payload = await s.conn.call(
            PLUGIN_SERVICE, method, request.SerializeToString(), timeout_seconds=self.request_timeout_seconds
        )
        return response_type.FromString(payload)

    async def create_container(
        self, pod: api_pb2.PodSandbox, container: api_pb2.Container
    ) -> api_pb2.CreateContainerResponse:
        return await self.call(
            "CreateContainer",
            api_pb2.CreateContainerRequest(pod=pod, container=container),
            api_pb2.CreateContainerResponse,
        )

    async def state_change(
        self, event: int, pod: api_pb2.PodSandbox, container: api_pb2.Container | None = None
    ) -> None:
        msg = api_pb2.StateChangeEvent(event=api_pb2.Event.ValueType(event), pod=pod)
        if container is not None:
            msg.container.CopyFrom(container)
        await self.call("StateChange", msg, api_pb2.Empty)

    async def shutdown(self) -> None:
        await self.call("Shutdown", api_pb2.Empty(), api_pb2.Empty)

    def disconnect(self) -> None:
        """Drop the current plugin connection (the plugin sees EOF)."""
        self.current.conn.close()
