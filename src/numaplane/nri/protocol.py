"""The NRI wire protocol: the connection multiplexer and ttrpc framing, sans-I/O.

Layers, outermost first (all integers big-endian):

1. **Mux frame** — ``u32 conn_id | u32 payload_len | payload``; ``payload_len <= MAX_FRAME_PAYLOAD``
   (16 MiB). ``conn_id`` 1 carries the ``Plugin`` service (the runtime calls, the plugin serves);
   ``conn_id`` 2 carries the ``Runtime`` service (the plugin calls). Each connection is a byte stream:
   a ttrpc message may span frames (containerd splits at 4096 bytes) and a frame may hold several.
2. **ttrpc message** — ``u32 length | u32 stream_id | u8 type | u8 flags | body``; ``length`` counts the
   body only and is at most ``MAX_MESSAGE`` (4 MiB). type 1 = request, 2 = response (3 = stream data,
   which NRI never uses and we reject). A caller numbers its calls with odd, increasing stream ids; a
   response reuses its request's stream id.
3. **Envelope** — a request body is ``ttrpc.Request{service, method, payload, timeout_nano, metadata}``, a
   response body is ``ttrpc.Response{status, payload}`` (status absent or code 0 = success).

:class:`Connection` holds the whole per-socket state — both directions of both logical connections — as
a pure state machine: :meth:`Connection.receive` turns bytes into :class:`RequestReceived` and
:class:`ResponseReceived` events, :meth:`Connection.call` and :meth:`Connection.reply` return the bytes
to write. The same class plays either side (``Role.PLUGIN`` or ``Role.RUNTIME``), which is what the
tests' fake runtime uses. :class:`~numaplane.nri.transport.AsyncConnection` drives it over an asyncio stream.

Every violation of the bounds above raises a :class:`~numaplane.nri.errors.ProtocolError` subclass;
after one, the connection is unusable and must be dropped.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import ClassVar, Generic, TypeVar

from google.protobuf.message import DecodeError

from numaplane.nri.errors import (
    BadMessage,
    FrameTooLarge,
    MessageTooLarge,
    StatusCode,
    TruncatedStream,
    UnexpectedResponse,
    UnknownConnection,
)
from numaplane.nri.proto import ttrpc_pb2

__all__ = [
    "MAX_FRAME_PAYLOAD",
    "MAX_MESSAGE",
    "PLUGIN_CONN",
    "RUNTIME_CONN",
    "CallEvent",
    "Connection",
    "FrameReader",
    "MessageDecoder",
    "MessageType",
    "MuxDecoder",
    "RequestReceived",
    "ResponseReceived",
    "Role",
    "TtrpcMessage",
    "encode_frame",
    "encode_message",
]

MAX_FRAME_PAYLOAD = 16 * 1024 * 1024
MAX_MESSAGE = 4 * 1024 * 1024
PLUGIN_CONN = 1
RUNTIME_CONN = 2
_KNOWN_CONNS = frozenset({PLUGIN_CONN, RUNTIME_CONN})

T = TypeVar("T")

_MUX_HEADER = struct.Struct(">II")
_TTRPC_HEADER = struct.Struct(">IIBB")
MUX_HEADER_SIZE = _MUX_HEADER.size  # 8
TTRPC_HEADER_SIZE = _TTRPC_HEADER.size  # 10


class MessageType(enum.IntEnum):
    REQUEST = 1
    RESPONSE = 2
    DATA = 3


class Role(enum.Enum):
    """Which end of the NRI socket a :class:`Connection` plays."""

    PLUGIN = "plugin"  # serves conn 1, calls on conn 2
    RUNTIME = "runtime"  # serves conn 2, calls on conn 1

    @property
    def serve_conn(self) -> int:
        return PLUGIN_CONN if self is Role.PLUGIN else RUNTIME_CONN

    @property
    def call_conn(self) -> int:
        return RUNTIME_CONN if self is Role.PLUGIN else PLUGIN_CONN


# ---- layer 1: mux frames -------------------------------------------------------------------------


def encode_frame(conn_id: int, payload: bytes) -> bytes:
    """One mux frame. Raises :class:`FrameTooLarge` above 16 MiB, :class:`UnknownConnection` for ids ∉ {1, 2}."""
    if conn_id not in _KNOWN_CONNS:
        raise UnknownConnection(conn_id)
    if len(payload) > MAX_FRAME_PAYLOAD:
        raise FrameTooLarge(len(payload), MAX_FRAME_PAYLOAD)
    return _MUX_HEADER.pack(conn_id, len(payload)) + payload


class FrameReader(Generic[T]):
    """Incremental reader of length-prefixed frames: a fixed ``header`` (a :class:`struct.Struct`)
    whose fields name the payload's length, then that many payload bytes. The one frame reader of
    both layers: :class:`MuxDecoder` and :class:`MessageDecoder` say what the header holds.

    Invariants: :meth:`_length` checks a header as soon as its bytes are in, before any of the
    payload arrives (a bad header raises at once, whatever follows), and once per frame (a frame fed
    in pieces is not re-checked); frames come out in order, each exactly once; bytes of an incomplete
    frame stay buffered (:attr:`buffered`) until the next feed.
    """

    __slots__ = ("_buf", "_check", "_fields", "_make", "_pending", "_size", "_unpack")

    _header: ClassVar[struct.Struct]
    _what: ClassVar[str]  # "a mux frame", for the EOF error

    def __init__(self) -> None:
        self._buf = bytearray()
        # The checked header at the buffer's start: its fields and payload length (-1: none checked yet).
        self._fields: tuple[int, ...] = ()
        self._pending = -1
        # Bound once: feed() is on the NRI hot path (bench/nri_framing.py).
        self._size = self._header.size
        self._unpack = self._header.unpack_from
        self._check = self._length
        self._make = self._frame

    def _length(self, fields: tuple[int, ...]) -> int:
        """The payload length (bytes) the header ``fields`` announce; raises if the header is bad."""
        raise NotImplementedError

    def _frame(self, fields: tuple[int, ...], payload: bytes) -> T:
        raise NotImplementedError

    def feed(self, data: bytes) -> list[T]:
        """Append ``data``; return every complete frame."""
        buf = self._buf
        buf += data
        out: list[T] = []
        size = self._size
        end = len(buf)
        length = self._pending
        if length < 0 and end < size:
            return out
        fields = self._fields
        unpack, check, frame = self._unpack, self._check, self._make
        pos = 0
        while True:
            if length < 0:
                if end - pos < size:
                    break
                fields = unpack(buf, pos)
                length = check(fields)
            start = pos + size
            if end - start < length:
                break
            out.append(frame(fields, bytes(buf[start : start + length])))
            pos = start + length
            length = -1
        self._fields, self._pending = fields, length
        if pos:
            del buf[:pos]
        return out

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def eof(self) -> None:
        """The stream ended: fine between frames, :class:`TruncatedStream` inside one."""
        if self._buf:
            raise TruncatedStream(f"EOF inside {self._what} ({len(self._buf)} bytes buffered)")


class MuxDecoder(FrameReader[tuple[int, bytes]]):
    """Incremental mux frame parser, frames as ``(conn_id, payload)``. Header checks happen as soon
    as 8 bytes are in, before the payload."""

    __slots__ = ("_known", "_max")
    _header = _MUX_HEADER
    _what = "a mux frame"

    def __init__(self, known_conn_ids: Iterable[int] = _KNOWN_CONNS, max_payload: int = MAX_FRAME_PAYLOAD) -> None:
        super().__init__()
        self._known = frozenset(known_conn_ids)
        self._max = max_payload

    def _length(self, fields: tuple[int, ...]) -> int:
        conn_id, length = fields
        if conn_id not in self._known:
            raise UnknownConnection(conn_id)
        if length > self._max:
            raise FrameTooLarge(length, self._max)
        return length

    def _frame(self, fields: tuple[int, ...], payload: bytes) -> tuple[int, bytes]:
        return fields[0], payload


# ---- layer 2: ttrpc messages ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TtrpcMessage:
    stream_id: int
    type: int
    flags: int
    body: bytes


def encode_message(stream_id: int, msg_type: int, body: bytes, flags: int = 0) -> bytes:
    """One ttrpc message (header + body). Raises :class:`MessageTooLarge` above 4 MiB."""
    if len(body) > MAX_MESSAGE:
        raise MessageTooLarge(len(body), MAX_MESSAGE)
    return _TTRPC_HEADER.pack(len(body), stream_id, msg_type, flags) + body


class MessageDecoder(FrameReader[TtrpcMessage]):
    """Incremental ttrpc message parser for one logical connection's byte stream."""

    __slots__ = ("_max",)
    _header = _TTRPC_HEADER
    _what = "a ttrpc message"

    def __init__(self, max_message: int = MAX_MESSAGE) -> None:
        super().__init__()
        self._max = max_message

    def _length(self, fields: tuple[int, ...]) -> int:
        length, stream_id, msg_type, _flags = fields
        if length > self._max:
            raise MessageTooLarge(length, self._max)
        if msg_type not in (MessageType.REQUEST, MessageType.RESPONSE, MessageType.DATA):
            raise BadMessage(f"unknown ttrpc message type {msg_type} (stream {stream_id})")
        if stream_id == 0:
            raise BadMessage("ttrpc stream id 0 is not valid")
        return length

    def _frame(self, fields: tuple[int, ...], payload: bytes) -> TtrpcMessage:
        _length, stream_id, msg_type, flags = fields
        return TtrpcMessage(stream_id, msg_type, flags, payload)


# ---- layer 3: calls ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RequestReceived:
    """The peer called us. Answer with :meth:`Connection.reply` using ``stream_id``."""

    stream_id: int
    service: str
    method: str
    payload: bytes
    timeout_nano: int = 0
    metadata: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class ResponseReceived:
    """The peer answered our call ``stream_id`` (to ``service``/``method``)."""

    stream_id: int
    service: str
    method: str
    code: int
    message: str
    payload: bytes

    @property
    def ok(self) -> bool:
        return self.code == StatusCode.OK


CallEvent = RequestReceived | ResponseReceived


@dataclass(slots=True)
class _Outstanding:
    service: str
    method: str


@dataclass
class Connection:
    """Sans-I/O state of one NRI socket (both logical connections), seen from ``role``."""

    role: Role = Role.PLUGIN
    _mux: MuxDecoder = field(default_factory=MuxDecoder, init=False, repr=False)
    _streams: dict[int, MessageDecoder] = field(init=False, repr=False)
    _next_stream_id: int = field(default=1, init=False)
    _outstanding: dict[int, _Outstanding] = field(default_factory=dict, init=False, repr=False)
    _abandoned: set[int] = field(default_factory=set, init=False, repr=False)
    _serving: set[int] = field(default_factory=set, init=False, repr=False)

    def __post_init__(self) -> None:
        self._streams = {PLUGIN_CONN: MessageDecoder(), RUNTIME_CONN: MessageDecoder()}

    # -- receiving

    def receive(self, data: bytes) -> list[CallEvent]:
        """Feed bytes read from the socket; return the calls and answers they complete, in order."""
        events: list[CallEvent] = []
        for conn_id, payload in self._mux.feed(data):
            for msg in self._streams[conn_id].feed(payload):
                events.append(self._on_message(conn_id, msg))
        return events

    def receive_eof(self) -> None:
        """The peer closed. Raises :class:`TruncatedStream` if it did so mid-frame or mid-message."""
        self._mux.eof()
        for decoder in self._streams.values():
            decoder.eof()

    def _on_message(self, conn_id: int, msg: TtrpcMessage) -> CallEvent:
        if msg.type == MessageType.REQUEST:
            if conn_id != self.role.serve_conn:
                raise BadMessage(f"request on connection {conn_id}, where this side is the client")
            if msg.stream_id % 2 != 1:
                raise BadMessage(f"request with even stream id {msg.stream_id}")
            if msg.stream_id in self._serving:
                raise BadMessage(f"request reuses stream id {msg.stream_id}, which is still being served")
            req = ttrpc_pb2.Request()
            try:
                req.ParseFromString(msg.body)
            except DecodeError as exc:
                raise BadMessage(f"undecodable ttrpc request on stream {msg.stream_id}: {exc}") from None
            self._serving.add(msg.stream_id)
            return RequestReceived(
                msg.stream_id,
                req.service,
                req.method,
                req.payload,
                req.timeout_nano,
                tuple((kv.key, kv.value) for kv in req.metadata),
            )
        if msg.type == MessageType.RESPONSE:
            if conn_id != self.role.call_conn:
                raise BadMessage(f"response on connection {conn_id}, where this side is the server")
            call = self._outstanding.pop(msg.stream_id, None)
            if call is None:
                if msg.stream_id in self._abandoned:
                    self._abandoned.discard(msg.stream_id)
                    call = _Outstanding("", "")  # a late answer to a call we gave up on
                else:
                    raise UnexpectedResponse(msg.stream_id)
            resp = ttrpc_pb2.Response()
            try:
                resp.ParseFromString(msg.body)
            except DecodeError as exc:
                raise BadMessage(f"undecodable ttrpc response on stream {msg.stream_id}: {exc}") from None
            return ResponseReceived(
                msg.stream_id, call.service, call.method, resp.status.code, resp.status.message, resp.payload
            )
        raise BadMessage(f"ttrpc stream data (type 3) on stream {msg.stream_id}: NRI uses unary calls only")

    # -- sending

    def call(
        self,
        service: str,
        method: str,
        payload: bytes,
        timeout_nano: int = 0,
        metadata: Iterable[tuple[str, str]] = (),
    ) -> tuple[int, bytes]:
        """Start a call; return its stream id and the bytes to write."""
        stream_id = self._next_stream_id
        req = ttrpc_pb2.Request(service=service, method=method, payload=payload, timeout_nano=timeout_nano)
        for key, value in metadata:
            req.metadata.add(key=key, value=value)
        data = encode_frame(
            self.role.call_conn, encode_message(stream_id, MessageType.REQUEST, req.SerializeToString())
        )
        self._next_stream_id += 2
        self._outstanding[stream_id] = _Outstanding(service, method)
        return stream_id, data

    def reply(self, stream_id: int, payload: bytes = b"", code: int = StatusCode.OK, message: str = "") -> bytes:
        """Answer the request ``stream_id``; return the bytes to write. Success with no payload is 0 bytes."""
        if stream_id not in self._serving:
            raise ValueError(f"no request on stream {stream_id} is waiting for a reply")
        resp = ttrpc_pb2.Response(payload=payload)
        if code != StatusCode.OK:
            resp.status.code = code
            resp.status.message = message
        body = resp.SerializeToString()
        data = encode_frame(self.role.serve_conn, encode_message(stream_id, MessageType.RESPONSE, body))
        self._serving.discard(stream_id)
        return data

    def abandon(self, stream_id: int) -> None:
        """Stop waiting for call ``stream_id`` (timed out); a late answer is then dropped quietly."""
        if self._outstanding.pop(stream_id, None) is not None:
            self._abandoned.add(stream_id)

    @property
    def outstanding(self) -> frozenset[int]:
        """Stream ids of our calls still waiting for an answer."""
        return frozenset(self._outstanding)

    @property
    def serving(self) -> frozenset[int]:
        """Stream ids of the peer's calls we have not answered yet."""
        return frozenset(self._serving)
