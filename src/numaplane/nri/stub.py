"""The NRI stub: a handler of per-event methods over ``nri/events.py`` values, served on the ``Plugin`` service.

Shaped like containerd/nri's ``pkg/stub``: a plugin is any object implementing some of the per-event
methods below (each one a small :class:`~typing.Protocol`); the stub

* derives the subscribed events from the methods the handler has (:func:`event_mask`): a handler that
  implements only ``create_container`` subscribes to CREATE_CONTAINER and nothing else, and a handler
  that implements none is refused at construction (:class:`~numaplane.nri.errors.PluginConfigError`);
* answers Configure with that mask after calling ``configure`` (if implemented);
* collects a Synchronize split over several requests (NRI >= 0.8: every part but the last flagged
  ``more``, each answered ``more`` with no updates, or the runtime drops the plugin) and calls
  ``synchronize`` once with every pod and container;
* dispatches each ``StateChange`` to the method of its event (an event number this version does not
  know is answered empty, as the runtime expects, and reported to ``observe``);
* decodes every request and encodes every answer through ``nri/translate.py``, the one module that
  touches protobuf: handlers see frozen values and return them.

Handler methods (all coroutines; what they return goes into the answer)::

    configure(info: RuntimeInfo) -> None                 Configure (every new session)
    synchronize(pods, containers) -> Sequence[CpusetUpdate]      the runtime's complete state
    shutdown() -> None
    create_container(pod, container) -> (Adjustment, Sequence[CpusetUpdate])
    update_container(pod, container, resources) -> Sequence[CpusetUpdate]
    stop_container(pod, container) -> Sequence[CpusetUpdate]
    run_pod_sandbox / stop_pod_sandbox / remove_pod_sandbox(pod) -> None
    post_create_container / start_container / post_start_container /
        post_update_container / remove_container(pod, container) -> None

Plus, outside the event table, the optional ``observe(method, seconds, result)``: the stub reports
there what the handler never sees (Synchronize parts: ``partial``; unknown events: ``ignored``).

A handler raising :class:`~numaplane.nri.errors.StatusError` answers with that status; any other
exception answers UNKNOWN with its text (``transport.py``). :meth:`Stub.serve` cancels a handler still
running :data:`DEADLINE_GRACE_SECONDS` past the runtime's deadline (DEADLINE_EXCEEDED). No I/O here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from numaplane.nri import translate
from numaplane.nri.errors import PluginConfigError, StatusCode
from numaplane.nri.events import (
    Adjustment,
    CgroupResources,
    CpusetUpdate,
    Event,
    RuntimeContainer,
    RuntimeInfo,
    Sandbox,
)
from numaplane.nri.protocol import RequestReceived
from numaplane.nri.transport import Reply

__all__ = [
    "DEADLINE_GRACE_SECONDS",
    "EVENT_METHODS",
    "PLUGIN_SERVICE",
    "ConfigureHandler",
    "CreateContainerHandler",
    "PodEventHandler",
    "StopContainerHandler",
    "Stub",
    "SynchronizeHandler",
    "UpdateContainerHandler",
    "event_mask",
    "subscribed",
]

PLUGIN_SERVICE = "nri.pkg.api.v1alpha1.Plugin"

#: How long past the runtime's deadline a handler may still run before it is cancelled.
DEADLINE_GRACE_SECONDS = 1.0

#: Event → the handler method that receives it. Implementing the method subscribes to the event.
EVENT_METHODS: Mapping[Event, str] = {
    Event.RUN_POD_SANDBOX: "run_pod_sandbox",
    Event.STOP_POD_SANDBOX: "stop_pod_sandbox",
    Event.REMOVE_POD_SANDBOX: "remove_pod_sandbox",
    Event.CREATE_CONTAINER: "create_container",
    Event.POST_CREATE_CONTAINER: "post_create_container",
    Event.START_CONTAINER: "start_container",
    Event.POST_START_CONTAINER: "post_start_container",
    Event.UPDATE_CONTAINER: "update_container",
    Event.POST_UPDATE_CONTAINER: "post_update_container",
    Event.STOP_CONTAINER: "stop_container",
    Event.REMOVE_CONTAINER: "remove_container",
}
_POD_EVENTS = frozenset({Event.RUN_POD_SANDBOX, Event.STOP_POD_SANDBOX, Event.REMOVE_POD_SANDBOX})
#: Methods that are not events (never in the mask) but make a handler a handler.
_OTHER_METHODS = ("configure", "synchronize", "shutdown")


# -- the per-event interfaces (a handler implements any of them) -----------------------------------------


@runtime_checkable
class ConfigureHandler(Protocol):
    async def configure(self, info: RuntimeInfo) -> None: ...


@runtime_checkable
class SynchronizeHandler(Protocol):
    async def synchronize(
        self, pods: Sequence[Sandbox], containers: Sequence[RuntimeContainer]
    ) -> Sequence[CpusetUpdate]: ...


@runtime_checkable
class CreateContainerHandler(Protocol):
    async def create_container(
        self, pod: Sandbox, container: RuntimeContainer
    ) -> tuple[Adjustment, Sequence[CpusetUpdate]]: ...


@runtime_checkable
class UpdateContainerHandler(Protocol):
    async def update_container(
        self, pod: Sandbox, container: RuntimeContainer, resources: CgroupResources
    ) -> Sequence[CpusetUpdate]: ...


@runtime_checkable
class StopContainerHandler(Protocol):
    async def stop_container(self, pod: Sandbox, container: RuntimeContainer) -> Sequence[CpusetUpdate]: ...


class PodEventHandler(Protocol):
    """The shape of ``run_pod_sandbox``, ``stop_pod_sandbox`` and ``remove_pod_sandbox``."""

    async def __call__(self, pod: Sandbox) -> None: ...


class ContainerEventHandler(Protocol):
    """The shape of ``post_create_container``, ``start_container``, ``post_start_container``,
    ``post_update_container`` and ``remove_container``."""

    async def __call__(self, pod: Sandbox, container: RuntimeContainer) -> None: ...


def _implements(handler: object, method: str) -> bool:
    return callable(getattr(handler, method, None))


def subscribed(handler: object) -> frozenset[Event]:
    """The events ``handler`` receives: those whose method (:data:`EVENT_METHODS`) it implements."""
    return frozenset(event for event, method in EVENT_METHODS.items() if _implements(handler, method))


def event_mask(handler: object) -> int:
    """``ConfigureResponse.events`` for ``handler``: one bit per :func:`subscribed` event."""
    mask = 0
    for event in subscribed(handler):
        mask |= event.bit
    return mask


# -- the stub --------------------------------------------------------------------------------------------

_Serve = Callable[["Stub", bytes], Awaitable[bytes]]


@dataclass(frozen=True, slots=True)
class _Method:
    """One ``Plugin`` method: the handler method it needs (``""``: served without one) and how to serve it."""

    needs: str
    serve: _Serve


class Stub:
    """Serves the ``Plugin`` service for one handler (see the module docstring).

    ``runtime``: what the last Configure said. A Synchronize part flagged ``more`` is kept until the
    last part; a new Configure (a new session) forgets a half-received one.
    """

    def __init__(self, handler: object) -> None:
        if not subscribed(handler) and not any(_implements(handler, m) for m in _OTHER_METHODS):
            raise PluginConfigError(f"{type(handler).__name__} implements no NRI handler method")
        self.handler = handler
        self.events = event_mask(handler)
        self.runtime = RuntimeInfo()
        self._pods: list[Sandbox] = []
        self._containers: list[RuntimeContainer] = []
        self._observe: Callable[[str, float, str], None] | None = getattr(handler, "observe", None)

    def _h(self) -> Any:
        return self.handler

    async def _configure(self, payload: bytes) -> bytes:
        info = translate.configure_from_pb(payload)
        self.runtime = info
        self._pods, self._containers = [], []
        if _implements(self.handler, "configure"):
            await self._h().configure(info)
        return translate.configure_to_pb(self.events)

    async def _synchronize(self, payload: bytes) -> bytes:
        started = time.perf_counter()
        part = translate.synchronize_from_pb(payload)
        if not _implements(self.handler, "synchronize"):
            return translate.synchronize_to_pb((), more=part.more)
        if part.more:
            self._pods.extend(part.pods)
            self._containers.extend(part.containers)
            if self._observe is not None:
                self._observe("Synchronize", time.perf_counter() - started, "partial")
            return translate.synchronize_to_pb((), more=True)
        pods, containers = part.pods, part.containers
        if self._pods or self._containers:
            pods, containers = (*self._pods, *pods), (*self._containers, *containers)
            self._pods, self._containers = [], []
        updates = await self._h().synchronize(pods, containers)
        return translate.synchronize_to_pb(updates)

    async def _shutdown(self, payload: bytes) -> bytes:
        translate.empty_from_pb(payload)
        if _implements(self.handler, "shutdown"):
            await self._h().shutdown()
        return translate.EMPTY

    async def _create(self, payload: bytes) -> bytes:
        pod, container = translate.create_from_pb(payload)
        adjust, updates = await self._h().create_container(pod, container)
        return translate.create_to_pb(adjust, updates)

    async def _update(self, payload: bytes) -> bytes:
        pod, container, resources = translate.update_from_pb(payload)
        return translate.update_container_to_pb(await self._h().update_container(pod, container, resources))

    async def _stop(self, payload: bytes) -> bytes:
        pod, container = translate.stop_from_pb(payload)
        return translate.stop_to_pb(await self._h().stop_container(pod, container))

    async def _state_change(self, payload: bytes) -> bytes:
        started = time.perf_counter()
        number, pod, container = translate.state_change_from_pb(payload)
        try:
            event = Event(number)
        except ValueError:
            event = None
        method = EVENT_METHODS.get(event) if event is not None else None
        if event is None or method is None or not _implements(self.handler, method):
            # a newer runtime's event (or one not subscribed to): the runtime expects an empty
            # answer for every StateChange, never an error
            if self._observe is not None:
                name = event.name if event is not None else f"EVENT_{number}"
                self._observe(name, time.perf_counter() - started, "ignored")
            return translate.EMPTY
        call = getattr(self.handler, method)
        if event in _POD_EVENTS:
            await call(pod)
        else:
            await call(pod, container)
        return translate.EMPTY

    #: ``Plugin`` method name → what serves it.
    METHODS: Mapping[str, _Method] = {
        "Configure": _Method("", _configure),
        "Synchronize": _Method("", _synchronize),
        "Shutdown": _Method("", _shutdown),
        "CreateContainer": _Method("create_container", _create),
        "UpdateContainer": _Method("update_container", _update),
        "StopContainer": _Method("stop_container", _stop),
        "StateChange": _Method("", _state_change),
    }

    async def handle(self, method: str, payload: bytes) -> bytes:
        """The encoded answer to one ``Plugin/<method>`` request ``payload`` (no deadline; raises
        ``KeyError`` for a method not in :attr:`METHODS`). For benchmarks and tests."""
        return await self.METHODS[method].serve(self, payload)

    async def serve(self, request: RequestReceived, *, deadline_grace_seconds: float = DEADLINE_GRACE_SECONDS) -> Reply:
        """Serve one ``Plugin`` request.

        UNIMPLEMENTED for another service, an unknown method, or a request whose handler method is
        missing (the runtime sends only subscribed ones). A handler still running
        ``deadline_grace_seconds`` after the runtime's deadline (``timeout_nano``) is cancelled and
        answered DEADLINE_EXCEEDED. The grace is deliberate: containerd gives up at its deadline by
        dropping the connection and creating the container *without* the adjustment; an error answer
        racing that timer could instead fail the creation, so we never answer first.
        """
        if request.service != PLUGIN_SERVICE:
            return Reply(code=StatusCode.UNIMPLEMENTED, message=f"service {request.service!r} is not served here")
        method = self.METHODS.get(request.method)
        if method is None or (method.needs and not _implements(self.handler, method.needs)):
            return Reply(code=StatusCode.UNIMPLEMENTED, message=f"method {request.method!r} is not implemented")
        timeout = request.timeout_nano / 1e9 + deadline_grace_seconds if request.timeout_nano > 0 else None
        try:
            async with asyncio.timeout(timeout):
                return Reply(await method.serve(self, request.payload))
        except TimeoutError:
            deadline = request.timeout_nano / 1e9
            return Reply(
                code=StatusCode.DEADLINE_EXCEEDED, message=f"{request.method} exceeded the {deadline:.3f} s deadline"
            )
