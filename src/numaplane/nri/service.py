"""The NRI ``Plugin`` service: what a handler implements and how one request is served with it.

:class:`Handler` is the contract between the NRI plugin runtime (:mod:`numaplane.nri.plugin`) and the
resource logic (e.g. the node agent); :class:`BaseHandler` answers everything with an empty response.
:func:`dispatch` serves one :class:`~numaplane.nri.protocol.RequestReceived`: it decodes the request
(undecodable → INVALID_ARGUMENT), calls the handler method :data:`PLUGIN_METHODS` names, encodes the
response, answers UNIMPLEMENTED for other services and methods, and cancels a handler still running
:data:`DEADLINE_GRACE_SECONDS` past the runtime's deadline (DEADLINE_EXCEEDED). No I/O here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol, TypeVar

from google.protobuf.message import DecodeError, Message

from numaplane.nri.errors import StatusCode, StatusError
from numaplane.nri.proto import api_pb2
from numaplane.nri.protocol import RequestReceived
from numaplane.nri.transport import Reply

__all__ = [
    "ALL_EVENTS",
    "DEADLINE_GRACE_SECONDS",
    "PLUGIN_METHODS",
    "PLUGIN_SERVICE",
    "BaseHandler",
    "Handler",
    "dispatch",
    "event_mask",
    "parse_message",
]

PLUGIN_SERVICE = "nri.pkg.api.v1alpha1.Plugin"
ALL_EVENTS = 0  # ConfigureResponse.events == 0 subscribes to every event


def event_mask(*events: int) -> int:
    """The ``ConfigureResponse.events`` bits for ``events`` (``api_pb2.CREATE_CONTAINER`` …)."""
    mask = 0
    for event in events:
        if not api_pb2.UNKNOWN < event < api_pb2.LAST:
            raise ValueError(f"not a subscribable NRI event: {event}")
        mask |= 1 << (event - 1)
    return mask


class Handler(Protocol):
    """What the plugin runtime calls. Every method is a coroutine; messages are the protobuf types.

    A handler only receives the events it subscribed to in :meth:`configure` (0 = all). ``configure``
    and ``synchronize`` run again after every reconnect.
    """

    async def configure(self, request: api_pb2.ConfigureRequest) -> api_pb2.ConfigureResponse: ...

    async def synchronize(self, request: api_pb2.SynchronizeRequest) -> api_pb2.SynchronizeResponse: ...

    async def create_container(self, request: api_pb2.CreateContainerRequest) -> api_pb2.CreateContainerResponse: ...

    async def update_container(self, request: api_pb2.UpdateContainerRequest) -> api_pb2.UpdateContainerResponse: ...

    async def stop_container(self, request: api_pb2.StopContainerRequest) -> api_pb2.StopContainerResponse: ...

    async def state_change(self, event: api_pb2.StateChangeEvent) -> None: ...

    async def shutdown(self) -> None: ...


class BaseHandler:
    """A :class:`Handler` that subscribes to ``events`` and answers everything with an empty response.

    Subclass it and override what you need.
    """

    events: int = ALL_EVENTS

    async def configure(self, request: api_pb2.ConfigureRequest) -> api_pb2.ConfigureResponse:
        return api_pb2.ConfigureResponse(events=self.events)

    async def synchronize(self, request: api_pb2.SynchronizeRequest) -> api_pb2.SynchronizeResponse:
        return api_pb2.SynchronizeResponse()

    async def create_container(self, request: api_pb2.CreateContainerRequest) -> api_pb2.CreateContainerResponse:
        return api_pb2.CreateContainerResponse()

    async def update_container(self, request: api_pb2.UpdateContainerRequest) -> api_pb2.UpdateContainerResponse:
        return api_pb2.UpdateContainerResponse()

    async def stop_container(self, request: api_pb2.StopContainerRequest) -> api_pb2.StopContainerResponse:
        return api_pb2.StopContainerResponse()

    async def state_change(self, event: api_pb2.StateChangeEvent) -> None:
        return None

    async def shutdown(self) -> None:
        return None


_M = TypeVar("_M", bound=Message)


def parse_message(cls: type[_M], payload: bytes) -> _M:
    """Decode ``payload`` as ``cls``; an undecodable payload raises INVALID_ARGUMENT (:class:`StatusError`)."""
    msg = cls()
    try:
        msg.ParseFromString(payload)
    except DecodeError as exc:
        raise StatusError(StatusCode.INVALID_ARGUMENT, f"undecodable {cls.__name__}: {exc}") from None
    return msg


_EMPTY = b""


async def _configure(h: Handler, p: bytes) -> bytes:
    return (await h.configure(parse_message(api_pb2.ConfigureRequest, p))).SerializeToString()


async def _synchronize(h: Handler, p: bytes) -> bytes:
    return (await h.synchronize(parse_message(api_pb2.SynchronizeRequest, p))).SerializeToString()


async def _create(h: Handler, p: bytes) -> bytes:
    return (await h.create_container(parse_message(api_pb2.CreateContainerRequest, p))).SerializeToString()


async def _update(h: Handler, p: bytes) -> bytes:
    return (await h.update_container(parse_message(api_pb2.UpdateContainerRequest, p))).SerializeToString()


async def _stop(h: Handler, p: bytes) -> bytes:
    return (await h.stop_container(parse_message(api_pb2.StopContainerRequest, p))).SerializeToString()


async def _state_change(h: Handler, p: bytes) -> bytes:
    await h.state_change(parse_message(api_pb2.StateChangeEvent, p))
    return _EMPTY


async def _shutdown(h: Handler, p: bytes) -> bytes:
    parse_message(api_pb2.Empty, p)
    await h.shutdown()
    return _EMPTY


#: ``Plugin`` method name → coroutine decoding the request, calling the handler, encoding the response.
PLUGIN_METHODS: Mapping[str, Callable[[Handler, bytes], Awaitable[bytes]]] = {
    "Configure": _configure,
    "Synchronize": _synchronize,
    "CreateContainer": _create,
    "UpdateContainer": _update,
    "StopContainer": _stop,
    "StateChange": _state_change,
    "Shutdown": _shutdown,
}


#: How long past the runtime's deadline a handler may still run before it is cancelled.
DEADLINE_GRACE_SECONDS = 1.0


async def dispatch(
    handler: Handler, request: RequestReceived, *, deadline_grace_seconds: float = DEADLINE_GRACE_SECONDS
) -> Reply:
    """Serve one ``Plugin`` request with ``handler``.

    A handler still running ``deadline_grace_seconds`` after the runtime's deadline (``timeout_nano``) is
    cancelled and answered DEADLINE_EXCEEDED. The grace is deliberate: containerd gives up at its
    deadline by dropping the connection and creating the container *without* the adjustment; an error
    answer racing that timer could instead fail the creation, so we never answer first.
    """
    if request.service != PLUGIN_SERVICE:
        return Reply(code=StatusCode.UNIMPLEMENTED, message=f"service {request.service!r} is not served here")
    method = PLUGIN_METHODS.get(request.method)
    if method is None:
        return Reply(code=StatusCode.UNIMPLEMENTED, message=f"method {request.method!r} is not implemented")
    timeout = request.timeout_nano / 1e9 + deadline_grace_seconds if request.timeout_nano > 0 else None
    try:
        async with asyncio.timeout(timeout):
            return Reply(await method(handler, request.payload))
    except TimeoutError:
        deadline = request.timeout_nano / 1e9
        return Reply(
            code=StatusCode.DEADLINE_EXCEEDED, message=f"{request.method} exceeded the {deadline:.3f} s deadline"
        )
