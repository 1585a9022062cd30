"""What a vendor runs: serve a resource plugin over the numaplane plugin API v1 and register it.

A vendor writes a class implementing :class:`~numaplane.policy.plugin.ResourcePlugin` and a factory
``factory(topology, config_document) -> plugin``; then::

    server = PluginServer(factory, name="vendor.example/fpga", resources={"vendor.example/fpga"},
                          socket_path="/var/lib/numaplane/plugins/fpga.sock")
    server.start()
    register("/var/lib/numaplane/plugins/numaplane.sock", server)   # or run_plugin(...) for all of it

Semantics of the service (see ``v1/api.proto``):

* ``Configure`` builds the plugin with the agent's topology and config document (an exception from the
  factory is answered as the error text, the plugin stays unconfigured). Configuring again with the
  same topology and document keeps the plugin and its state (``kept_state``: the agent reconnected);
  anything else builds a fresh plugin.
* Every call other than ``GetPluginInfo``, ``Configure`` and ``Health`` before a successful
  ``Configure`` fails with ``FAILED_PRECONDITION``.
* Admission errors (``AdmissionError``) are answered as ``AdmissionFailure`` with their reason; any
  other exception from ``allocate`` too, with reason ``UnexpectedAdmissionError`` — a gRPC error would
  make the agent isolate the plugin.
* ``Restore`` with ``validate`` calls the plugin's optional ``validate_state(state) -> state`` (the
  checks the plugin does at its start); ``GetExclusiveAmounts`` its optional
  ``exclusive_amounts(pod, container_name | None) -> {resource: amount}``.
* Calls are serialised (one lock): plugins need not be thread-safe.

:func:`run_plugin` serves, registers, and registers again whenever the agent's registry socket is
re-created (the agent restarted) — the only thing a plugin must do to survive agent restarts.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import grpc

from numaplane.grpcapi.pluginapi.adapter import API_VERSION, socket_target
from numaplane.grpcapi.pluginapi.convert import (
    allocation_to_pb,
    amounts_to_pb,
    hint_from_pb,
    hints_to_pb,
    inventory_to_pb,
    pod_from_json,
)
from numaplane.grpcapi.pluginapi.errors import RegistrationRefused
from numaplane.grpcapi.pluginapi.v1 import api_pb2 as pb
from numaplane.grpcapi.pluginapi.v1 import api_pb2_grpc as pb_grpc
from numaplane.grpcapi.sockets import socket_umask
from numaplane.policy.config import parse_config
from numaplane.policy.errors import AdmissionError, PolicyError
from numaplane.policy.plugin import ResourcePlugin, inventory_of
from numaplane.topology.document import topology_from_dict
from numaplane.topology.model import Topology

__all__ = ["REGISTRY_SOCKET", "PluginFactory", "PluginServer", "register", "run_plugin"]

#: The agent's registry socket name inside the plugin directory.
REGISTRY_SOCKET = "numaplane.sock"


class PluginFactory(Protocol):
    """Builds the plugin for a machine and a config document (raise to refuse the configuration)."""

    def __call__(self, topology: Topology, config: Mapping[str, Any]) -> ResourcePlugin: ...


class _Servicer(pb_grpc.ResourcePluginServicer):
    def __init__(self, server: PluginServer) -> None:
        self.s = server

    def _plugin(self, context: grpc.ServicerContext) -> ResourcePlugin:
        plugin = self.s.plugin
        if plugin is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "plugin not configured yet (call Configure first)")
        assert plugin is not None
        return plugin

    def GetPluginInfo(self, request: pb.Empty, context: grpc.ServicerContext) -> pb.PluginInfo:
        return self.s.info()

    def Health(self, request: pb.Empty, context: grpc.ServicerContext) -> pb.HealthResponse:
        ok, message = self.s.health()
        return pb.HealthResponse(healthy=ok, message=message)

    def Configure(self, request: pb.ConfigureRequest, context: grpc.ServicerContext) -> pb.ConfigureResponse:
        with self.s.lock:
            key = (request.topology_json, request.config_json)
            if self.s.plugin is not None and self.s.configured_with == key:
                return pb.ConfigureResponse(kept_state=True)
            try:
                topology = topology_from_dict(json.loads(request.topology_json))
                doc = json.loads(request.config_json) if request.config_json else {}
                plugin = self.s.factory(topology, doc)
            except Exception as exc:
                return pb.ConfigureResponse(error=str(exc))
            self.s.plugin = plugin
            self.s.configured_with = key
            self.s.configurations += 1
            return pb.ConfigureResponse()

    def GetTopologyHints(self, request: pb.HintsRequest, context: grpc.ServicerContext) -> pb.HintsResponse:
        with self.s.lock:
            plugin = self._plugin(context)
            pod = pod_from_json(request.pod_json)
            container = pod.container(request.container_name)
            if container is None:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"pod has no container {request.container_name!r}")
            assert container is not None
            return hints_to_pb(plugin.hints(pod, container))

    def GetPodTopologyHints(self, request: pb.PodHintsRequest, context: grpc.ServicerContext) -> pb.HintsResponse:
        with self.s.lock:
            plugin = self._plugin(context)
            return hints_to_pb(plugin.pod_hints(pod_from_json(request.pod_json)))

    def Allocate(self, request: pb.AllocateRequest, context: grpc.ServicerContext) -> pb.AllocateResponse:
        with self.s.lock:
            plugin = self._plugin(context)
            pod = pod_from_json(request.pod_json)
            container = pod.container(request.container_name)
            if container is None:
                return pb.AllocateResponse(
                    failure=pb.AdmissionFailure(
                        reason="UnexpectedAdmissionError", message=f"pod has no container {request.container_name!r}"
                    )
                )
            try:
                allocation = plugin.allocate(pod, container, hint_from_pb(request.hint))
            except AdmissionError as exc:
                return pb.AllocateResponse(failure=pb.AdmissionFailure(reason=exc.reason, message=exc.message))
            except Exception as exc:
                return pb.AllocateResponse(
                    failure=pb.AdmissionFailure(
                        reason="UnexpectedAdmissionError", message=f"{type(exc).__name__}: {exc}"
                    )
                )
            return pb.AllocateResponse(allocation=allocation_to_pb(allocation))

    def Release(self, request: pb.ReleaseRequest, context: grpc.ServicerContext) -> pb.Empty:
        with self.s.lock:
            self._plugin(context).release(request.pod_uid, request.container_name)
            return pb.Empty()

    def GetAllocations(self, request: pb.Empty, context: grpc.ServicerContext) -> pb.AllocationsResponse:
        with self.s.lock:
            allocations = self._plugin(context).allocations()
            return pb.AllocationsResponse(
                allocations=[
                    pb.ContainerAllocation(pod_uid=uid, container_name=name, allocation=allocation_to_pb(a))
                    for (uid, name), a in sorted(allocations.items())
                ]
            )

    def GetAllocatable(self, request: pb.Empty, context: grpc.ServicerContext) -> pb.NumaAmounts:
        with self.s.lock:
            return amounts_to_pb(self._plugin(context).allocatable())

    def GetAvailable(self, request: pb.Empty, context: grpc.ServicerContext) -> pb.NumaAmounts:
        with self.s.lock:
            return amounts_to_pb(self._plugin(context).available())

    def GetInventory(self, request: pb.Empty, context: grpc.ServicerContext) -> pb.Inventory:
        with self.s.lock:
            return inventory_to_pb(inventory_of(self._plugin(context)))

    def CheckConfig(self, request: pb.ConfigRequest, context: grpc.ServicerContext) -> pb.CheckConfigResponse:
        with self.s.lock:
            plugin = self._plugin(context)
            try:
                config = parse_config(json.loads(request.config_json or "{}"))
            except (PolicyError, ValueError) as exc:
                return pb.CheckConfigResponse(problems=[str(exc)])
            return pb.CheckConfigResponse(problems=plugin.check_config(config))

    def Reconfigure(self, request: pb.ConfigRequest, context: grpc.ServicerContext) -> pb.Empty:
        with self.s.lock:
            plugin = self._plugin(context)
            try:
                config = parse_config(json.loads(request.config_json or "{}"))
            except (PolicyError, ValueError) as exc:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            plugin.reconfigure(config)
            if self.s.configured_with is not None:
                self.s.configured_with = (self.s.configured_with[0], request.config_json)
            return pb.Empty()

    def Snapshot(self, request: pb.Empty, context: grpc.ServicerContext) -> pb.State:
        with self.s.lock:
            return pb.State(state_json=json.dumps(self._plugin(context).snapshot(), sort_keys=True))

    def Restore(self, request: pb.RestoreRequest, context: grpc.ServicerContext) -> pb.RestoreResponse:
        with self.s.lock:
            plugin = self._plugin(context)
            try:
                state = json.loads(request.state_json or "{}")
                if request.validate:
                    validate = getattr(plugin, "validate_state", None)
                    if validate is None:
                        context.abort(grpc.StatusCode.UNIMPLEMENTED, "this plugin does not validate states")
                    result = validate(state)
                else:
                    plugin.restore(state)
                    result = plugin.snapshot()
            except (PolicyError, ValueError, KeyError, TypeError) as exc:
                return pb.RestoreResponse(error=str(exc))
            return pb.RestoreResponse(state_json=json.dumps(result, sort_keys=True))

    def GetExclusiveAmounts(
        self, request: pb.ExclusiveAmountsRequest, context: grpc.ServicerContext
    ) -> pb.ExclusiveAmountsResponse:
        with self.s.lock:
            plugin = self._plugin(context)
            amounts = getattr(plugin, "exclusive_amounts", None)
            if amounts is None:
                context.abort(grpc.StatusCode.UNIMPLEMENTED, "this plugin does not report exclusive amounts")
            pod = pod_from_json(request.pod_json)
            result = amounts(pod, request.container_name or None)
            return pb.ExclusiveAmountsResponse(amounts={k: int(v) for k, v in result.items()})


class PluginServer:
    """A plugin served on ``socket_path`` (a unix socket; the file is replaced if stale).

    ``health_check`` (optional) returns ``(healthy, message)``; by default the plugin is healthy while
    the process serves.
    """

    def __init__(
        self,
        factory: PluginFactory,
        *,
        name: str,
        resources: frozenset[str] | set[str] | list[str],
        socket_path: str | os.PathLike[str],
        options: pb.PluginOptions | None = None,
        health_check: Callable[[], tuple[bool, str]] | None = None,
        max_workers: int = 4,
    ) -> None:
        self.factory = factory
        self.name = name
        self.resources = frozenset(resources)
        self.socket_path = Path(socket_path)
        self.options = options or pb.PluginOptions()
        self.health_check = health_check
        self.lock = threading.RLock()
        self.plugin: ResourcePlugin | None = None
        self.configured_with: tuple[str, str] | None = None
        self.configurations = 0
        self._max_workers = max_workers
        self._server: grpc.Server | None = None

    def info(self) -> pb.PluginInfo:
        return pb.PluginInfo(
            version=API_VERSION, name=self.name, resources=sorted(self.resources), options=self.options
        )

    def health(self) -> tuple[bool, str]:
        return self.health_check() if self.health_check is not None else (True, "serving")

    def start(self) -> None:
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        if self.socket_path.is_socket():
            self.socket_path.unlink()
        server = grpc.server(ThreadPoolExecutor(max_workers=self._max_workers, thread_name_prefix="numaplane-plugin"))
        pb_grpc.add_ResourcePluginServicer_to_server(_Servicer(self), server)
        with socket_umask(0o660):
            server.add_insecure_port(socket_target(str(self.socket_path.absolute())))
        server.start()
        self._server = server

    def stop(self, grace_seconds: float | None = 0.5) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.stop(grace_seconds).wait()
        if self.socket_path.is_socket():
            self.socket_path.unlink()

    def wait(self) -> None:
        if self._server is not None:
            self._server.wait_for_termination()


def register(registry_socket: str | os.PathLike[str], server: PluginServer, *, timeout_seconds: float = 5.0) -> None:
    """Announce ``server`` to the agent; raises :class:`RegistrationRefused` (code ``UNAVAILABLE`` if no agent)."""
    request = pb.RegisterRequest(
        version=API_VERSION,
        name=server.name,
        endpoint=server.socket_path.name,
        resources=sorted(server.resources),
        options=server.options,
    )
    with grpc.insecure_channel(socket_target(str(Path(registry_socket).absolute()))) as channel:
        stub = pb_grpc.RegistrationStub(channel)
        try:
            stub.Register(request, timeout=timeout_seconds)
        except grpc.RpcError as exc:
            code = exc.code().name if hasattr(exc, "code") and exc.code() is not None else "UNKNOWN"
            raise RegistrationRefused(str(code), str(exc.details() if hasattr(exc, "details") else exc)) from None


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.lstat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


@contextmanager
def run_plugin(
    factory: PluginFactory,
    *,
    name: str,
    resources: frozenset[str] | set[str] | list[str],
    plugin_dir: str | os.PathLike[str],
    endpoint: str | None = None,
    options: pb.PluginOptions | None = None,
    poll_seconds: float = 0.5,
) -> Iterator[PluginServer]:
    """Serve in ``plugin_dir`` and keep registered (again after every agent restart) while inside the block."""
    folder = Path(plugin_dir)
    sock = folder / (endpoint or f"{name.replace('/', '_')}.sock")
    server = PluginServer(factory, name=name, resources=resources, socket_path=sock, options=options)
    server.start()
    stop = threading.Event()
    registry = folder / REGISTRY_SOCKET

    def keep_registered() -> None:
        registered_at: tuple[int, int] | None = None
        while not stop.is_set():
            current = _identity(registry)
            if current is not None and current != registered_at:
                try:
                    register(registry, server)
                    registered_at = current
                except RegistrationRefused:
                    pass  # the agent may not be ready yet: try again
            stop.wait(poll_seconds)

    thread = threading.Thread(target=keep_registered, name="numaplane-plugin-register", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        stop.set()
        thread.join(5)
        server.stop()


def wait_forever() -> None:  # pragma: no cover - used by example plugin main()s
    while True:
        time.sleep(3600)
