"""Framing decoders: bounds give typed errors, random input gives only typed errors, round trips hold."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numaplane.nri.errors import (
    BadMessage,
    FrameTooLarge,
    MessageTooLarge,
    NRIError,
    ProtocolError,
    TruncatedStream,
    UnexpectedResponse,
    UnknownConnection,
)
from numaplane.nri.proto import ttrpc_pb2
from numaplane.nri.protocol import (
    MAX_FRAME_PAYLOAD,
    MAX_MESSAGE,
    Connection,
    MessageDecoder,
    MuxDecoder,
    RequestReceived,
    ResponseReceived,
    Role,
    encode_frame,
    encode_message,
)

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def mux(conn: int, payload: bytes) -> bytes:
    return struct.pack(">II", conn, len(payload)) + payload


def ttrpc(stream: int, mtype: int, body: bytes, flags: int = 0) -> bytes:
    return struct.pack(">IIBB", len(body), stream, mtype, flags) + body


def request_body(service: str = "nri.pkg.api.v1alpha1.Plugin", method: str = "Configure") -> bytes:
    return ttrpc_pb2.Request(service=service, method=method).SerializeToString()


# ---- bounds, one by one ------------------------------------------------------------------------


def test_oversized_frame_fails_on_its_header_alone() -> None:
    with pytest.raises(FrameTooLarge) as info:
        MuxDecoder().feed(struct.pack(">II", 1, MAX_FRAME_PAYLOAD + 1))
    assert info.value.length == MAX_FRAME_PAYLOAD + 1
    # Exactly at the bound is fine (still waiting for the payload).
    assert MuxDecoder().feed(struct.pack(">II", 1, MAX_FRAME_PAYLOAD)) == []
    with pytest.raises(FrameTooLarge):
        encode_frame(1, bytes(MAX_FRAME_PAYLOAD + 1))


@pytest.mark.parametrize("conn", [0, 3, 0xFFFFFFFF])
def test_unknown_connection_ids(conn: int) -> None:
    with pytest.raises(UnknownConnection) as info:
        MuxDecoder().feed(mux(conn, b"x"))
    assert info.value.conn_id == conn
    with pytest.raises(UnknownConnection):
        encode_frame(conn, b"")


def test_oversized_message_fails_on_its_header_alone() -> None:
    with pytest.raises(MessageTooLarge):
        MessageDecoder().feed(struct.pack(">IIBB", MAX_MESSAGE + 1, 1, 1, 0))
    assert MessageDecoder().feed(struct.pack(">IIBB", MAX_MESSAGE, 1, 1, 0)) == []
    with pytest.raises(MessageTooLarge):
        encode_message(1, 1, bytes(MAX_MESSAGE + 1))
    with pytest.raises(MessageTooLarge):
        Connection(Role.PLUGIN).receive(mux(1, struct.pack(">IIBB", MAX_MESSAGE + 1, 1, 1, 0)))


@pytest.mark.parametrize("mtype", [0, 4, 255])
def test_unknown_message_type(mtype: int) -> None:
    with pytest.raises(BadMessage):
        MessageDecoder().feed(ttrpc(1, mtype, b""))


def test_stream_id_zero() -> None:
    with pytest.raises(BadMessage):
        MessageDecoder().feed(ttrpc(0, 1, b""))


@pytest.mark.parametrize("cut", [1, 7, 8, 9, 17, 18, 19])
def test_truncated_headers_and_bodies(cut: int) -> None:
    data = mux(1, ttrpc(1, 1, request_body()))
    conn = Connection(Role.PLUGIN)
    assert conn.receive(data[:cut]) == []
    with pytest.raises(TruncatedStream):
        conn.receive_eof()


def test_message_spanning_frames_and_frames_holding_several_messages() -> None:
    msg1 = ttrpc(1, 1, request_body(method="Configure"))
    msg3 = ttrpc(3, 1, request_body(method="Synchronize"))
    stream = msg1 + msg3
    data = mux(1, stream[:5]) + mux(1, stream[5:30]) + mux(1, stream[30:])
    conn = Connection(Role.PLUGIN)
    events = conn.receive(data)
    assert [(e.stream_id, e.method) for e in events if isinstance(e, RequestReceived)] == [
        (1, "Configure"),
        (3, "Synchronize"),
    ]


def test_direction_rules() -> None:
    # A request on conn 2 (the plugin is the client there).
    with pytest.raises(BadMessage):
        Connection(Role.PLUGIN).receive(mux(2, ttrpc(1, 1, request_body())))
    # A response on conn 1 (the plugin is the server there).
    with pytest.raises(BadMessage):
        Connection(Role.PLUGIN).receive(mux(1, ttrpc(1, 2, b"")))
    # A response nobody asked for.
    with pytest.raises(UnexpectedResponse):
        Connection(Role.PLUGIN).receive(mux(2, ttrpc(1, 2, b"")))
    # Even (server-initiated) stream ids for requests; streaming data.
    with pytest.raises(BadMessage):
        Connection(Role.PLUGIN).receive(mux(1, ttrpc(2, 1, request_body())))
    with pytest.raises(BadMessage):
        Connection(Role.PLUGIN).receive(mux(1, ttrpc(1, 3, b"")))
    # A stream id reused while its request is still being served.
    conn = Connection(Role.PLUGIN)
    conn.receive(mux(1, ttrpc(1, 1, request_body())))
    with pytest.raises(BadMessage):
        conn.receive(mux(1, ttrpc(1, 1, request_body())))
    # Undecodable envelopes.
    with pytest.raises(BadMessage):
        Connection(Role.PLUGIN).receive(mux(1, ttrpc(1, 1, b"\xff\xff")))


def test_calls_use_odd_increasing_stream_ids_and_late_answers_are_dropped() -> None:
    plugin = Connection(Role.PLUGIN)
    ids = [plugin.call("svc", "M", b"")[0] for _ in range(3)]
    assert ids == [1, 3, 5]
    plugin.abandon(3)
    assert plugin.outstanding == {1, 5}
    (late,) = plugin.receive(mux(2, ttrpc(3, 2, b"")))
    assert isinstance(late, ResponseReceived) and late.method == ""
    with pytest.raises(UnexpectedResponse):  # only once
        plugin.receive(mux(2, ttrpc(3, 2, b"")))


def test_error_status_round_trip() -> None:
    plugin, runtime = Connection(Role.PLUGIN), Connection(Role.RUNTIME)
    _sid, data = runtime.call("nri.pkg.api.v1alpha1.Plugin", "CreateContainer", b"\x0a\x00", 2_000_000_000)
    (req,) = plugin.receive(data)
    assert isinstance(req, RequestReceived) and req.timeout_nano == 2_000_000_000
    (resp,) = runtime.receive(plugin.reply(req.stream_id, code=9, message="no"))
    assert isinstance(resp, ResponseReceived)
    assert (resp.ok, resp.code, resp.message, resp.method) == (False, 9, "no", "CreateContainer")
    with pytest.raises(ValueError):
        plugin.reply(req.stream_id)  # already answered


def test_empty_ok_response_is_zero_bytes() -> None:
    plugin = Connection(Role.PLUGIN)
    plugin.receive(mux(1, ttrpc(7, 1, request_body())))
    assert plugin.reply(7) == mux(1, ttrpc(7, 2, b""))


# ---- fuzz --------------------------------------------------------------------------------------


@FUZZ
@given(st.binary(max_size=512), st.integers(min_value=1, max_value=64))
def test_random_bytes_give_only_typed_errors(data: bytes, chunk: int) -> None:
    for role in Role:
        conn = Connection(role)
        try:
            for i in range(0, len(data), chunk):
                conn.receive(data[i : i + chunk])
            conn.receive_eof()
        except ProtocolError:
            pass


@FUZZ
@given(
    st.lists(
        st.tuples(st.sampled_from([1, 2]), st.binary(max_size=64)),
        max_size=8,
    ),
    st.binary(max_size=64),
)
def test_random_payloads_in_valid_frames_give_only_typed_errors(frames: list[tuple[int, bytes]], tail: bytes) -> None:
    data = b"".join(mux(c, p) for c, p in frames) + tail
    with contextlib.suppress(ProtocolError):
        Connection(Role.PLUGIN).receive(data)


@FUZZ
@given(
    st.lists(st.tuples(st.integers(1, 5), st.integers(1, 3), st.binary(max_size=40)), max_size=6),
    st.data(),
)
def test_valid_ttrpc_headers_with_random_bodies(msgs: list[tuple[int, int, bytes]], data: st.DataObject) -> None:
    stream = b"".join(ttrpc(sid, t, body) for sid, t, body in msgs)
    conn = Connection(data.draw(st.sampled_from(list(Role))))
    cid = data.draw(st.sampled_from([1, 2]))
    try:
        conn.receive(mux(cid, stream))
        conn.receive_eof()
    except NRIError as exc:
        assert isinstance(exc, ProtocolError)


@FUZZ
@given(
    st.lists(st.tuples(st.sampled_from([1, 2]), st.binary(max_size=300)), max_size=10),
    st.lists(st.integers(min_value=1, max_value=200), min_size=1, max_size=20),
)
def test_mux_round_trip_under_any_chunking(frames: list[tuple[int, bytes]], cuts: list[int]) -> None:
    data = b"".join(encode_frame(c, p) for c, p in frames)
    dec = MuxDecoder()
    out: list[tuple[int, bytes]] = []
    pos = 0
    i = 0
    while pos < len(data):
        n = cuts[i % len(cuts)]
        out += dec.feed(data[pos : pos + n])
        pos += n
        i += 1
    dec.eof()
    assert out == [(c, p) for c, p in frames]


@FUZZ
@given(st.lists(st.tuples(st.integers(1, 2**32 - 1), st.sampled_from([1, 2, 3]), st.binary(max_size=200)), max_size=8))
def test_ttrpc_round_trip(msgs: list[tuple[int, int, bytes]]) -> None:
    data = b"".join(encode_message(s, t, b) for s, t, b in msgs)
    got = MessageDecoder().feed(data)
    assert [(m.stream_id, m.type, m.body) for m in got] == msgs
