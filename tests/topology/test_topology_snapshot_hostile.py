"""Hostile sysfs snapshot archives (issue 15, item 4): nothing is written outside the destination,
even through re-pointed or ``./``-hidden symlinks; extraction is bounded in members and bytes; every
failure is a :class:`SysfsError`."""

from __future__ import annotations

import contextlib
import io
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numaplane.limits import MAX_SNAPSHOT_BYTES, MAX_SNAPSHOT_MEMBERS
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
