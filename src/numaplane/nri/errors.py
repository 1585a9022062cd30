"""Errors of the NRI adapter (multiplexer, ttrpc, plugin runtime).

Exception tree::

    NRIError                         (base)
    ├── ProtocolError                the peer broke the wire protocol; the connection must be dropped
    │   ├── FrameTooLarge            mux frame payload length above 16 MiB
    │   ├── MessageTooLarge          ttrpc message body above 4 MiB (received, or about to be sent)
    │   ├── UnknownConnection        mux frame for a connection id other than 1 (plugin) or 2 (runtime)
    │   ├── TruncatedStream          EOF inside a mux frame or a ttrpc message
    │   ├── BadMessage               bad ttrpc type or stream id, undecodable envelope, request or
    │   │                            response on the wrong connection
    │   └── UnexpectedResponse       a response whose stream id matches no outstanding call
    ├── ConnectionClosed             the connection ended (EOF, reset) or is not open; pending calls fail
    ├── CallTimeout                  no response to our call within its deadline
    ├── StatusError                  an RPC answered with a non-OK status; ``code`` (gRPC code), ``message``.
    │   │                            A handler may raise it to choose the status it returns.
    │   └── RegistrationFailed       the runtime refused RegisterPlugin (or it timed out: code 4)
    └── PluginConfigError            invalid plugin settings (name, two-digit index, socket source)

Everything the outside world raises (``OSError`` from sockets, ``google.protobuf`` ``DecodeError``,
``asyncio.TimeoutError``) is mapped to one of these at the edge; callers of this package never need
to catch anything else.
"""

from __future__ import annotations

__all__ = [
    "BadMessage",
    "CallTimeout",
    "ConnectionClosed",
    "FrameTooLarge",
    "MessageTooLarge",
    "NRIError",
    "PluginConfigError",
    "ProtocolError",
    "RegistrationFailed",
    "StatusCode",
    "StatusError",
    "TruncatedStream",
    "UnexpectedResponse",
    "UnknownConnection",
]


class StatusCode:
    """The gRPC status codes ttrpc carries in ``Response.status.code`` (the ones this package uses)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14


class NRIError(Exception):
    """Base class of the NRI adapter's errors."""


class ProtocolError(NRIError):
    """The byte stream violates the mux / ttrpc protocol; the connection cannot continue."""


class FrameTooLarge(ProtocolError):
    """A mux frame announced a payload above the 16 MiB bound."""

    def __init__(self, length: int, limit: int) -> None:
        super().__init__(f"mux frame payload of {length} bytes exceeds the {limit}-byte limit")
        self.length = length
        self.limit = limit


class MessageTooLarge(ProtocolError):
    """A ttrpc message body is above the 4 MiB bound."""

    def __init__(self, length: int, limit: int) -> None:
        super().__init__(f"ttrpc message of {length} bytes exceeds the {limit}-byte limit")
        self.length = length
        self.limit = limit


class UnknownConnection(ProtocolError):
    """A mux frame named a connection id that is not in use (only 1 and 2 are)."""

    def __init__(self, conn_id: int) -> None:
        super().__init__(f"mux frame for unknown connection id {conn_id}")
        self.conn_id = conn_id


class TruncatedStream(ProtocolError):
    """The stream ended inside a frame or message header or body."""


class BadMessage(ProtocolError):
    """A structurally invalid ttrpc message (type, stream id, envelope encoding, direction)."""


class UnexpectedResponse(ProtocolError):
    """A response arrived for a stream id with no call outstanding."""

    def __init__(self, stream_id: int) -> None:
        super().__init__(f"response for stream {stream_id}, which has no call outstanding")
        self.stream_id = stream_id


class ConnectionClosed(NRIError):
    """The connection to the runtime is closed (or was never open)."""


class CallTimeout(NRIError):
    """Our call got no response within its deadline."""


class StatusError(NRIError):
    """An RPC failed with status ``code`` (a gRPC code, never 0) and ``message``.

    Raised to callers when the peer answers with an error status; raised by a handler to make the
    plugin answer with that status (any other exception from a handler answers ``UNKNOWN``).
    """

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"status {code}: {message}" if message else f"status {code}")
        self.code = code
        self.message = message


class RegistrationFailed(StatusError):
    """``Runtime.RegisterPlugin`` was refused or timed out."""


class PluginConfigError(NRIError, ValueError):
    """Invalid plugin settings (empty name, index not two digits, bad ``NRI_PLUGIN_SOCKET``)."""
