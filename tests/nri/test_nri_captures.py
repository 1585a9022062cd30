"""Every frame of the real containerd 1.7.24 NRI session decodes, and re-encodes to the same message.

The capture (``wire/captures/nri/``) holds one file per ttrpc message with its raw mux frame(s);
``INDEX.md`` says what each one is. Layers checked: mux frames → ttrpc message → envelope → the
method's message type; then the envelope re-encodes byte-identically, and the NRI message satisfies
decode(encode(x)) == x (byte-identical too where protobuf serialisation is canonical: no map fields,
no fields outside our subset).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest
from google.protobuf import unknown_fields
from google.protobuf.message import Message

from numaplane.nri.errors import TruncatedStream
from numaplane.nri.plugin import RUNTIME_SERVICE
from numaplane.nri.proto import api_pb2, ttrpc_pb2
from numaplane.nri.protocol import (
    Connection,
    MessageDecoder,
    MessageType,
    MuxDecoder,
    RequestReceived,
    ResponseReceived,
    Role,
    encode_message,
)
from numaplane.nri.stub import PLUGIN_SERVICE, Stub


@dataclass(frozen=True)
class Row:
    file: str
    to_plugin: bool  # containerd → plugin
    conn: int
    stream: int
    msg_type: int
    service: str
    method: str
    content: str
    frames: tuple[int, ...]


def _rows(capture_dir: Path) -> list[Row]:
    rows = []
    for line in (capture_dir / "INDEX.md").read_text().splitlines():
        if not re.match(r"\| \d+ \|", line):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        _, file, direction, conn, stream, ttype, service, method, content, frames, _wire, _bytes = cells
        rows.append(
            Row(
                file=file.strip("`"),
                to_plugin=direction.startswith("containerd"),
                conn=int(conn),
                stream=int(stream),
                msg_type=int(ttype.split()[0]),
                service=service.strip("`"),
                method=method.strip("`"),
                content=content,
                frames=tuple(int(x) for x in frames.split("+")),
            )
        )
    return rows


@pytest.fixture(scope="module")
def capture_dir(shared_dir: Path) -> Path:
    return shared_dir / "wire" / "captures" / "nri"


@pytest.fixture(scope="module")
def rows(capture_dir: Path) -> list[Row]:
    rows = _rows(capture_dir)
    assert len(rows) == 58
    assert {r.file for r in rows} == {p.name for p in capture_dir.glob("*.bin")}
    return rows


REQUEST_TYPES: dict[str, type[Message]] = {
    "RegisterPlugin": api_pb2.RegisterPluginRequest,
    "UpdateContainers": api_pb2.UpdateContainersRequest,
    "Configure": api_pb2.ConfigureRequest,
    "Synchronize": api_pb2.SynchronizeRequest,
    "CreateContainer": api_pb2.CreateContainerRequest,
    "UpdateContainer": api_pb2.UpdateContainerRequest,
    "StopContainer": api_pb2.StopContainerRequest,
    "StateChange": api_pb2.StateChangeEvent,
    "Shutdown": api_pb2.Empty,
}
RESPONSE_TYPES: dict[str, type[Message]] = {
    "RegisterPlugin": api_pb2.Empty,
    "UpdateContainers": api_pb2.UpdateContainersResponse,
    "Configure": api_pb2.ConfigureResponse,
    "Synchronize": api_pb2.SynchronizeResponse,
    "CreateContainer": api_pb2.CreateContainerResponse,
    "UpdateContainer": api_pb2.UpdateContainerResponse,
    "StopContainer": api_pb2.StopContainerResponse,
    "StateChange": api_pb2.Empty,
    "Shutdown": api_pb2.Empty,
}


def _has_map_or_unknown(msg: Message) -> bool:
    """Whether ``msg`` has a non-empty map field or unknown fields anywhere (re-encoding may reorder)."""
    if len(unknown_fields.UnknownFieldSet(msg)):
        return True
    for fd, value in msg.ListFields():
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            if len(value):
                return True
        elif fd.message_type is not None:
            items = value if fd.is_repeated else [value]
            if any(_has_map_or_unknown(v) for v in items):
                return True
    return False


def _split_frames(data: bytes) -> list[tuple[int, bytes]]:
    """An independent, obvious mux parser to check MuxDecoder against."""
    out = []
    pos = 0
    while pos < len(data):
        conn, length = struct.unpack_from(">II", data, pos)
        out.append((conn, data[pos + 8 : pos + 8 + length]))
        pos += 8 + length
    assert pos == len(data)
    return out


def test_index_covers_every_method_served(rows: list[Row]) -> None:
    seen = {r.method for r in rows}
    assert {"RegisterPlugin", "Configure", "Synchronize", "CreateContainer", "StopContainer", "StateChange"} <= seen
    assert set(Stub.METHODS) <= set(REQUEST_TYPES)


def test_every_frame_decodes_to_the_indexed_message(rows: list[Row], capture_dir: Path) -> None:
    for row in rows:
        data = (capture_dir / row.file).read_bytes()
        frames = MuxDecoder().feed(data)
        assert frames == _split_frames(data), row.file
        assert [len(p) for _, p in frames] == list(row.frames), row.file
        assert {c for c, _ in frames} == {row.conn}, row.file
        # Feeding byte by byte yields the same frames (no dependence on read boundaries).
        dec = MuxDecoder()
        assert [f for i in range(len(data)) for f in dec.feed(data[i : i + 1])] == frames

        (msg,) = MessageDecoder().feed(b"".join(p for _, p in frames))
        assert (msg.stream_id, msg.type, msg.flags) == (row.stream, row.msg_type, 0), row.file
        assert encode_message(msg.stream_id, msg.type, msg.body, msg.flags) == b"".join(p for _, p in frames)

        if row.msg_type == MessageType.REQUEST:
            envelope = ttrpc_pb2.Request.FromString(msg.body)
            assert (envelope.service, envelope.method) == (row.service, row.method), row.file
            assert envelope.SerializeToString() == msg.body, row.file  # byte-identical
            assert 0 < envelope.timeout_nano <= 5_000_000_000
            payload = envelope.payload
            cls = REQUEST_TYPES[row.method]
        else:
            envelope_r = ttrpc_pb2.Response.FromString(msg.body)
            assert envelope_r.SerializeToString() == msg.body, row.file
            assert not envelope_r.HasField("status") and "OK" in row.content
            payload = envelope_r.payload
            cls = RESPONSE_TYPES[row.method]

        decoded = cls.FromString(payload)
        assert cls.DESCRIPTOR.name in row.content or row.method == "RegisterPlugin" or "Empty" in row.content
        reencoded = decoded.SerializeToString()
        assert cls.FromString(reencoded) == decoded, row.file
        assert len(reencoded) == len(payload), row.file  # nothing lost, unknown fields included
        if not _has_map_or_unknown(decoded):
            assert reencoded == payload, row.file


def test_decoded_content_matches_the_index(rows: list[Row], capture_dir: Path) -> None:
    def payload_of(row: Row) -> bytes:
        (msg,) = MessageDecoder().feed(b"".join(p for _, p in MuxDecoder().feed((capture_dir / row.file).read_bytes())))
        env = ttrpc_pb2.Request.FromString(msg.body) if row.msg_type == 1 else ttrpc_pb2.Response.FromString(msg.body)
        return env.payload

    by_file = {r.file: r for r in rows}
    reg = api_pb2.RegisterPluginRequest.FromString(payload_of(by_file["01-c2-s1-RegisterPlugin-request.bin"]))
    assert (reg.plugin_name, reg.plugin_idx) == ("pyprobe", "20")
    conf = api_pb2.ConfigureRequest.FromString(payload_of(by_file["03-c1-s1-Configure-request.bin"]))
    assert (conf.runtime_name, conf.runtime_version) == ("containerd", "1.7.24~ds1")
    resp = api_pb2.ConfigureResponse.FromString(payload_of(by_file["04-c1-s1-Configure-response.bin"]))
    assert resp.events == 0x67F

    sync = api_pb2.SynchronizeRequest.FromString(payload_of(by_file["05-c1-s3-Synchronize-request.bin"]))
    assert {p.name for p in sync.pods} == {"gu-ncc-false", "be-ncc-false"}
    assert sorted(c.linux.resources.cpu.cpus for c in sync.containers) == ["0", "1"]

    for row in rows:
        if row.method == "StateChange" and row.msg_type == 1:
            ev = api_pb2.StateChangeEvent.FromString(payload_of(row))
            name = api_pb2.Event.Name(ev.event)
            assert name in row.file, row.file
            assert ev.pod.name in row.file and ev.pod.namespace == "numaplane-wire"
            assert ev.HasField("container") == (not name.endswith("POD_SANDBOX")), row.file
        if row.method == "CreateContainer" and row.msg_type == 1:
            cc = api_pb2.CreateContainerRequest.FromString(payload_of(row))
            want = re.search(r"cpus = `(\d+)`", row.content)
            assert want is not None
            assert cc.container.linux.resources.cpu.cpus == want.group(1)
            assert cc.container.name == "main" and cc.pod.name in row.file
            assert cc.pod.linux.cgroup_parent.startswith("/kubepods")
            if "gu-" in row.file:  # Guaranteed, 1 CPU: shares 1024; the static CPU manager dropped the quota
                cpu = cc.container.linux.resources.cpu
                assert cpu.shares.value == 1024 and cpu.quota.value in (-1, cpu.period.value)
                assert cc.container.linux.resources.memory.limit.value == 64 * 1024 * 1024


def test_session_replays_through_both_roles(rows: list[Row], capture_dir: Path) -> None:
    """Feed containerd's bytes to a PLUGIN Connection and the plugin's to a RUNTIME one; each side's
    own calls and replies, made from the decoded envelopes, are byte-identical ttrpc messages."""
    plugin, runtime = Connection(Role.PLUGIN), Connection(Role.RUNTIME)
    for row in rows:
        data = (capture_dir / row.file).read_bytes()
        sender, receiver = (runtime, plugin) if row.to_plugin else (plugin, runtime)
        sent_msg = b"".join(p for _, p in MuxDecoder().feed(data))
        (msg,) = MessageDecoder().feed(sent_msg)
        if row.msg_type == MessageType.REQUEST:
            env = ttrpc_pb2.Request.FromString(msg.body)
            metadata = [(kv.key, kv.value) for kv in env.metadata]
            stream_id, out = sender.call(env.service, env.method, env.payload, env.timeout_nano, metadata)
            assert stream_id == row.stream
        else:
            env_r = ttrpc_pb2.Response.FromString(msg.body)
            out = sender.reply(row.stream, env_r.payload, env_r.status.code, env_r.status.message)
        assert out[8:] == sent_msg, row.file  # one frame of ours vs. the (possibly split) captured one
        (event,) = receiver.receive(data)
        if row.msg_type == MessageType.REQUEST:
            assert isinstance(event, RequestReceived)
            assert (event.service, event.method, event.stream_id) == (row.service, row.method, row.stream)
            expected_service = PLUGIN_SERVICE if row.conn == 1 else RUNTIME_SERVICE
            assert event.service == expected_service
        else:
            assert isinstance(event, ResponseReceived)
            assert event.ok and (event.method, event.stream_id) == (row.method, row.stream)
    assert not plugin.outstanding and not runtime.outstanding
    assert not plugin.serving and not runtime.serving
    plugin.receive_eof()
    runtime.receive_eof()


def test_whole_session_as_one_stream_in_odd_chunks(rows: list[Row], capture_dir: Path) -> None:
    """All of containerd's bytes as one socket stream, cut at arbitrary points, give the same calls."""
    stream = b"".join((capture_dir / r.file).read_bytes() for r in rows if r.to_plugin and r.msg_type == 1)
    want = [(r.stream, r.method) for r in rows if r.to_plugin and r.msg_type == 1]
    plugin = Connection(Role.PLUGIN)
    got = []
    for i in range(0, len(stream), 997):
        for ev in plugin.receive(stream[i : i + 997]):
            assert isinstance(ev, RequestReceived)
            got.append((ev.stream_id, ev.method))
            plugin.reply(ev.stream_id)
    assert got == want
    plugin.receive_eof()


def test_truncated_capture_raises_truncated_stream(capture_dir: Path) -> None:
    data = (capture_dir / "21-c1-s19-CreateContainer-request-gu-ncc-true.bin").read_bytes()
    for cut in (3, 8, 100, 4104, len(data) - 1):
        conn = Connection(Role.PLUGIN)
        assert conn.receive(data[:cut]) == []
        with pytest.raises(TruncatedStream):
            conn.receive_eof()
