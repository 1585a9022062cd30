"""Shared helpers of the exporter tests: a small synthetic sysfs tree, PodResources values, waiting."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jsonschema

from numaplane.nrt.crd import validation_schema
from numaplane.nrt.podresources import (
    AllocatableResources,
    ContainerDevices,
    ContainerMemory,
    ContainerResources,
    PodResources,
)

GiB = 1 << 30
NODE = "worker-1"
_VALIDATOR = jsonschema.Draft202012Validator(validation_schema("v1alpha2"))


def build_sysfs(root: Path, *, nodes: int = 2, cpus_per_node: int = 4, mem_gib: int = 8) -> Path:
    """A minimal sysfs tree under ``root``: ``nodes`` NUMA nodes, one socket each, no SMT."""
    cpu_dir = root / "sys/devices/system/cpu"
    node_dir = root / "sys/devices/system/node"
    total = nodes * cpus_per_node
    cpu_dir.mkdir(parents=True)
    (cpu_dir / "online").write_text(f"0-{total - 1}\n")
    (cpu_dir / "possible").write_text(f"0-{total - 1}\n")
    for cpu in range(total):
        node = cpu // cpus_per_node
        topo = cpu_dir / f"cpu{cpu}/topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text(f"{node}\n")
        (topo / "core_id").write_text(f"{cpu}\n")
        (topo / "thread_siblings_list").write_text(f"{cpu}\n")
        first = node * cpus_per_node
        (topo / "core_siblings_list").write_text(f"{first}-{first + cpus_per_node - 1}\n")
    node_dir.mkdir(parents=True)
    (node_dir / "online").write_text(f"0-{nodes - 1}\n")
    (node_dir / "possible").write_text(f"0-{nodes - 1}\n")
    for node in range(nodes):
        base = node_dir / f"node{node}"
        base.mkdir()
        first = node * cpus_per_node
        (base / "cpulist").write_text(f"{first}-{first + cpus_per_node - 1}\n")
        (base / "distance").write_text(" ".join("10" if j == node else "21" for j in range(nodes)) + "\n")
        kib = mem_gib * 1024 * 1024
        (base / "meminfo").write_text(f"Node {node} MemTotal:  {kib} kB\nNode {node} MemFree:  {kib // 2} kB\n")
        pages = base / "hugepages/hugepages-2048kB"
        pages.mkdir(parents=True)
        (pages / "nr_hugepages").write_text("16\n")
        (pages / "free_hugepages").write_text("16\n")
    return root


#: CPUs 0 and 4 reserved; 4 GiB of memory per node allocatable; one NIC per node.
ALLOCATABLE = AllocatableResources(
    devices=(ContainerDevices("vendor/nic", ("n0",), (0,)), ContainerDevices("vendor/nic", ("n1",), (1,))),
    cpu_ids=(1, 2, 3, 5, 6, 7),
    memory=(ContainerMemory("memory", 4 * GiB, (0,)), ContainerMemory("memory", 4 * GiB, (1,))),
)


def pod(
    name: str,
    namespace: str = "default",
    cpus: Sequence[int] = (),
    memory_gib: int = 0,
    numa: int = 0,
    nic: str | None = None,
) -> PodResources:
    """A one-container pod with exclusive CPUs, memory on ``numa`` and maybe a NIC."""
    memory = (ContainerMemory("memory", memory_gib * GiB, (numa,)),) if memory_gib else ()
    devices = (ContainerDevices("vendor/nic", (nic,), (int(nic[1:]),)),) if nic else ()
    return PodResources(name, namespace, (ContainerResources("main", devices, tuple(cpus), memory),))


def assert_valid(obj: Mapping[str, Any]) -> None:
    """Fail with the first schema error if ``obj`` is not a valid v1alpha2 NodeResourceTopology."""
    error = jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(obj))
    assert error is None, f"{list(error.absolute_path)}: {error.message}"


def zone_row(obj: Mapping[str, Any], zone: str, resource: str) -> dict[str, Any]:
    for z in obj["zones"]:
        if z["name"] == zone:
            for row in z.get("resources", ()):
                if row["name"] == resource:
                    return dict(row)
    raise AssertionError(f"no {resource} row in zone {zone}")


def attribute(obj: Mapping[str, Any], name: str) -> str | None:
    for attr in obj.get("attributes", ()):
        if attr["name"] == name:
            return str(attr["value"])
    return None


async def eventually(predicate: Callable[[], Any], timeout: float = 5.0, interval: float = 0.01) -> Any:
    """Wait until ``predicate()`` is truthy and return it (fail after ``timeout`` seconds)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        await asyncio.sleep(interval)


def sample(registry: Any, name: str, labels: Mapping[str, str] | None = None) -> float:
    """A metric sample's value (0 when absent)."""
    value = registry.get_sample_value(name, dict(labels or {}))
    return 0.0 if value is None else float(value)
