"""An asyncio NRI plugin runtime: connect, register, serve the ``Plugin`` service, reconnect.

The resource logic lives in a handler of per-event methods (``nri/stub.py``, written elsewhere, e.g. the
node agent); this module only speaks NRI: the :class:`~numaplane.nri.stub.Stub` serves the handler. Lifecycle of :meth:`NRIPlugin.run`::

    loop until stop():
        connect (dial the socket path, or adopt the runtime-provided fd from NRI_PLUGIN_SOCKET)
        start the reader; call Runtime.RegisterPlugin(name, idx) while the reader already serves
            (the runtime may send Configure before it answers the registration)
        serve Configure / Synchronize / events until EOF, a protocol error or stop()
        wait with exponential backoff and reconnect; a runtime-provided fd cannot be redialled:
        then run() returns after the first session.

The backoff is reset only by a session that reached Synchronize. A runtime that accepts the
registration and Configure but never sends Synchronize (or drops the connection instead) is backed
off from like one that refuses the connection: the known cause is a runtime state over the 4 MiB a
single NRI message may carry on a runtime that cannot split Synchronize (NRI < 0.8: containerd
< 1.7.26, containerd/nri#102), which never gets better by re-dialling. A session waits at most
``sync_timeout_seconds`` after Configure for it; after two such sessions in a row one warning names
the cause and the fix, and :attr:`NRIPlugin.sync_problem` says it (for the readiness reason) until a
Synchronize arrives; :attr:`NRIPlugin.sessions_without_sync` counts them.

Each request is served in its own task; a handler still running a grace period (1 s) past the
runtime's deadline (``timeout_nano``) is cancelled (see :meth:`~numaplane.nri.stub.Stub.serve` for why not at the deadline). A
handler that raises :class:`~numaplane.nri.errors.StatusError` answers with that status, any other
exception answers UNKNOWN with the exception text (for CreateContainer the runtime then fails the
container with that message). Handlers must not block the event loop: CPU-heavy work belongs in
``asyncio.to_thread``. After a reconnect the runtime sends Configure and Synchronize again, and
Synchronize is where a handler re-applies (the updates it returns) what it may have missed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import socket
from collections.abc import Iterable, Mapping

from numaplane.nri import translate
from numaplane.nri.errors import (
    CallTimeout,
    ConnectionClosed,
    PluginConfigError,
    ProtocolError,
    RegistrationFailed,
    StatusCode,
    StatusError,
)
from numaplane.nri.events import CpusetUpdate
from numaplane.nri.protocol import RequestReceived, Role
from numaplane.nri.runtimes import splits_synchronize
from numaplane.nri.stub import DEADLINE_GRACE_SECONDS, Stub
from numaplane.nri.transport import AsyncConnection, Reply

__all__ = ["DEFAULT_SOCKET_PATH", "RUNTIME_SERVICE", "NRIPlugin"]

log = logging.getLogger(__name__)

RUNTIME_SERVICE = "nri.pkg.api.v1alpha1.Runtime"
DEFAULT_SOCKET_PATH = "/var/run/nri/nri.sock"
_IDX_RE = re.compile(r"[0-9]{2}\Z")


class NRIPlugin:
    """One NRI plugin: registers ``name``/``idx`` with the runtime and serves ``handler`` (through a
    :class:`~numaplane.nri.stub.Stub`, which refuses a handler that implements no NRI method).

    Connect either by dialling ``socket_path`` or, when ``inherited_fd`` is given (a runtime-launched
    plugin, ``NRI_PLUGIN_SOCKET=3``), by adopting that already-connected socket.
    """

    def __init__(
        self,
        handler: object,
        *,
        name: str,
        idx: str,
        socket_path: str = DEFAULT_SOCKET_PATH,
        inherited_fd: int | None = None,
        registration_timeout_seconds: float = 5.0,
        call_timeout_seconds: float = 2.0,
        backoff_initial_seconds: float = 0.1,
        backoff_max_seconds: float = 10.0,
        deadline_grace_seconds: float = DEADLINE_GRACE_SECONDS,
        sync_timeout_seconds: float = 10.0,
    ) -> None:
        if not name or "/" in name:
            raise PluginConfigError(f"invalid NRI plugin name {name!r}")
        if not _IDX_RE.match(idx):
            raise PluginConfigError(f"NRI plugin index must be exactly two digits, got {idx!r}")
        self.handler = handler
        self.stub = Stub(handler)
        self.name = name
        self.idx = idx
        self.socket_path = socket_path
        self.inherited_fd = inherited_fd
        self.registration_timeout_seconds = registration_timeout_seconds
        self.call_timeout_seconds = call_timeout_seconds
        self.backoff_initial_seconds = backoff_initial_seconds
        self.backoff_max_seconds = backoff_max_seconds
        self.deadline_grace_seconds = deadline_grace_seconds
        self.sync_timeout_seconds = sync_timeout_seconds
        self.registrations = 0  # successful registrations so far (one per session)
        self.last_error: BaseException | None = None
        self.sessions_without_sync = 0  # registered sessions in a row that ended before Synchronize
        self.sync_problem = ""  # why the runtime does not synchronize (empty: it does, or not known yet)
        self._configured = asyncio.Event()
        self._synchronized = asyncio.Event()
        self._conn: AsyncConnection | None = None
        self._registered = asyncio.Event()
        self._stopping = asyncio.Event()

    @classmethod
    def from_env(
        cls,
        handler: object,
        *,
        name: str,
        idx: str,
        socket_path: str = DEFAULT_SOCKET_PATH,
        environ: Mapping[str, str] | None = None,
        **kwargs: float,
    ) -> NRIPlugin:
        """Honour ``NRI_PLUGIN_NAME``, ``NRI_PLUGIN_IDX`` and ``NRI_PLUGIN_SOCKET`` (an fd number) if set."""
        env = os.environ if environ is None else environ
        fd_text = env.get("NRI_PLUGIN_SOCKET")
        fd: int | None = None
        if fd_text:
            if not fd_text.isdigit():
                raise PluginConfigError(f"NRI_PLUGIN_SOCKET must be a file descriptor number, got {fd_text!r}")
            fd = int(fd_text)
        return cls(
            handler,
            name=env.get("NRI_PLUGIN_NAME") or name,
            idx=env.get("NRI_PLUGIN_IDX") or idx,
            socket_path=socket_path,
            inherited_fd=fd,
            **kwargs,
        )

    # -- state

    @property
    def registered(self) -> bool:
        """Connected and registered right now."""
        return self._registered.is_set()

    async def wait_registered(self, timeout_seconds: float | None = None) -> None:
        """Wait until the plugin is registered (raises ``TimeoutError`` past ``timeout_seconds``)."""
        async with asyncio.timeout(timeout_seconds):
            await self._registered.wait()

    # -- client calls

    async def update_containers(self, updates: Iterable[CpusetUpdate]) -> list[str]:
        """``Runtime.UpdateContainers``: change running containers' cpusets; return the ids of the
        containers whose update failed.

        Raises :class:`ConnectionClosed` when not registered, :class:`StatusError`, :class:`CallTimeout`.
        """
        conn = self._conn
        if conn is None or not self.registered:
            raise ConnectionClosed("NRI plugin is not registered with the runtime")
        payload = await conn.call(
            RUNTIME_SERVICE,
            "UpdateContainers",
            translate.update_containers_to_pb(updates),
            timeout_seconds=self.call_timeout_seconds,
        )
        return translate.failed_from_pb(payload)

    # -- lifecycle

    async def run(self) -> None:
        """Connect, register and serve until :meth:`stop`; reconnect with exponential backoff."""
        failures = 0
        warned = False  # a runtime that is not there is said once at warning, then at debug until it is
        while not self._stopping.is_set():
            try:
                reader, writer = await self._connect()
            except (OSError, PluginConfigError) as exc:
                self.last_error = exc
                log.log(
                    logging.DEBUG if warned else logging.WARNING,
                    "nri: cannot connect to %s: %s (is containerd >= 1.7 running with NRI enabled? retrying)",
                    self.socket_path,
                    exc,
                )
                warned = True
                if self.inherited_fd is not None:
                    raise ConnectionClosed(f"inherited NRI socket fd {self.inherited_fd} unusable: {exc}") from exc
            else:
                warned = False
                registered = await self._session(reader, writer)
                if registered and self._synchronized.is_set():
                    failures = 0
                elif registered:
                    self._no_sync()
                if self.inherited_fd is not None:
                    return  # a runtime-provided socket cannot be redialled
            if self._stopping.is_set():
                return
            delay = min(self.backoff_initial_seconds * (2**failures), self.backoff_max_seconds)
            failures += 1
            log.debug("nri: reconnecting in %.2f s", delay)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._stopping.wait()

    def _no_sync(self) -> None:
        """A registered session ended without Synchronize: count it; the second in a row is reported."""
        self.sessions_without_sync += 1
        if self.sessions_without_sync < 2:
            return
        name, version = self.stub.runtime.runtime, self.stub.runtime.version
        split = splits_synchronize(name, version)
        cause = "the runtime's state (pods and containers) is probably over the 4 MiB one NRI message may carry" + (
            ", and this runtime cannot split Synchronize (containerd/nri#102)" if split is False else ""
        )
        problem = (
            f"{name or 'the runtime'} {version}".strip()
            + f" registered the plugin but never sent Synchronize ({self.sessions_without_sync} sessions in a row): "
            + cause
            + "; fix: a runtime whose NRI splits Synchronize (NRI >= 0.8: containerd >= 1.7.26 or >= 2.0),"
            " or fewer pods and containers on this node"
        )
        if self.sessions_without_sync == 2:
            log.warning("nri: %s", problem)  # once, until a Synchronize arrives
        self.sync_problem = problem

    async def stop(self) -> None:
        """Stop :meth:`run`: close the connection and do not reconnect."""
        self._stopping.set()
        self.disconnect()

    def disconnect(self) -> None:
        """Drop the current connection (``run`` reconnects unless stopping). For tests and re-sync."""
        if self._conn is not None:
            self._conn.close()

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.inherited_fd is not None:
            sock = socket.socket(fileno=self.inherited_fd)
            if sock.family != socket.AF_UNIX:
                sock.detach()
                raise PluginConfigError(f"fd {self.inherited_fd} is not a unix socket")
            return await asyncio.open_unix_connection(sock=sock)
        return await asyncio.open_unix_connection(self.socket_path)

    async def _serve(self, request: RequestReceived) -> Reply:
        reply = await self.stub.serve(request, deadline_grace_seconds=self.deadline_grace_seconds)
        if reply.code == StatusCode.OK:
            if request.method == "Configure":
                self._configured.set()
            elif request.method == "Synchronize":
                self._synchronized.set()
                self.sessions_without_sync = 0
                self.sync_problem = ""
        return reply

    async def _watch_sync(self, conn: AsyncConnection) -> None:
        """End the session when Synchronize does not come within ``sync_timeout_seconds`` of Configure."""
        await self._configured.wait()
        try:
            async with asyncio.timeout(self.sync_timeout_seconds):
                await self._synchronized.wait()
        except TimeoutError:
            log.info("nri: no Synchronize %.1f s after Configure; reconnecting", self.sync_timeout_seconds)
            conn.close()

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """One connection: register and serve until it ends. Returns whether registration succeeded."""
        conn = AsyncConnection(reader, writer, self._serve, role=Role.PLUGIN)
        self._conn = conn
        self._configured.clear()
        self._synchronized.clear()
        reader_task = asyncio.create_task(conn.run(), name="nri-reader")
        watch_task = asyncio.create_task(self._watch_sync(conn), name="nri-sync-watch")
        registered = False
        try:
            await self._register(conn)
            registered = True
            self.registrations += 1
            self._registered.set()
            log.info("nri: plugin %s-%s registered", self.idx, self.name)
            await reader_task
        except (ProtocolError, StatusError, CallTimeout, ConnectionClosed) as exc:
            self.last_error = exc
            log.warning("nri: connection ended: %s", exc)
        finally:
            self._registered.clear()
            watch_task.cancel()
            conn.close()
            if not reader_task.done():
                reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader_task
            if not reader_task.cancelled() and isinstance(reader_task.exception(), ProtocolError):
                self.last_error = reader_task.exception()
                log.warning("nri: protocol error from the runtime: %s", self.last_error)
            await conn.wait_closed()
            if self._conn is conn:
                self._conn = None
        return registered

    async def _register(self, conn: AsyncConnection) -> None:
        try:
            await conn.call(
                RUNTIME_SERVICE,
                "RegisterPlugin",
                translate.register_to_pb(self.name, self.idx),
                timeout_seconds=self.registration_timeout_seconds,
            )
        except StatusError as exc:
            raise RegistrationFailed(exc.code, exc.message) from None
        except CallTimeout:
            raise RegistrationFailed(StatusCode.DEADLINE_EXCEEDED, "RegisterPlugin timed out") from None
