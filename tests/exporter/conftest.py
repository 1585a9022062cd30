"""Fixtures of the exporter tests: synthetic sysfs, short socket folders, a PodResources server, options."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from exp_helpers import ALLOCATABLE, NODE, build_sysfs, pod

from numaplane.exporter.options import ExporterOptions
from numaplane.grpcapi.podresources.server import PodResourcesServer, StaticProvider


@pytest.fixture
def sysfs_root(tmp_path: Path) -> Path:
    return build_sysfs(tmp_path / "host")


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A short folder for unix sockets (Linux caps socket paths at 107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="npx-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def provider() -> StaticProvider:
    return StaticProvider(ALLOCATABLE, [pod("gu", cpus=(1, 2), memory_gib=1), pod("be")])


@pytest_asyncio.fixture
async def podres_server(provider: StaticProvider, short_dir: Path) -> AsyncIterator[PodResourcesServer]:
    async with PodResourcesServer(provider, short_dir / "pr.sock") as server:
        yield server


@pytest.fixture
def base_options(sysfs_root: Path, short_dir: Path) -> ExporterOptions:
    return ExporterOptions(
        node_name=NODE,
        podresources_socket=str(short_dir / "pr.sock"),
        sysfs_root=sysfs_root,
        topology_manager_policy="single-numa-node",
        topology_manager_scope="container",
    )
