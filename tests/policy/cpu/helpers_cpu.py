"""Shared builders for the CPU policy tests (pods, fixtures, odd topologies)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from numaplane.resources.pod import Pod, parse_pod
from numaplane.topology.document import topology_from_dict
from numaplane.topology.model import CPUInfo, Topology, synthetic

SHARED = Path(os.environ.get("NUMAPLANE_SHARED", str(Path(__file__).resolve().parents[3].parent / "shared")))
CONFORMANCE = SHARED / "conformance"


def fixture(name: str) -> Topology:
    with (CONFORMANCE / "topologies" / f"{name}.json").open(encoding="utf-8") as fh:
        return topology_from_dict(json.load(fh))


def fixture_names() -> list[str]:
    return sorted(p.stem for p in (CONFORMANCE / "topologies").glob("*.json"))


def container(name: str, cpu: str, *, memory: str = "1Gi", sidecar: bool = False) -> dict[str, Any]:
    res = {"cpu": cpu, "memory": memory}
    doc: dict[str, Any] = {"name": name, "resources": {"requests": res, "limits": res}}
    if sidecar:
        doc["restartPolicy"] = "Always"
    return doc


def pod(uid: str, apps: list[dict[str, Any]], inits: list[dict[str, Any]] | None = None) -> Pod:
    spec: dict[str, Any] = {"containers": apps}
    if inits:
        spec["initContainers"] = inits
    return parse_pod({"metadata": {"name": uid, "uid": uid}, "spec": spec})


def gu_pod(uid: str, cpus: int, name: str = "main") -> Pod:
    return pod(uid, [container(name, str(cpus))])


def with_offline(topology: Topology, offline: set[int]) -> Topology:
    """The same machine with some CPUs offline (uneven cores/sockets: DESIGN fix (a))."""
    cpus = tuple(
        CPUInfo(cpu=c.cpu, core=c.core, socket=c.socket, numa=c.numa, uncore=c.uncore, online=c.cpu not in offline)
        for c in topology.cpus
    )
    return Topology(cpus=cpus, numa_nodes=topology.numa_nodes, name=topology.name + "-offline")


def machine(
    *, sockets: int = 2, numa_per_socket: int = 1, cores_per_numa: int = 4, threads_per_core: int = 2
) -> Topology:
    return synthetic(
        sockets=sockets,
        numa_per_socket=numa_per_socket,
        cores_per_numa=cores_per_numa,
        threads_per_core=threads_per_core,
    )
