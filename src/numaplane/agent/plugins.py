"""The out-of-process plugin registry: registration, checks, health, isolation and re-registration.

The agent serves ``numaplane.plugin.v1.Registration`` on ``<plugin dir>/numaplane.sock`` (mode 0660,
owned by the expected uid when the agent runs as root). A plugin serves ``ResourcePlugin`` on its own
socket in the same directory and calls ``Register(name, endpoint, resources)``. The agent accepts it
only if all of these hold (else the call fails with the status in parentheses):

* ``version`` is ``v1`` and ``name``, ``resources`` are set (INVALID_ARGUMENT);
* ``endpoint`` is a bare file name; ``<plugin dir>/<endpoint>`` is a unix socket, not a symlink, and
  resolves inside the directory (PERMISSION_DENIED);
* the socket file is owned by the expected uid, **and** the process serving it runs as that uid —
  checked by connecting to it and reading ``SO_PEERCRED`` (PERMISSION_DENIED);
* no other plugin manages one of the resources (ALREADY_EXISTS): neither another registered plugin
  nor an active built-in one — a built-in switched off by the node config (CPU with
  ``cpuManager.policy: none``, memory and hugepages with ``memoryManager.policy: None``) leaves its
  resources to a vendor plugin (``ResourceManager.active_resources``); a reconfiguration switching it
  back on is then refused (``ResourceManager.check_config``);
* the plugin answers ``Configure`` with the agent's topology and config (UNAVAILABLE / FAILED_PRECONDITION).

A new plugin is added to the resource manager; the manager never calls it for I/O (its asks are
answered by ``asking.Answering``, its releases and views go through :meth:`PluginRegistry.kick`, a
background flush); its state from the last checkpoint, if any, is restored into it. Connecting (a
few blocking calls) runs in a worker thread, off the event loop. A plugin
registering again under its name (a restart) is reconnected: configured, restored, pending releases
replayed, and allocations it holds for containers that are gone are released.

Health: every ``health_interval_seconds`` each plugin's ``Health`` is called. A plugin that fails a
call or a health check is isolated (see ``grpcapi.pluginapi.adapter``: its resources fail admission
with reason ``PluginUnavailable``, everything else keeps working); when it answers again on the same
socket, or re-registers, it is reconnected.
"""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Final

import grpc
import grpc.aio
import structlog

from numaplane.agent.background import cancel_and_wait
from numaplane.agent.handler import StateRunner
from numaplane.agent.metrics import AgentMetrics
from numaplane.grpcapi.pluginapi.adapter import API_VERSION, GrpcResourcePlugin, socket_target
from numaplane.grpcapi.pluginapi.errors import PluginCallFailed
from numaplane.grpcapi.pluginapi.server import REGISTRY_SOCKET
from numaplane.grpcapi.pluginapi.v1 import api_pb2 as pb
from numaplane.grpcapi.pluginapi.v1 import api_pb2_grpc as pb_grpc
from numaplane.grpcapi.sockets import socket_umask
from numaplane.policy.config import NodeResourceConfig
from numaplane.policy.errors import PolicyConfigError

__all__ = ["PluginRegistry", "RegistrationError", "peer_credentials"]

log = structlog.get_logger("numaplane.agent")

MAX_SOCKET_PATH_BYTES: Final = 107


class RegistrationError(Exception):
    """A refused registration: ``code`` is the gRPC status to answer."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def peer_credentials(path: str, timeout_seconds: float = 1.0) -> tuple[int, int, int]:
    """``(pid, uid, gid)`` of the process serving the unix socket ``path`` (``SO_PEERCRED``)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_seconds)
        sock.connect(path)
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", raw)
    return pid, uid, gid


def check_endpoint(plugin_dir: Path, endpoint: str, expected_uid: int) -> Path:
    """The endpoint's path if it passes the directory and uid checks; raises :class:`RegistrationError`."""
    denied = grpc.StatusCode.PERMISSION_DENIED
    if not endpoint or "/" in endpoint or "\0" in endpoint or endpoint in (".", "..") or endpoint == REGISTRY_SOCKET:
        raise RegistrationError(denied, f"endpoint must be a socket file name inside {plugin_dir}, got {endpoint!r}")
    path = plugin_dir / endpoint
    try:
        st = path.lstat()
    except OSError as exc:
        raise RegistrationError(denied, f"endpoint {path}: {exc.strerror}") from None
    if not stat.S_ISSOCK(st.st_mode):
        raise RegistrationError(denied, f"endpoint {path} is not a unix socket")
    if path.resolve().parent != plugin_dir.resolve():
        raise RegistrationError(denied, f"endpoint {path} resolves outside {plugin_dir}")
    if st.st_uid != expected_uid:
        raise RegistrationError(denied, f"endpoint {path} is owned by uid {st.st_uid}, expected {expected_uid}")
    try:
        pid, uid, _gid = peer_credentials(str(path))
    except OSError as exc:
        raise RegistrationError(grpc.StatusCode.UNAVAILABLE, f"endpoint {path} does not answer: {exc}") from None
    if uid != expected_uid:
        raise RegistrationError(
            denied, f"endpoint {path} is served by pid {pid} running as uid {uid}, expected {expected_uid}"
        )
    return path


class _Registration(pb_grpc.RegistrationServicer):
    def __init__(self, registry: PluginRegistry) -> None:
        self.registry = registry

    async def Register(
        self, request: pb.RegisterRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> pb.RegisterResponse:
        try:
            await self.registry.register(request)
        except RegistrationError as exc:
            await context.abort(exc.code, exc.message)
        return pb.RegisterResponse()


class PluginRegistry:
    """Registered out-of-process plugins of one agent (see the module docstring)."""

    def __init__(
        self,
        plugin_dir: str | os.PathLike[str],
        runner: StateRunner,
        *,
        expected_uid: int | None = None,
        call_timeout_seconds: float = 0.25,
        health_interval_seconds: float = 1.0,
        metrics: AgentMetrics | None = None,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.plugin_dir = Path(plugin_dir)
        self.runner = runner
        self.expected_uid = os.geteuid() if expected_uid is None else expected_uid
        self.call_timeout_seconds = call_timeout_seconds
        self.health_interval_seconds = health_interval_seconds
        self.metrics = metrics
        self.on_change = on_change or (lambda: None)
        self.plugins: dict[str, GrpcResourcePlugin] = {}
        self.registrations = 0
        self._server: grpc.aio.Server | None = None
        self._health: asyncio.Task[None] | None = None
        self._flusher: asyncio.Task[None] | None = None
        self._dirty = asyncio.Event()
        self._lock = asyncio.Lock()

    @property
    def socket_path(self) -> Path:
        return self.plugin_dir / REGISTRY_SOCKET

    async def start(self) -> None:
        path = self.socket_path
        if len(os.fsencode(path.absolute())) > MAX_SOCKET_PATH_BYTES:
            raise OSError(f"registry socket path longer than {MAX_SOCKET_PATH_BYTES} bytes: {path}")
        self.plugin_dir.mkdir(parents=True, exist_ok=True)
        if path.is_socket():
            path.unlink()
        server = grpc.aio.server()
        pb_grpc.add_RegistrationServicer_to_server(_Registration(self), server)
        with socket_umask(0o660):
            server.add_insecure_port(socket_target(str(path.absolute())))
        await server.start()
        self._server = server
        os.chmod(path, 0o660)
        if os.geteuid() == 0 and self.expected_uid != 0:
            os.chown(path, self.expected_uid, -1)
        self._health = asyncio.get_running_loop().create_task(self._health_loop(), name="plugin-health")
        self._flusher = asyncio.get_running_loop().create_task(self._flush_loop(), name="plugin-flush")

    async def stop(self) -> None:
        task, self._health = self._health, None
        await cancel_and_wait(task)
        flusher, self._flusher = self._flusher, None
        await cancel_and_wait(flusher)
        server, self._server = self._server, None
        if server is not None:
            await server.stop(0.5)
        if self.socket_path.is_socket():
            self.socket_path.unlink()
        for plugin in self.plugins.values():
            await plugin.aclose()

    # -- registration ---------------------------------------------------------------------------------
    def _availability(self, plugin: GrpcResourcePlugin, available: bool) -> None:
        if self.metrics is not None:
            self.metrics.plugin_available.labels(plugin=plugin.name).set(1 if available else 0)
        if available:
            log.info("plugin available", plugin=plugin.name)
        else:
            log.warning(
                "plugin isolated: its resources fail admission until it answers",
                plugin=plugin.name,
                reason=plugin.last_error,
            )

    async def register(self, request: pb.RegisterRequest) -> GrpcResourcePlugin:
        """Check and accept a registration (raises :class:`RegistrationError`)."""
        async with self._lock:
            try:
                plugin = await self._register(request)
            except RegistrationError as exc:
                if self.metrics is not None:
                    self.metrics.plugin_registrations.labels(result="refused").inc()
                log.warning(
                    "plugin registration refused",
                    plugin=request.name,
                    endpoint=request.endpoint,
                    code=exc.code.name,
                    reason=exc.message,
                )
                raise
        if self.metrics is not None:
            self.metrics.plugin_registrations.labels(result="accepted").inc()
        self.registrations += 1
        self.on_change()
        log.info(
            "plugin registered", plugin=request.name, endpoint=request.endpoint, resources=sorted(request.resources)
        )
        return plugin

    async def _register(self, request: pb.RegisterRequest) -> GrpcResourcePlugin:
        invalid = grpc.StatusCode.INVALID_ARGUMENT
        if request.version != API_VERSION:
            raise RegistrationError(
                invalid, f"unsupported plugin API version {request.version!r}; this agent speaks {API_VERSION}"
            )
        if not request.name or not request.resources:
            raise RegistrationError(invalid, "name and resources are required")
        resources = frozenset(request.resources)
        path = await asyncio.to_thread(check_endpoint, self.plugin_dir, request.endpoint, self.expected_uid)
        state = self.runner.state
        conflicts = state.manager.resource_conflicts(request.name, resources)
        if conflicts:
            raise RegistrationError(grpc.StatusCode.ALREADY_EXISTS, "; ".join(conflicts))
        existing = self.plugins.get(request.name)
        if existing is not None:
            if existing.resources != resources:
                raise RegistrationError(
                    invalid, f"plugin {request.name!r} registered before with resources {sorted(existing.resources)}"
                )
            existing.options = request.options
            await self._connect(existing, str(path))
            return existing
        plugin = GrpcResourcePlugin(
            request.name,
            resources,
            str(path),
            topology=state.manager.topology,
            config=state.manager.config,
            timeout_seconds=self.call_timeout_seconds,
            options=request.options,
            on_availability=self._availability,
        )
        saved = state.take_saved_plugin_state(request.name)
        if saved:
            plugin.restore(saved)  # not reachable yet: only remembered, sent by connect()
        await self._connect(plugin, None)
        state.manager.add_plugin(plugin)
        self.plugins[request.name] = plugin
        return plugin

    async def _connect(self, plugin: GrpcResourcePlugin, target: str | None) -> None:
        state = self.runner.state
        plugin.config = state.manager.config

        def connect() -> list[tuple[str, str]]:  # blocking calls: in a worker thread
            plugin.connect(target)
            plugin.refresh()  # the views the manager reads, and the allocations the plugin holds
            return list(plugin.allocations())

        try:
            held = await asyncio.to_thread(connect)
        except PluginCallFailed as exc:
            raise RegistrationError(grpc.StatusCode.UNAVAILABLE, f"plugin does not answer: {exc}") from None
        except PolicyConfigError as exc:
            raise RegistrationError(
                grpc.StatusCode.FAILED_PRECONDITION, f"plugin refused the configuration: {exc}"
            ) from None
        # allocations the plugin holds for manager pods that are gone, judged now (pods admitted
        # while the thread ran are live, and their allocations were not in what it fetched)
        live = set(state.manager.pods) | set(state.parked)
        gone = [(uid, name) for uid, name in held if uid not in live]
        for uid, name in gone:
            plugin.release(uid, name)  # queued, sent by the flush
        if gone:
            self.kick()

    # -- what the manager left for the plugins ----------------------------------------------------------
    def kick(self) -> None:
        """Have the background flush send queued releases and configs and refresh the cached views."""
        self._dirty.set()

    async def _flush_loop(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            try:
                await asyncio.gather(*(p.flush() for p in list(self.plugins.values())))
            except Exception as exc:  # the loop must survive anything
                log.error("flushing to plugins failed", error=str(exc))

    async def check_config(self, config: NodeResourceConfig) -> list[str]:
        """What every reachable plugin finds wrong with ``config`` (asked concurrently)."""
        answers = await asyncio.gather(*(p.check_remote(config) for p in list(self.plugins.values())))
        return [problem for problems in answers for problem in problems]

    # -- health ---------------------------------------------------------------------------------------
    async def check_health(self) -> None:
        """One round of health checks (and reconnection of plugins that answer again)."""
        for plugin in list(self.plugins.values()):
            ok, message = await asyncio.to_thread(plugin.health, max(self.call_timeout_seconds, 0.5))
            if ok and not plugin.reachable:
                try:
                    async with self._lock:
                        await self._connect(plugin, None)
                except RegistrationError as exc:
                    log.info("plugin answers but cannot be reconnected yet", plugin=plugin.name, reason=exc.message)
                else:
                    self.on_change()
            elif not ok and plugin.reachable:
                plugin.mark_unavailable(message)

    async def _health_loop(self) -> None:
        while True:
            await asyncio.sleep(self.health_interval_seconds)
            try:
                await self.check_health()
            except Exception as exc:  # the loop must survive anything
                log.error("plugin health check failed", error=str(exc))
