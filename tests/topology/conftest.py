"""Fixtures for the topology tests: the real-machine snapshots, unpacked once per session.

The archives in ``shared/topologies/real`` are read-only; each is unpacked on first use into a
session temporary folder with tarfile's ``data`` filter (``unpack_snapshot``), then discovered once.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from numaplane.topology.model import Topology
from numaplane.topology.snapshot import unpack_snapshot
from numaplane.topology.sysfs import discover


@pytest.fixture(scope="session")
def real_dir(shared_dir: Path) -> Path:
    path = shared_dir / "topologies" / "real"
    if not path.is_dir():
        pytest.fail(f"real topology snapshots not found at {path}")
    return path


@pytest.fixture(scope="session")
def snapshot_base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Where snapshots are unpacked: a RAM-backed temporary folder when there is one.

    The 25 snapshots are about 77,000 small files; on a busy virtual disk creating them takes several
    times longer than reading them, so ``/dev/shm`` is used where it is writable.
    """
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        folder = Path(tempfile.mkdtemp(prefix="numaplane-snapshots-", dir=shm))
        try:
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    else:
        yield tmp_path_factory.mktemp("snapshots")


@pytest.fixture(scope="session")
def snapshot_root(real_dir: Path, snapshot_base: Path) -> Callable[[str], Path]:
    """``name → sysfs root`` of the unpacked snapshot ``<name>.tar.gz`` (unpacked lazily, once)."""
    roots: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in roots:
            roots[name] = unpack_snapshot(real_dir / f"{name}.tar.gz", snapshot_base / name)
        return roots[name]

    return get


@pytest.fixture(scope="session")
def discovered(snapshot_root: Callable[[str], Path]) -> Callable[[str], Topology]:
    """``name → Topology`` discovered from the snapshot in the hwloc view (once per session).

    The facts these tests check are lscpu/hwloc's; the kubelet's view is in test_kubelet_view.py.
    """
    cache: dict[str, Topology] = {}

    def get(name: str) -> Topology:
        if name not in cache:
            cache[name] = discover(snapshot_root(name), view="hwloc")
        return cache[name]

    return get
