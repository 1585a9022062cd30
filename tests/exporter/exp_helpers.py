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
from numaplane_harness.sysfs import uniform_machine, write_sysfs

GiB = 1 << 30
NODE = "worker-1"
_VALIDATOR = jsonschema.Draft202012Validator(validation_schema("v1alpha2"))


#: The exporter tests' machine: 2 NUMA nodes of 4 CPUs (one socket each, no SMT), 8 GiB and 16 2 MiB
#: hugepages per node.
MACHINE = uniform_machine(nodes=2, cpus_per_node=4, mem_gib=8, hugepages_2m=16)


def build_sysfs(root: Path) -> Path:
    """:data:`MACHINE` as a sysfs tree under ``root`` (the harness's writer); returns ``root``."""
    return write_sysfs(root, MACHINE)


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
