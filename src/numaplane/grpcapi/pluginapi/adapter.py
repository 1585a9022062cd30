"""A :class:`~numaplane.policy.plugin.ResourcePlugin` served by another process (gRPC over a unix socket).

:class:`GrpcResourcePlugin` is what the agent adds to its resource manager for an out-of-process
plugin. The manager never makes it do I/O (``answers_in_process`` is ``False``):

* its asks (``policy/asks.py``) are answered by :meth:`GrpcResourcePlugin.answer`, an asynchronous
  gRPC call with a deadline (``timeout_seconds``, 0.25 s by default, so that two calls per admission
  stay far below the runtime's 2 s budget) made by a driver (``asking.py``), never by the manager;
* what the manager calls directly answers from memory: ``release`` queues the release (sent by
  :meth:`flush`), ``allocations`` / ``allocatable`` / ``available`` / ``snapshot`` return the last
  answers cached (refreshed after every allocation and by :meth:`flush` / :meth:`refresh`),
  ``reconfigure`` / ``restore`` remember the config / state (sent by :meth:`flush`), ``check_config``
  answers nothing (the agent asks the plugin with :meth:`check_remote` before reconfiguring).

The blocking methods (``hints``, ``allocate``, :meth:`connect`, :meth:`health`, :meth:`refresh`, ...)
are for callers outside the resource manager (registration in a worker thread, tests, conformance).

Over 400 lines on purpose: one class whose blocking half (registration, health, tests) and
asynchronous half (the manager's asks, flushes) share the caches and the availability state.

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

import asyncio
import contextlib
import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

import grpc
import grpc.aio

from numaplane.grpcapi.pluginapi.convert import (
    allocation_from_pb,
    amounts_from_pb,
    hint_to_pb,
    hints_from_pb,
    inventory_from_pb,
    pod_to_json,
)
from numaplane.grpcapi.pluginapi.errors import PluginCallFailed
from numaplane.grpcapi.pluginapi.v1 import api_pb2 as pb
from numaplane.grpcapi.pluginapi.v1 import api_pb2_grpc as pb_grpc
from numaplane.policy.asks import AllocateAnswer, AllocateAsk, Answer, Ask, HintsAnswer, Unanswered
from numaplane.policy.config import NodeResourceConfig
from numaplane.policy.errors import AdmissionError, PluginUnavailableError, PolicyConfigError, StateError
from numaplane.policy.hints import TopologyHint
from numaplane.policy.plugin import Hints, Inventory, PluginAllocation
from numaplane.resources.pod import Container, Pod
from numaplane.topology.document import topology_to_dict
from numaplane.topology.model import Topology

__all__ = ["API_VERSION", "GrpcResourcePlugin", "socket_target"]

API_VERSION = "v1"
_OPTIONAL = frozenset({"GetInventory"})  # methods a v1 plugin may leave unimplemented


#: Channel options for a plugin's local socket. gRPC shares subchannels between the channels of one
#: process by default, so a fresh channel to a restarted plugin would inherit the dead process's
#: subchannel, still backing off, and fail calls with its stale "connection refused"; each channel keeps
#: its own (``use_local_subchannel_pool``), and reconnection backs off from 100 ms to at most 1 s (a
#: local socket: a plugin that comes back is answered within a second, never after gRPC's 2-minute cap).
CHANNEL_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.use_local_subchannel_pool", 1),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
)


def socket_target(path: str) -> str:
    """``unix://<absolute path>`` (or the argument when it already is a target)."""
    return path if path.startswith("unix:") else f"unix://{path}"


class _AdmissionFailure(AdmissionError):
    """An admission failure answered by the plugin, with the plugin's reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class GrpcResourcePlugin:
    """A remote plugin (see the module docstring). Thread-safe for one caller plus health checks.

    The asynchronous methods run on one event loop (the one :meth:`answer` first ran on)."""

    answers_in_process = False

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
        self._inventory = Inventory()
        self._changes = 0  # allocations and releases so far: a fetch started before one is stale
        self._lock = threading.RLock()
        self._channel: grpc.Channel | None = None
        self._stub: pb_grpc.ResourcePluginStub | None = None
        self._aio: grpc.aio.Channel | None = None
        self._stale: list[grpc.aio.Channel] = []  # dropped asynchronous channels, to close on the loop
        self._aio_stub: pb_grpc.ResourcePluginStub | None = None
        self._config_dirty = False
        self._restore_dirty = False
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
            self._channel = grpc.insecure_channel(self.target, options=CHANNEL_OPTIONS)
            self._stub = pb_grpc.ResourcePluginStub(self._channel)
            self._drop_async_channel()  # a new one on the next asynchronous call

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
        """Call ``method``; on a transport failure isolate the plugin and raise :class:`PluginCallFailed`
        (an optional method a plugin does not implement, ``UNIMPLEMENTED``, isolates nothing)."""
        stub = self._stub
        if stub is None:
            raise PluginCallFailed(method, "UNAVAILABLE", "not connected")
        try:
            return getattr(stub, method)(request, timeout=timeout_seconds or self.timeout_seconds)
        except grpc.RpcError as exc:
            code = exc.code().name if hasattr(exc, "code") and exc.code() is not None else "UNKNOWN"
            details = exc.details() if hasattr(exc, "details") else str(exc)
            failure = PluginCallFailed(method, str(code), str(details))
            if not (method in _OPTIONAL and code == "UNIMPLEMENTED"):
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
            topology_json=json.dumps(topology_to_dict(self.topology), separators=(",", ":")),
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
            # fresh channels, blocking and asynchronous, even to the same socket: the old ones may be
            # backing off from the dead process and would fail calls with its stale connection error
            self._set_target(self.target if target is None else target)
            slow = timeout_seconds or max(self.timeout_seconds, 2.0)
            kept = self.configure_remote(slow)
            if not kept and self._state:
                answer = self._call("Restore", pb.RestoreRequest(state_json=json.dumps(self._state)), slow)
                if answer.error:
                    raise PolicyConfigError(f"plugin {self._name!r} refused its last state: {answer.error}")
            if self._config_dirty or self._restore_dirty:
                self._config_dirty = self._restore_dirty = False  # Configure and Restore above sent them
            while self.pending_releases:
                pod_uid, container = self.pending_releases[0]
                self._call("Release", pb.ReleaseRequest(pod_uid=pod_uid, container_name=container), slow)
                self.pending_releases.pop(0)
            self._set_available(True)
            self.refresh_state(slow)

    def refresh_state(self, timeout_seconds: float | None = None) -> None:
        """Fetch the plugin's state now (blocking; kept as it was when the plugin does not answer)."""
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
            self.refresh_state()  # the cached state must cover every allocation (restored after a crash)
        return allocation

    def release(self, pod_uid: str, container_name: str) -> None:
        """Forget the allocation and queue the release (sent by :meth:`flush` or :meth:`connect`); no I/O."""
        self._allocations.pop((pod_uid, container_name), None)
        self._changes += 1
        self.pending_releases.append((pod_uid, container_name))

    def allocations(self) -> Mapping[tuple[str, str], PluginAllocation]:
        """The plugin's allocations as last answered (no I/O)."""
        return dict(self._allocations)

    def allocatable(self) -> Mapping[int, Mapping[str, int]]:
        """The plugin's allocatable amounts as last answered (no I/O)."""
        return self._allocatable

    def available(self) -> Mapping[int, Mapping[str, int]]:
        """The plugin's free amounts as last answered (no I/O)."""
        return self._available

    def inventory(self) -> Inventory:
        """The plugin's inventory as last answered (no I/O; empty for a plugin without ``GetInventory``)."""
        return self._inventory

    def check_config(self, config: NodeResourceConfig) -> list[str]:
        return []  # no I/O here: the agent asks the plugin itself first (check_remote)

    def reconfigure(self, config: NodeResourceConfig) -> None:
        """Remember ``config``; :meth:`flush` sends it (:meth:`connect` sends the current one anyway)."""
        self.config = config
        self._config_dirty = True

    def snapshot(self) -> dict[str, Any]:
        """The plugin's state as last answered (refreshed after every allocation and flush; no I/O)."""
        return dict(self._state or {})

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Remember ``snapshot`` as the plugin's state; sent by :meth:`flush` (or :meth:`connect`)."""
        self._state = dict(snapshot)
        self._restore_dirty = self.reachable

    # -- blocking views (outside the resource manager) ------------------------------------------------
    def refresh(self, timeout_seconds: float | None = None) -> None:
        """Fetch allocations, amounts and state now (blocking); a transport failure isolates the plugin."""
        seen = self._changes
        allocations = self._call("GetAllocations", pb.Empty(), timeout_seconds)
        if self._changes == seen:  # else stale: an allocation or release happened meanwhile
            self._allocations = {
                (a.pod_uid, a.container_name): allocation_from_pb(self._name, a.allocation)
                for a in allocations.allocations
            }
        self._allocatable = amounts_from_pb(self._call("GetAllocatable", pb.Empty(), timeout_seconds))
        self._available = amounts_from_pb(self._call("GetAvailable", pb.Empty(), timeout_seconds))
        try:
            self._inventory = inventory_from_pb(self._call("GetInventory", pb.Empty(), timeout_seconds))
        except PluginCallFailed as exc:
            if exc.code != "UNIMPLEMENTED":
                raise
        self.refresh_state(timeout_seconds)

    def restore_now(self, snapshot: Mapping[str, Any]) -> None:
        """Install a state at the plugin now (blocking); :class:`StateError` when it refuses it."""
        self._state = dict(snapshot)
        self._restore_dirty = False
        answer = self._call("Restore", pb.RestoreRequest(state_json=json.dumps(self._state)))
        if answer.error:
            raise StateError(f"plugin {self._name!r} refused the state: {answer.error}")

    def release_now(self, pod_uid: str, container_name: str, timeout_seconds: float | None = None) -> None:
        """Release at the plugin now (blocking; raises :class:`PluginCallFailed`)."""
        self._allocations.pop((pod_uid, container_name), None)
        self._call("Release", pb.ReleaseRequest(pod_uid=pod_uid, container_name=container_name), timeout_seconds)

    # -- asynchronous: the answers to the manager's asks ----------------------------------------------
    def _drop_async_channel(self) -> None:
        """Forget the asynchronous channel (closed on the loop by the next asynchronous call or :meth:`aclose`)."""
        if self._aio is not None:
            self._stale.append(self._aio)
        self._aio, self._aio_stub = None, None

    def _async_stub(self) -> pb_grpc.ResourcePluginStub:
        while self._stale:
            asyncio.get_running_loop().create_task(self._stale.pop().close(None))
        if self._aio_stub is None:
            self._aio = grpc.aio.insecure_channel(self.target, options=CHANNEL_OPTIONS)
            self._aio_stub = pb_grpc.ResourcePluginStub(self._aio)
        return self._aio_stub

    async def _acall(self, method: str, request: Any, timeout_seconds: float | None = None) -> Any:
        """Call ``method`` on the event loop; on a transport failure isolate the plugin and raise :class:`PluginCallFailed`."""
        try:
            return await getattr(self._async_stub(), method)(request, timeout=timeout_seconds or self.timeout_seconds)
        except grpc.aio.AioRpcError as exc:
            failure = PluginCallFailed(method, exc.code().name, str(exc.details()))
            if not (method in _OPTIONAL and exc.code() == grpc.StatusCode.UNIMPLEMENTED):
                with self._lock:
                    self._set_available(False, str(failure))
            raise failure from None

    async def answer(self, ask: Ask) -> Answer:
        """Answer one ask of the manager (one gRPC call within ``timeout_seconds``, plus the refresh of
        the cached views after an allocation). Never raises for a transport failure: the plugin is
        isolated and the answer is :class:`~numaplane.policy.asks.Unanswered`."""
        if not self.reachable:
            return Unanswered(self.last_error or "not connected")
        pod_json = pod_to_json(ask.pod)
        try:
            if isinstance(ask, AllocateAsk):
                request = pb.AllocateRequest(pod_json=pod_json, container_name=ask.container, hint=hint_to_pb(ask.hint))
                answer = await self._acall("Allocate", request)
                if answer.WhichOneof("result") == "failure":
                    reason = answer.failure.reason or "UnexpectedAdmissionError"
                    return AllocateAnswer(error=_AdmissionFailure(reason, answer.failure.message))
                allocation = allocation_from_pb(self._name, answer.allocation)
                if allocation.cpus is not None or allocation.memory or allocation.devices or allocation.extra:
                    self._allocations[(ask.pod.uid, ask.container)] = allocation
                    self._changes += 1
                    await self._refresh_after_change()
                return AllocateAnswer(allocation)
            if ask.container is None:
                if not self.options.pod_hints:
                    return HintsAnswer(None)
                hints = await self._acall("GetPodTopologyHints", pb.PodHintsRequest(pod_json=pod_json))
            else:
                hints_request = pb.HintsRequest(pod_json=pod_json, container_name=ask.container)
                hints = await self._acall("GetTopologyHints", hints_request)
            return HintsAnswer(hints_from_pb(hints))
        except PluginCallFailed as exc:
            return Unanswered(str(exc))

    async def _refresh_after_change(self) -> None:
        """The state (the checkpoint must cover every allocation) and the free amounts, after a change.

        Answers fetched while another allocation or release happened are stale and dropped (that
        change refreshes again)."""
        seen = self._changes
        with contextlib.suppress(PluginCallFailed):
            state, free = await asyncio.gather(
                self._acall("Snapshot", pb.Empty()), self._acall("GetAvailable", pb.Empty())
            )
            if self._changes == seen:
                self._state = json.loads(state.state_json) if state.state_json else {}
                self._available = amounts_from_pb(free)

    async def flush(self) -> None:
        """Send what the manager left for the plugin (config, restored state, releases) and refresh the
        cached views. Nothing is lost when the plugin does not answer: :meth:`connect` sends it later."""
        if not self.reachable:
            return
        try:
            if self._config_dirty:
                await self._acall("Reconfigure", pb.ConfigRequest(config_json=json.dumps(self.config.to_dict())))
                self._config_dirty = False
            if self._restore_dirty:
                answer = await self._acall("Restore", pb.RestoreRequest(state_json=json.dumps(self._state or {})))
                self._restore_dirty = False
                if answer.error:
                    self.mark_unavailable(f"refused the restored state: {answer.error}")
                    return
            while self.pending_releases:
                uid, name = self.pending_releases[0]
                await self._acall("Release", pb.ReleaseRequest(pod_uid=uid, container_name=name))
                self.pending_releases.pop(0)
            seen = self._changes
            allocations = await self._acall("GetAllocations", pb.Empty())
            if self._changes == seen:  # else stale: an allocation or release happened meanwhile
                self._allocations = {
                    (a.pod_uid, a.container_name): allocation_from_pb(self._name, a.allocation)
                    for a in allocations.allocations
                }
            self._allocatable = amounts_from_pb(await self._acall("GetAllocatable", pb.Empty()))
            with contextlib.suppress(PluginCallFailed):  # optional (UNIMPLEMENTED by older plugins)
                self._inventory = inventory_from_pb(await self._acall("GetInventory", pb.Empty()))
            await self._refresh_after_change()
        except PluginCallFailed:
            return

    async def check_remote(self, config: NodeResourceConfig) -> list[str]:
        """The problems the plugin sees with ``config`` (none when it does not answer: it gets the
        config when it comes back)."""
        if not self.reachable:
            return []
        try:
            answer = await self._acall("CheckConfig", pb.ConfigRequest(config_json=json.dumps(config.to_dict())))
        except PluginCallFailed:
            return []
        return [f"{self._name}: {p}" for p in answer.problems]

    async def aclose(self) -> None:
        """Close the asynchronous channels (on their loop) and the blocking one."""
        self._drop_async_channel()
        stale, self._stale = self._stale, []
        for channel in stale:
            await channel.close(None)
        self.close()

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
