"""The one synthetic-sysfs writer of the tests and benches: a :class:`Topology` as the sysfs files
:func:`numaplane.topology.sysfs.discover` reads.

Written under ``root``: ``sys/devices/system/cpu/{online,possible}`` and per CPU
``cpuN/topology/{physical_package_id,core_id,thread_siblings_list,core_siblings_list}``;
``sys/devices/system/node/{online,possible}`` and per NUMA node ``nodeN/{cpulist,distance,meminfo}``
(``MemTotal``, and ``MemFree`` when the node has a free figure; kB) and
``nodeN/hugepages/hugepages-<size>kB/{nr_hugepages,free_hugepages}``. Offline CPUs and nodes are not
written (every CPU and node written is online). Reading the tree back gives the same CPUs, cores,
sockets, NUMA nodes, memory, hugepages and distances (``tests/topology/test_topology_harness_sysfs.py``).
"""

from __future__ import annotations

from pathlib import Path

from numaplane.topology.cpuset import CPUSet
from numaplane.topology.model import Topology, synthetic

__all__ = ["uniform_machine", "write_sysfs", "write_uniform_sysfs"]


def uniform_machine(*, nodes: int = 2, cpus_per_node: int = 4, mem_gib: int = 8, hugepages_2m: int = 0) -> Topology:
    """``nodes`` NUMA nodes, one socket each, ``cpus_per_node`` CPUs each (no SMT: CPU ``i`` is core ``i``),
    ``mem_gib`` GiB of memory and ``hugepages_2m`` 2 MiB pages per node; SLIT 10 local, 21 remote."""
    return synthetic(
        sockets=nodes,
        cores_per_numa=cpus_per_node,
        threads_per_core=1,
        memory_per_numa_bytes=mem_gib << 30,
        hugepages_2m_per_numa=hugepages_2m,
    )


def write_sysfs(root: Path, topology: Topology) -> Path:
    """Write ``topology``'s online CPUs and NUMA nodes as a sysfs tree under ``root``; returns ``root``."""
    cpus = topology.online_cpus
    nodes = [n for n in topology.numa_nodes if n.online]
    cpu_dir = root / "sys/devices/system/cpu"
    node_dir = root / "sys/devices/system/node"
    cpu_dir.mkdir(parents=True)
    node_dir.mkdir(parents=True)
    all_cpus = CPUSet(c.cpu for c in cpus).format()
    all_nodes = CPUSet(n.id for n in nodes).format()
    for name in ("online", "possible"):
        (cpu_dir / name).write_text(f"{all_cpus}\n")
        (node_dir / name).write_text(f"{all_nodes}\n")
    for c in cpus:
        topo = cpu_dir / f"cpu{c.cpu}" / "topology"
        topo.mkdir(parents=True)
        siblings = CPUSet(o.cpu for o in cpus if o.core == c.core and o.socket == c.socket).format()
        package = CPUSet(o.cpu for o in cpus if o.socket == c.socket).format()
        (topo / "physical_package_id").write_text(f"{c.socket}\n")
        (topo / "core_id").write_text(f"{c.core if c.raw_core_id is None else c.raw_core_id}\n")
        (topo / "thread_siblings_list").write_text(f"{siblings}\n")
        (topo / "core_siblings_list").write_text(f"{package}\n")
    for n in nodes:
        base = node_dir / f"node{n.id}"
        base.mkdir()
        (base / "cpulist").write_text(f"{n.cpus.format()}\n")
        if n.distances:
            (base / "distance").write_text(" ".join(str(n.distances[o]) for o in sorted(n.distances)) + "\n")
        meminfo = f"Node {n.id} MemTotal: {n.memory_total_bytes // 1024} kB\n"
        if n.memory_free_bytes is not None:
            meminfo += f"Node {n.id} MemFree: {n.memory_free_bytes // 1024} kB\n"
        (base / "meminfo").write_text(meminfo)
        for pages in n.hugepages:
            folder = base / f"hugepages/hugepages-{pages.page_size_bytes // 1024}kB"
            folder.mkdir(parents=True)
            (folder / "nr_hugepages").write_text(f"{pages.total}\n")
            (folder / "free_hugepages").write_text(f"{pages.total if pages.free is None else pages.free}\n")
    return root


def write_uniform_sysfs(
    root: Path, *, nodes: int = 2, cpus_per_node: int = 4, mem_gib: int = 8, hugepages_2m: int = 0
) -> Path:
    """:func:`write_sysfs` of :func:`uniform_machine` (the tests' usual machine); returns ``root``."""
    return write_sysfs(
        root, uniform_machine(nodes=nodes, cpus_per_node=cpus_per_node, mem_gib=mem_gib, hugepages_2m=hugepages_2m)
    )
