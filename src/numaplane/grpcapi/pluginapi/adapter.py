"""A :class:`~numaplane.policy.plugin.ResourcePlugin` served by another process (gRPC over a unix socket).

:class:`GrpcResourcePlugin` is what the agent adds to its resource manager for an out-of-process
plugin; the manager cannot tell it from a built-in plugin. Calls are synchronous gRPC calls with a
short deadline (``timeout_seconds``, 0.25 s by default, so that two calls per admission stay far below
the runtime's 2 s budget); the agent makes them from its core worker thread, never on its event loop.

Isolation. Any transport failure (no answer, deadline passed, the process is gone) marks the plugin
*unreachable* (``reachable`` is ``False``) and is never raised from ``hints``: from then on

* a container that requests one of the plugin's resources fails admission with
  :class:`~numaplane.policy.errors.PluginUnavailableError` (reason ``PluginUnavailable``) whose message
  names the plugin, its resources and the failure;
* every other container is admitted without asking the plugin (its other resources keep working);
* releases are queued and replayed, reconfigurations deferred, queries answered from the last known values.

:meth:`GrpcResourcePlugin.connect` (after a re-registration or when a health check succeeds again)
configures the plugin with the topology and the current config, restores its last known state
(:meth:`snapshot` results are cached), replays the queued releases and marks it available.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

import grpc

from numaplane.grpcapi.pluginapi.convert import (
    allocation_from_pb,
    amounts_from_pb,
    hint_to_pb,
    hints_from_pb,
    pod_to_json,
)
from numaplane.grpcapi.pluginapi.errors import PluginCallFailed
from numaplane.grpcapi.pluginapi.v1 import api_pb2 as pb
from numaplane.grpcapi.pluginapi.v1 import api_pb2_grpc as pb_grpc
from numaplane.policy.config import NodeResourceConfig
from numaplane.policy.errors import AdmissionError, PluginUnavailableError, PolicyConfigError, StateError
from numaplane.policy.hints import TopologyHint
from numaplane.policy.plugin import Hints, PluginAllocation
from numaplane.resources.pod import Container, Pod
from numaplane.topology.model import Topology

__all__ = ["API_VERSION", "GrpcResourcePlugin", "socket_target"]

API_VERSION = "v1"


def socket_target(path: str) -> str:
    """``unix://<absolute path>`` (or the argument when it already is a target)."""
    return path if path.startswith("unix:") else f"unix://{path}"


class _AdmissionFailure(AdmissionError):
    """An admission failure answered by the plugin, with the plugin's reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class GrpcResourcePlugin:
    """A remote plugin (see the module docstring). Thread-safe for one caller plus health checks."""

    def __init__(
        self,
        name: str,
        resources: frozenset[str] | set[str] | list[str],
        target: str,
        *,
        topology: Topology,
        config: NodeResourceConfig,
        timeout_seconds: float = 0.25,
        options: pb.PluginOptions | None = None,
        on_availability: Callable[[GrpcResourcePlugin, bool], None] | None = None,
    ) -> None:
        self._name = name
        self._resources = frozenset(resources)
        self.topology = topology
        self.config = config
        self.timeout_seconds = timeout_seconds
        self.options = options or pb.PluginOptions()
        self.on_availability = on_availability
        self.reachable = False
        self.last_error = "not connected yet"
        self.target = ""
        self.pending_releases: list[tuple[str, str]] = []
        self.config_doc: Mapping[str, Any] | None = None  # sent instead of ``config.to_dict()`` when set
        self._state: dict[str, Any] | None = None  # last known snapshot
        self._allocations: dict[tuple[str, str], PluginAllocation] = {}
        self._allocatable: dict[int, dict[str, int]] = {}
        self._available: dict[int, dict[str, int]] = {}
        self._lock = threading.RLock()
        self._channel: grpc.Channel | None = None
        self._stub: pb_grpc.ResourcePluginStub | None = None
        self._set_target(target)

    # -- identity -------------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def resources(self) -> frozenset[str]:
        return self._resources

    def __repr__(self) -> str:
        return f"GrpcResourcePlugin({self._name!r}, {self.target!r}, reachable={self.reachable})"

    # -- transport ------------------------------------------------------------------------------------
    def _set_target(self, target: str) -> None:
        with self._lock:
            if self._channel is not None:
                self._channel.close()
            self.target = socket_target(target)
            self._channel = grpc.insecure_channel(self.target)
            self._stub = pb_grpc.ResourcePluginStub(self._channel)

    def close(self) -> None:
        with self._lock:
            if self._channel is not None:
                self._channel.close()
                self._channel = None
                self._stub = None
            self._set_available(False, "closed")

    def _set_available(self, available: bool, reason: str = "") -> None:
        changed = available != self.reachable
        self.reachable = available
        self.last_error = "" if available else reason
        if changed and self.on_availability is not None:
            self.on_availability(self, available)

    def mark_unavailable(self, reason: str) -> None:
        """Isolate the plugin (e.g. a failed health check)."""
        with self._lock:
            self._set_available(False, reason)

    def _call(self, method: str, request: Any, timeout_seconds: float | None = None) -> Any:
        """Call ``method``; on a transport failure isolate the plugin and raise :class:`PluginCallFailed`."""
        stub = self._stub
        if stub is None:
            raise PluginCallFailed(method, "UNAVAILABLE", "not connected")
        try:
            return getattr(stub, method)(request, timeout=timeout_seconds or self.timeout_seconds)
        except grpc.RpcError as exc:
            code = exc.code().name if hasattr(exc, "code") and exc.code() is not None else "UNKNOWN"
            details = exc.details() if hasattr(exc, "details") else str(exc)
            failure = PluginCallFailed(method, str(code), str(details))
            with self._lock:
                self._set_available(False, str(failure))
            raise failure from None

    def _unavailable(self) -> PluginUnavailableError:
        return PluginUnavailableError(
            f"plugin {self._name!r} is unavailable ({self.last_error}); "
            f"resources {', '.join(sorted(self._resources))} cannot be admitted until it answers again"
        )

    def _requests_ours(self, container: Container) -> bool:
        for source in (container.requests, container.limits):
            for resource, quantity in source.items():
                if resource in self._resources and not quantity.is_zero():
                    return True
        return False

    def _pod_requests_ours(self, pod: Pod) -> bool:
        return any(self._requests_ours(c) for c in pod.all_containers())

    # -- (re)connection -------------------------------------------------------------------------------
    def info(self) -> pb.PluginInfo:
        return self._call("GetPluginInfo", pb.Empty())  # type: ignore[no-any-return]

    def health(self, timeout_seconds: float | None = None) -> tuple[bool, str]:
        """Ask the plugin; a transport failure isolates it. Does not make it available again."""
        try:
            answer = self._call("Health", pb.Empty(), timeout_seconds)
        except PluginCallFailed as exc:
            return False, str(exc)
        if not answer.healthy:
            with self._lock:
                self._set_available(False, f"unhealthy: {answer.message}")
        return bool(answer.healthy), str(answer.message)

    def configure_remote(self, timeout_seconds: float | None = None) -> bool:
        """``Configure`` with the topology and config document; return whether the plugin kept its state.

        Raises :class:`PolicyConfigError` with the plugin's text when it refuses the configuration.
        """
        doc = self.config_doc if self.config_doc is not None else self.config.to_dict()
        request = pb.ConfigureRequest(
            topology_json=json.dumps(self.topology.to_dict(), separators=(",", ":")),
            config_json=json.dumps(doc, separators=(",", ":")),
        )
        answer = self._call("Configure", request, timeout_seconds or max(self.timeout_seconds, 2.0))
        if answer.error:
            with self._lock:
                self._set_available(False, f"configuration refused: {answer.error}")
            raise PolicyConfigError(str(answer.error))
        return bool(answer.kept_state)

    def connect(self, target: str | None = None, *, timeout_seconds: float | None = None) -> None:
        """Point at ``target`` (if given), configure, restore, replay releases, and become reachable.

        A plugin that kept its state (the agent only lost the connection) is not restored; a fresh one
        gets its last known state. Raises :class:`PluginCallFailed` or :class:`PolicyConfigError`; the
        plugin stays isolated then.
        """
        with self._lock:
            if target is not None and socket_target(target) != self.target:
                self._set_target(target)
            slow = timeout_seconds or max(self.timeout_seconds, 2.0)
            kept = self.configure_remote(slow)
            if not kept and self._state:
                answer = self._call("Restore", pb.RestoreRequest(state_json=json.dumps(self._state)), slow)
                if answer.error:
                    raise PolicyConfigError(f"plugin {self._name!r} refused its last state: {answer.error}")
            pending, self.pending_releases = self.pending_releases, []
            for pod_uid, container in pending:
                self._call("Release", pb.ReleaseRequest(pod_uid=pod_uid, container_name=container), slow)
            self._set_available(True)
            self._refresh_state(slow)

    def _refresh_state(self, timeout_seconds: float | None = None) -> None:
        try:
            answer = self._call("Snapshot", pb.Empty(), timeout_seconds)
        except PluginCallFailed:
            return
        self._state = json.loads(answer.state_json) if answer.state_json else {}

    # -- ResourcePlugin -------------------------------------------------------------------------------
    def hints(self, pod: Pod, container: Container) -> Hints | None:
        if not self.reachable:
            return None  # allocate() refuses containers that need us
        try:
            answer = self._call(
                "GetTopologyHints", pb.HintsRequest(pod_json=pod_to_json(pod), container_name=container.name)
            )
        except PluginCallFailed:
            return None
        return hints_from_pb(answer)

    def pod_hints(self, pod: Pod) -> Hints | None:
        if not self.reachable or not self.options.pod_hints:
            return None
        try:
            answer = self._call("GetPodTopologyHints", pb.PodHintsRequest(pod_json=pod_to_json(pod)))
        except PluginCallFailed:
            return None
        return hints_from_pb(answer)

    def allocate(self, pod: Pod, container: Container, hint: TopologyHint) -> PluginAllocation:
        if not self.reachable:
            if self._requests_ours(container):
                raise self._unavailable()
            return PluginAllocation(self._name)
        request = pb.AllocateRequest(pod_json=pod_to_json(pod), container_name=container.name, hint=hint_to_pb(hint))
        try:
            answer = self._call("Allocate", request)
        except PluginCallFailed:
            if self._requests_ours(container):
                raise self._unavailable() from None
            return PluginAllocation(self._name)
        if answer.WhichOneof("result") == "failure":
            raise _AdmissionFailure(answer.failure.reason or "UnexpectedAdmissionError", answer.failure.message)
        allocation = allocation_from_pb(self._name, answer.allocation)
        if allocation.cpus is not None or allocation.memory or allocation.devices or allocation.extra:
            self._allocations[(pod.uid, container.name)] = allocation
            self._refresh_state()  # the cached state must cover every allocation (restored after a crash)
        return allocation

    def release(self, pod_uid: str, container_name: str) -> None:
        held = self._allocations.pop((pod_uid, container_name), None) is not None
        if not self.reachable:
            self.pending_releases.append((pod_uid, container_name))
            return
        try:
            self._call("Release", pb.ReleaseRequest(pod_uid=pod_uid, container_name=container_name))
        except PluginCallFailed:
            self.pending_releases.append((pod_uid, container_name))
            return
        if held:
            self._refresh_state()

    def allocations(self) -> Mapping[tuple[str, str], PluginAllocation]:
        if self.reachable:
            try:
                answer = self._call("GetAllocations", pb.Empty())
            except PluginCallFailed:
                return dict(self._allocations)
            self._allocations = {
                (a.pod_uid, a.container_name): allocation_from_pb(self._name, a.allocation) for a in answer.allocations
            }
        return dict(self._allocations)

    def allocatable(self) -> Mapping[int, Mapping[str, int]]:
        if self.reachable:
            with contextlib.suppress(PluginCallFailed):
                self._allocatable = amounts_from_pb(self._call("GetAllocatable", pb.Empty()))
        return self._allocatable

    def available(self) -> Mapping[int, Mapping[str, int]]:
        if self.reachable:
            with contextlib.suppress(PluginCallFailed):
                self._available = amounts_from_pb(self._call("GetAvailable", pb.Empty()))
        return self._available

    def check_config(self, config: NodeResourceConfig) -> list[str]:
        if not self.reachable:
            return []  # applied when it comes back (connect sends the current config)
        try:
            answer = self._call("CheckConfig", pb.ConfigRequest(config_json=json.dumps(config.to_dict())))
        except PluginCallFailed:
            return []
        return [f"{self._name}: {p}" for p in answer.problems]

    def reconfigure(self, config: NodeResourceConfig) -> None:
        self.config = config
        if self.reachable:
            with contextlib.suppress(PluginCallFailed):
                self._call("Reconfigure", pb.ConfigRequest(config_json=json.dumps(config.to_dict())))

    def snapshot(self) -> dict[str, Any]:
        if self.reachable:
            self._refresh_state()
        return dict(self._state or {})

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        self._state = dict(snapshot)
        if self.reachable:
            answer = self._call("Restore", pb.RestoreRequest(state_json=json.dumps(self._state)))
            if answer.error:
                raise StateError(f"plugin {self._name!r} refused the state: {answer.error}")

    # -- beyond the protocol --------------------------------------------------------------------------
    def restore_validated(self, snapshot: Mapping[str, Any]) -> dict[str, Any]:
        """Install a state and have the plugin validate it as at its start; return the resulting state.

        Raises :class:`StateError` with the plugin's message when the state is refused.
        """
        answer = self._call("Restore", pb.RestoreRequest(state_json=json.dumps(dict(snapshot)), validate=True))
        if answer.error:
            raise StateError(str(answer.error))
        self._state = json.loads(answer.state_json) if answer.state_json else dict(snapshot)
        return dict(self._state)

    def exclusive_amounts(self, pod: Pod, container: str | None = None) -> dict[str, int]:
        """What the pod (or one container) would get exclusively of each of the plugin's resources."""
        answer = self._call(
            "GetExclusiveAmounts", pb.ExclusiveAmountsRequest(pod_json=pod_to_json(pod), container_name=container or "")
        )
        return {k: int(v) for k, v in answer.amounts.items()}
