"""The harness's one synthetic-sysfs writer reads back as the machine it wrote."""

from __future__ import annotations

from pathlib import Path

import pytest

from numaplane.topology.model import Topology, synthetic
from numaplane.topology.sysfs import discover
from numaplane_harness.sysfs import uniform_machine, write_sysfs


def _shape(t: Topology) -> object:
    cpus = [(c.cpu, c.core, c.socket, c.numa) for c in t.online_cpus]
    nodes = [
        (n.id, n.cpus.format(), n.memory_total_bytes, n.memory_free_bytes, dict(n.distances), n.hugepages)
        for n in t.numa_nodes
    ]
    return cpus, nodes


@pytest.mark.parametrize(
    "machine",
    [
        uniform_machine(),
        uniform_machine(nodes=4, cpus_per_node=3, mem_gib=2, hugepages_2m=16),
        synthetic(sockets=2, numa_per_socket=2, cores_per_numa=2, threads_per_core=2, memory_per_numa_bytes=1 << 30),
    ],
    ids=["uniform", "uniform-hugepages", "smt-two-nodes-per-socket"],
)
def test_written_tree_reads_back_as_the_machine(tmp_path: Path, machine: Topology) -> None:
    assert _shape(discover(write_sysfs(tmp_path, machine))) == _shape(machine)
