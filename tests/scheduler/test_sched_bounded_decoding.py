"""Extender request decoding bounds the structure before building it (issue 25, items 1 and 7).

A body under the size limit that expands into millions of Python objects (a gzip of ``[{}, {}, ...]``
inside the Pod, a top-level list, 2 M ``Nodes.items``, 8 M ``NodeNames``, a million top-level keys)
is refused having built nothing proportional to it: each test measures the Python memory the parse
takes (tracemalloc) against what the old decoding took (hundreds of MiB). A body whose
``Content-Encoding: gzip`` is false is a 400 with one log line, never a 500 with a traceback.
The shape scanner is fuzzed against a reference walk, and the parser with mutations of the real
kube-scheduler captures.
"""

from __future__ import annotations

import gzip
import json
import random
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sched_helpers import captures
from test_sched_hardening import post, server, started  # noqa: F401  (server is a fixture)

from numaplane.jsonshape import measure
from numaplane.limits import MAX_EXTENDER_DECODED_BYTES, MAX_EXTENDER_NODES
from numaplane.scheduler.errors import ExtenderRequestError
from numaplane.scheduler.wire import SMALL_BODY_BYTES, decode_body, parse_binding_args, parse_extender_args
from numaplane.testing.fakeapi import FakeApiServer

MIB = 1 << 20
_POD = b'{"metadata": {"name": "p", "namespace": "ns"}}'


def _peak_bytes(work: Callable[[], Any]) -> tuple[int, BaseException | None]:
    """Peak Python memory ``work`` allocates (its arguments already built), and what it raised."""
    tracemalloc.start()
    raised: BaseException | None = None
    try:
        work()
    except ExtenderRequestError as exc:
        raised = exc
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak, raised


def _parse(body: bytes) -> Callable[[], Any]:
    return lambda: parse_extender_args(decode_body(body))


def _repeat(head: bytes, item: bytes, tail: bytes, size: int) -> bytes:
    count = (size - len(head) - len(tail)) // (len(item) + 1)
    return head + b",".join([item] * count) + tail


HOSTILE = {
    # the 49 KB gzip: a Pod with one member holding ~16 M empty objects
    "pod-member-of-empty-objects": (
        _repeat(b'{"Pod": {"metadata": {"name": "p"}, "x": [', b"{}", b']}, "NodeNames": ["n"]}', 40 * MIB),
        "Pod is larger than",
    ),
    "pod-under-its-byte-limit-of-empty-objects": (
        _repeat(b'{"Pod": {"metadata": {"name": "p"}, "x": [', b"{}", b']}, "NodeNames": ["n"]}', 3 * MIB - 64),
        "Pod has more than 50000 objects and arrays",
    ),
    "top-level-list": (_repeat(b"[", b"{}", b"]", 40 * MIB), "the request body must be a JSON object"),
    "nodes-items-of-empty-objects": (
        _repeat(b'{"Pod": ' + _POD + b', "Nodes": {"items": [', b"{}", b"]}}", 40 * MIB),
        f"more than {MAX_EXTENDER_NODES} nodes",
    ),
    "node-names": (
        _repeat(b'{"Pod": ' + _POD + b', "NodeNames": [', b'"a"', b"]}", 40 * MIB),
        f"more than {MAX_EXTENDER_NODES} nodes",
    ),
    "top-level-keys": (
        b'{"Pod": ' + _POD + b", " + b", ".join(b'"k%d": 0' % i for i in range(2_000_000)) + b"}",
        "the request body has more than 64 members",
    ),
    "nodelist-keys": (
        b'{"Pod": ' + _POD + b', "Nodes": {' + b", ".join(b'"k%d": 0' % i for i in range(2_000_000)) + b"}}",
        "Nodes has more than 64 members",
    ),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_body_is_refused_before_it_is_built(name: str) -> None:
    body, reason = HOSTILE[name]
    assert len(body) <= MAX_EXTENDER_DECODED_BYTES
    peak, raised = _peak_bytes(_parse(body))
    assert isinstance(raised, ExtenderRequestError) and reason in raised.reason, raised
    # the old decoding built ~1 object per 2-3 bytes: hundreds of MiB for these bodies
    assert peak < 16 * MIB, f"{name}: {peak / MIB:.1f} MiB"


def test_the_pod_is_bounded_by_bytes_before_it_is_decoded() -> None:
    pod = json.dumps({"metadata": {"name": "p"}, "x": ["a" * 1000] * 4000}).encode()
    with pytest.raises(ExtenderRequestError, match="Pod is larger than 3145728 bytes"):
        parse_extender_args(decode_body(b'{"Pod": ' + pod + b', "NodeNames": ["n"]}'))


def test_bind_fields_are_bounded_too() -> None:
    body = _repeat(b'{"PodName": [', b"{}", b'], "Node": "n"}', 3 * MIB - 64)
    peak, raised = _peak_bytes(lambda: parse_binding_args(decode_body(body)))
    assert isinstance(raised, ExtenderRequestError) and "PodName has more than" in raised.reason
    assert peak < 16 * MIB


def test_real_bodies_still_decode_within_the_bounds(shared_dir: Path) -> None:
    for path in sorted(captures(shared_dir).glob("nodecachecapable-*.json")):
        body = path.read_bytes()
        if ".bind." in path.name:
            assert parse_binding_args(decode_body(body)).node == "rig-node"
        else:
            args = parse_extender_args(decode_body(body))
            assert args.names == ["numaplane-fake-node", "rig-node"], path.name


# --- the shape scanner, against a walk of the decoded value -------------------------------------------


def _reference(value: Any) -> tuple[int, int]:
    if isinstance(value, dict | list):
        children = [_reference(c) for c in (value.values() if isinstance(value, dict) else value)]
        return 1 + max((d for d, _ in children), default=0), 1 + sum(n for _, n in children)
    return 0, 0


_TEXT = st.text(alphabet=st.sampled_from(list('ab"\\[]{},: \n\u00e9')), max_size=12)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _TEXT,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_TEXT, inner, max_size=5),
    max_leaves=40,
)


@settings(max_examples=400, deadline=None)
@given(_JSON, st.integers(min_value=1, max_value=64), st.booleans())
def test_measure_matches_a_walk_of_the_value(value: Any, chunk: int, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only, indent=None if chunk % 2 else 1).encode()
    shape = measure(text, chunk_bytes=chunk)
    depth, containers = _reference(value)
    members = len(value) if isinstance(value, dict | list) else 0
    assert (shape.depth, shape.containers, shape.members) == (depth, containers, members), text


@settings(max_examples=300, deadline=None)
@given(_JSON, st.integers(min_value=1, max_value=64), st.integers(min_value=0, max_value=6))
def test_measure_with_a_member_bound_answers_the_same_question(value: Any, chunk: int, bound: int) -> None:
    """``max_members`` may stop the scan early, never change the answer to "more than ``bound``?"."""
    text = json.dumps(value).encode()
    members = len(value) if isinstance(value, dict | list) else 0
    shape = measure(text, chunk_bytes=chunk, max_members=bound)
    assert (shape.members > bound) == (members > bound), text
    if members <= bound:
        assert shape == measure(text, chunk_bytes=chunk)


def test_a_list_far_over_its_bound_is_refused_after_a_few_chunks() -> None:
    """Issue 25 item 1 bench: ``Nodes.items`` of 16 M empty objects was scanned in full (2-3 s of
    numpy in the decoding thread) to learn it had more than 15,000 entries."""
    text = b"[" + b"{}," * 16_000_000 + b"{}]"
    began = time.process_time()
    shape = measure(text, max_members=15_000)
    assert shape.members > 15_000
    assert time.process_time() - began < 0.2


# --- mutation of the real captures: a 400 with a reason, never another exception ----------------------


def _capture_bodies(shared: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted(captures(shared).glob("nodecachecapable-*.json"))]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_captures_are_parsed_or_refused_with_a_reason(shared_dir: Path, data: st.DataObject) -> None:
    bodies = _capture_bodies(shared_dir)
    body = bytearray(data.draw(st.sampled_from(bodies)))
    rng = random.Random(data.draw(st.integers(0, 2**32 - 1)))
    for _ in range(data.draw(st.integers(1, 8))):
        at = rng.randrange(len(body))
        op = rng.randrange(4)
        if op == 0:
            body[at] = rng.choice(b'{}[]",:\\0123456789 abnulltrue')
        elif op == 1:
            del body[at : at + rng.randrange(1, 16)]
        elif op == 2:
            body[at:at] = rng.choice([b"[" * 70, b'{"x":' * 5, b"1e999", b"\\u0000", b'"' * 3, b"," * 2])
        else:
            j = rng.randrange(len(body))
            body[at:at] = body[j : j + rng.randrange(1, 200)]
    parse = parse_binding_args if b'"PodName"' in body[:200] else parse_extender_args
    try:
        parse(decode_body(bytes(body)))
    except ExtenderRequestError as exc:
        assert exc.reason


# --- over HTTP: false gzip; other requests are served while a hostile body is decoded ------------------


async def test_a_false_gzip_body_is_a_400_with_one_log_line(
    server: FakeApiServer,  # noqa: F811
    shared_dir: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    service = await started(server, shared_dir)
    try:
        port = service.ports["extender"]
        capsys.readouterr()
        caplog.clear()
        for _ in range(20):
            status, reply = await post(port, "filter", b'{"Pod": {}}' * 50, {"Content-Encoding": "gzip"})
            assert status == 400 and "not valid 'gzip' content" in reply["Error"], (status, reply)
        good = gzip.compress(b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": []}')
        status, _reply = await post(port, "filter", good, {"Content-Encoding": "gzip"})
        assert status == 200
    finally:
        await service.close()
    # structlog prints to stdout until a component configures logging (then through stdlib logging,
    # which caplog sees): whichever ran first in this process, both places are read
    logged = capsys.readouterr()
    text = logged.out + logged.err + "\n".join(str(r.msg) for r in caplog.records)
    tracebacks = [r.getMessage() for r in caplog.records if r.exc_info]
    assert "Traceback" not in text and not tracebacks, (tracebacks, text[-2000:])
    assert text.count("bad extender request") == 20, text[-2000:]


@pytest.mark.parametrize("members", [64, 65, 3_000])
def test_a_small_body_is_counted_once_decoded_with_the_scans_answer(members: int) -> None:
    """Under SMALL_BODY_BYTES the members are counted after decoding (no scan): the same refusal as
    the scan's for distinct keys, and what is built stays small however many there are."""
    body = b'{"Pod": ' + _POD + b"".join(b', "k%d": 0' % i for i in range(members - 1)) + b"}"
    assert len(body) <= SMALL_BODY_BYTES
    assert (measure(body).members > 64) == (members > 64)
    peak, raised = _peak_bytes(lambda: decode_body(body))
    if members <= 64:
        assert raised is None
    else:
        assert isinstance(raised, ExtenderRequestError) and "the request body has more than 64 members" in raised.reason
    assert peak < 1 * MIB
