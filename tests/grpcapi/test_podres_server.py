"""A real grpc.aio PodResources server on a short unix socket, our client against it."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

import grpc.aio
import pytest

from numaplane.grpcapi.errors import (
    PodNotFound,
    PodResourcesCallFailed,
    PodResourcesTimeout,
    PodResourcesUnavailable,
    PodResourcesUnsupported,
    ServeError,
)
from numaplane.grpcapi.podresources.client import PodResourcesClient, map_error, socket_target
from numaplane.grpcapi.podresources.server import PodResourcesServer, StaticProvider
from numaplane.nrt.podresources import (
    AllocatableResources,
    ContainerDevices,
    ContainerMemory,
    ContainerResources,
    PodResources,
)
from numaplane.nrt.state import ContainerAllocation, MemoryBlock, NodeAllocationState
from numaplane.nrt.zones import MachineView, NUMANodeView, compute_zones, zones_from_state
from numaplane.topology.cpuset import CPUSet

PODS = (
    PodResources(
        "gu",
        "ns",
        (
            ContainerResources(
                "main",
                (ContainerDevices("vendor/nic", ("n1",), (1,)),),
                (4, 5),
                (ContainerMemory("memory", 1 << 30, (1,)),),
            ),
        ),
    ),
    PodResources("be", "ns", (ContainerResources("main"),)),
)
ALLOCATABLE = AllocatableResources(
    (ContainerDevices("vendor/nic", ("n0",), (0,)), ContainerDevices("vendor/nic", ("n1",), (1,))),
    (1, 2, 3, 4, 5, 6, 7),
    (ContainerMemory("memory", 8 << 30, (0,)), ContainerMemory("memory", 8 << 30, (1,))),
)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="np-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def served(short_dir: Path) -> AsyncIterator[tuple[PodResourcesServer, StaticProvider]]:
    provider = StaticProvider(ALLOCATABLE, PODS)
    server = PodResourcesServer(provider, short_dir / "kubelet.sock")
    async with server:
        yield server, provider


async def test_round_trip(served: tuple[PodResourcesServer, StaticProvider]) -> None:
    server, provider = served
    assert server.path.is_socket() and len(str(server.path)) < 107
    async with PodResourcesClient(str(server.path), timeout_seconds=5) as client:
        await client.wait_ready(5)
        assert await client.list() == PODS
        assert await client.get_allocatable_resources() == ALLOCATABLE
        assert await client.get("ns", "gu") == PODS[0]
        with pytest.raises(PodNotFound) as info:
            await client.get("ns", "nope")
        assert info.value.details == "pod nope in namespace ns not found"
        provider.update(AllocatableResources(cpu_ids=(1,)), ())
        assert await client.list() == ()
        raw = await client.list_raw()
        assert raw.SerializeToString() == b""


async def test_exporter_path_over_the_socket(served: tuple[PodResourcesServer, StaticProvider]) -> None:
    server, _ = served
    machine = MachineView(
        (NUMANodeView(0, CPUSet.parse("0-3"), {0: 10, 1: 20}), NUMANodeView(1, CPUSet.parse("4-7"), {0: 20, 1: 10}))
    )
    async with PodResourcesClient(server.target) as client:
        zones = compute_zones("n", machine, await client.get_allocatable_resources(), await client.list())
    assert zones == compute_zones("n", machine, ALLOCATABLE, PODS)
    rows = {z.name: {r.name: (r.allocatable.value(), r.available.value()) for r in z.resources} for z in zones}
    assert rows["node-1"] == {"cpu": (4, 2), "memory": (8 << 30, 7 << 30), "vendor/nic": (1, 0)}


async def test_serving_an_allocation_state(short_dir: Path) -> None:
    state = NodeAllocationState(
        CPUSet.parse("1-3"),
        (MemoryBlock("memory", 4 << 30, (0,)),),
        containers=(ContainerAllocation("ns", "p", "c", CPUSet.parse("2"), (MemoryBlock("memory", 1 << 30, (0,)),)),),
    )
    machine = MachineView((NUMANodeView(0, CPUSet.parse("0-3"), {0: 10}, 8 << 30),))
    provider = StaticProvider.from_state(state)
    async with (
        PodResourcesServer(provider, short_dir / "a.sock") as server,
        PodResourcesClient(server.target) as client,
    ):
        zones = compute_zones("n", machine, await client.get_allocatable_resources(), await client.list())
    assert zones == zones_from_state("n", machine, state)
    assert not (short_dir / "a.sock").exists()


class _SlowProvider(StaticProvider):
    async def list_pods(self) -> Sequence[PodResources]:
        await asyncio.sleep(2)
        return ()


class _BrokenProvider(StaticProvider):
    async def allocatable_resources(self) -> AllocatableResources:
        raise RuntimeError("state lost")


async def test_errors_map_to_project_types(short_dir: Path) -> None:
    async with PodResourcesClient(str(short_dir / "missing.sock"), timeout_seconds=2) as client:
        with pytest.raises(PodResourcesUnavailable):
            await client.list()
        with pytest.raises(PodResourcesUnavailable):
            await client.wait_ready(0.2)
    slow = PodResourcesServer(_SlowProvider(), short_dir / "slow.sock")
    async with slow, PodResourcesClient(slow.target, timeout_seconds=0.3) as client:
        with pytest.raises(PodResourcesTimeout):
            await client.list()
    broken = PodResourcesServer(_BrokenProvider(), short_dir / "broken.sock")
    async with broken, PodResourcesClient(broken.target, timeout_seconds=2) as client:
        with pytest.raises(PodResourcesCallFailed) as info:
            await client.get_allocatable_resources()
        assert info.value.code == "INTERNAL"
        assert "state lost" in info.value.details


async def test_unimplemented_server(short_dir: Path) -> None:
    path = short_dir / "bare.sock"
    bare = grpc.aio.server()
    bare.add_insecure_port(f"unix://{path}")
    await bare.start()
    try:
        async with PodResourcesClient(str(path), timeout_seconds=2) as client:
            with pytest.raises(PodResourcesUnsupported):
                await client.get("ns", "p")
    finally:
        await bare.stop(None)


def test_kubelet_style_errors() -> None:
    # the kubelet's plain errors arrive as UNKNOWN
    assert isinstance(map_error("Get", grpc.StatusCode.UNKNOWN, "pod x in namespace y not found"), PodNotFound)
    assert isinstance(
        map_error("Get", grpc.StatusCode.UNKNOWN, "PodResources API Get method disabled"), PodResourcesUnsupported
    )
    assert isinstance(map_error("List", grpc.StatusCode.RESOURCE_EXHAUSTED, "too big"), PodResourcesCallFailed)


def test_targets_and_path_limit(short_dir: Path) -> None:
    assert (
        socket_target("/var/lib/kubelet/pod-resources/kubelet.sock")
        == "unix:///var/lib/kubelet/pod-resources/kubelet.sock"
    )
    assert socket_target("unix:///x.sock") == "unix:///x.sock"
    assert socket_target("rel.sock") == "unix:rel.sock"
    with pytest.raises(ServeError):
        PodResourcesServer(StaticProvider(), short_dir / ("x" * 120))


async def test_refuses_to_clobber_a_regular_file(short_dir: Path) -> None:
    path = short_dir / "file.sock"
    path.write_text("not a socket")
    with pytest.raises(ServeError):
        await PodResourcesServer(StaticProvider(), path).start()
