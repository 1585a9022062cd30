"""Hostile sysfs snapshot archives (issue 15, item 4): nothing is written outside the destination,
even through re-pointed or ``./``-hidden symlinks; extraction is bounded in members and bytes; every
failure is a :class:`SysfsError`."""

from __future__ import annotations

import contextlib
import io
import os
import re
import tarfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numaplane.limits import (
    MAX_SNAPSHOT_BYTES,
    MAX_SNAPSHOT_LINK_DEPTH,
    MAX_SNAPSHOT_LINKS,
    MAX_SNAPSHOT_MEMBERS,
)
from numaplane.topology.errors import SysfsError
from numaplane.topology.snapshot import unpack_snapshot

Member = tuple[str, str, bytes | str | None]  # (kind, name, data or link target)


def _tar(members: list[Member], mode: str = "w:gz") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as tar:  # type: ignore[call-overload]
        for kind, name, payload in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                data = payload if isinstance(payload, bytes) else b""
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
                continue
            if kind == "dir":
                info.type = tarfile.DIRTYPE
            elif kind == "sym":
                info.type = tarfile.SYMTYPE
                info.linkname = str(payload)
            elif kind == "hard":
                info.type = tarfile.LNKTYPE
                info.linkname = str(payload)
            elif kind == "fifo":
                info.type = tarfile.FIFOTYPE
            tar.addfile(info)
    return buffer.getvalue()


OK = ("file", "m/sys/devices/system/cpu/online", b"0\n")

ESCAPES: list[list[Member]] = [
    # a symlink re-pointed after its check: first harmless, then outside
    [("sym", "m/l", "sys"), ("sym", "m/l", "../.."), ("file", "m/l/x", b"x")],
    # a leading ./ hides a path through a symlink
    [("sym", "m/l", "../.."), ("file", "./m/l/evil", b"x")],
    [("sym", "m/l", "."), ("file", "./m/l/../../evil", b"x")],
    [("sym", "m/up", ".."), ("file", "m//up/evil", b"x")],
    # a chain: each link inside when checked
    [("dir", "m/d", None), ("sym", "m/d/a", "../b"), ("sym", "m/b", "../.."), ("file", "./m/d/a/evil", b"x")],
    [("hard", "m/h", "/etc/passwd")],
    [("hard", "m/h", "m/sys/devices/system/cpu/online")],
    [("fifo", "m/f", None)],
    [("file", "/abs/evil", b"x")],
    [("sym", "m/abs", "/etc")],
]


@pytest.mark.parametrize("members", ESCAPES, ids=range(len(ESCAPES)))
def test_nothing_escapes_the_destination(tmp_path: Path, members: list[Member]) -> None:
    archive = tmp_path / "evil.tar.gz"
    archive.write_bytes(_tar([OK, *members]))
    out = tmp_path / "a" / "b" / "out"
    with pytest.raises(SysfsError, match="cannot unpack"):
        unpack_snapshot(archive, out)
    assert not (tmp_path / "a" / "evil").exists() and not (tmp_path / "a" / "b" / "evil").exists()
    assert not list(tmp_path.rglob("evil"))


def test_member_count_is_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert MAX_SNAPSHOT_MEMBERS >= 5 * 8669  # the largest real snapshot's members, with room
    monkeypatch.setattr("numaplane.topology.snapshot.MAX_SNAPSHOT_MEMBERS", 100)
    archive = tmp_path / "many.tar"
    archive.write_bytes(_tar([("dir", f"m/{i}", None) for i in range(101)], "w"))
    with pytest.raises(SysfsError, match="members"):
        unpack_snapshot(archive, tmp_path / "out")


def test_total_size_is_capped_before_writing(tmp_path: Path) -> None:
    # a small compressed archive that would unpack to more than the cap
    big = b"\0" * (MAX_SNAPSHOT_BYTES // 2 + 1)
    archive = tmp_path / "bomb.tar.gz"
    archive.write_bytes(_tar([("file", "m/a", big), ("file", "m/b", big), ("file", "m/c", big)]))
    assert archive.stat().st_size < 2 * 1024**2
    with pytest.raises(SysfsError, match="bytes"):
        unpack_snapshot(archive, tmp_path / "out")
    written = sum(p.stat().st_size for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert written <= MAX_SNAPSHOT_BYTES


_NAMES = st.lists(st.sampled_from(["m", ".", "..", "", "l", "sys", "x", "/"]), min_size=1, max_size=5).map("/".join)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["file", "dir", "sym", "hard", "fifo"]),
            _NAMES,
            st.one_of(_NAMES, st.just(b"data")),
        ),
        max_size=6,
    ),
    st.booleans(),
)
def test_fuzz_archives_only_raise_sysfs_error_and_stay_inside(
    tmp_path_factory: pytest.TempPathFactory, members: list[Member], corrupt: bool
) -> None:
    base = tmp_path_factory.mktemp("fuzz")
    data = _tar([OK, *members])
    if corrupt:
        data = data[: len(data) // 2]
    archive = base / "f.tar.gz"
    archive.write_bytes(data)
    out = base / "in" / "out"
    with contextlib.suppress(SysfsError):
        unpack_snapshot(archive, out)
    outside = [p for p in base.rglob("*") if not (p == out or out in p.parents or p.name in ("f.tar.gz", "in"))]
    assert outside == []


# ---- issue 25 item 6: symlink chains made extraction quadratic (a 29 KB archive took 29 s) ----------


def _chain(n: int, *, forward: bool = False) -> list[Member]:
    """``l1 -> l0, l2 -> l1, ...`` (each link checked after its target), or the same chain with every
    link written before the link it points to (``forward``: each target is missing when checked)."""
    links: list[Member] = [("sym", f"m/l{i}", f"l{i - 1}" if i else "sys") for i in range(n)]
    return [("dir", "m/sys", None), *(reversed(links) if forward else links)]


@pytest.mark.parametrize("forward", [False, True], ids=["backward", "forward"])
def test_a_29_kb_symlink_chain_is_refused_quickly(tmp_path: Path, forward: bool) -> None:
    archive = tmp_path / "chain.tar.gz"
    archive.write_bytes(_tar([OK, *_chain(3200, forward=forward)]))
    assert archive.stat().st_size < 32 * 1024
    started = time.perf_counter()
    with pytest.raises(SysfsError, match=f"more than {MAX_SNAPSHOT_LINK_DEPTH} symlinks"):
        unpack_snapshot(archive, tmp_path / "out")
    assert time.perf_counter() - started < 2.0  # was 12-29 s, then RecursionError


def test_a_chain_as_long_as_allowed_unpacks(tmp_path: Path) -> None:
    archive = tmp_path / "chain.tar.gz"
    archive.write_bytes(_tar([OK, *_chain(MAX_SNAPSHOT_LINK_DEPTH)]))
    root = unpack_snapshot(archive, tmp_path / "out")
    assert (root / f"l{MAX_SNAPSHOT_LINK_DEPTH - 1}").resolve() == (root / "sys").resolve()


def test_the_number_of_symlinks_is_capped(tmp_path: Path) -> None:
    archive = tmp_path / "links.tar.gz"
    links: list[Member] = [("sym", f"m/l{i}", "sys") for i in range(MAX_SNAPSHOT_LINKS + 1)]
    archive.write_bytes(_tar([OK, ("dir", "m/sys", None), *links]))
    started = time.perf_counter()
    with pytest.raises(SysfsError, match=f"more than {MAX_SNAPSHOT_LINKS} symlinks"):
        unpack_snapshot(archive, tmp_path / "out")
    assert time.perf_counter() - started < 10.0


def test_a_link_made_to_escape_by_a_later_link_is_refused(tmp_path: Path) -> None:
    """``a -> b/..`` is inside while ``b`` does not exist; ``b -> .`` (written after) makes ``a`` the
    folder above the destination. Each link passed its own check; the archive as a whole may not."""
    archive = tmp_path / "late.tar.gz"
    archive.write_bytes(_tar([("dir", "sys", None), ("sym", "a", "b/.."), ("sym", "b", ".")]))
    with pytest.raises(SysfsError, match=re.escape("a: link target b/.. leaves the destination")):
        unpack_snapshot(archive, tmp_path / "out")
    assert not (tmp_path / "out" / "a").is_symlink()  # the links of a refused archive are removed


_LINK_NAMES = st.sampled_from(["l0", "l1", "l2", "d/l3", "d/l4"])
_LINK_TARGETS = st.lists(st.sampled_from(["l0", "l1", "l2", "d", "l3", "l4", "..", ".", "sys"]), min_size=1, max_size=4)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(_LINK_NAMES, _LINK_TARGETS.map("/".join)), max_size=8))
def test_fuzz_link_graphs_resolve_inside_or_are_refused(
    tmp_path_factory: pytest.TempPathFactory, links: list[tuple[str, str]]
) -> None:
    """Any graph of links among a few names, in any order: refused with a SysfsError, or every link
    extracted resolves (on disk, by the kernel's rules) inside the destination within the depth bound."""
    base = tmp_path_factory.mktemp("links")
    archive = base / "l.tar.gz"
    archive.write_bytes(_tar([("dir", "sys", None), ("dir", "d", None), *(("sym", n, t) for n, t in links)]))
    out = base / "out"
    try:
        unpack_snapshot(archive, out)
    except SysfsError:
        assert not [p for p in out.rglob("*") if p.is_symlink()]
        return
    root = os.path.realpath(out)
    for path in out.rglob("*"):
        if path.is_symlink():
            resolved = os.path.realpath(path)
            assert os.path.commonpath([resolved, root]) == root, (path, resolved)
