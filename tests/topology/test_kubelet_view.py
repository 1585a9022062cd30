"""The resource managers' view of the real snapshots is cAdvisor v0.56.2's (issue 27).

Cores are threads with equal (core_id, physical_package_id) within one NUMA node, never
thread_siblings; a core's uncore cache is its first level>2 cache not shared by exactly its node's
threads, else its socket id (the kubelet's getUncoreCacheID). cAdvisor v0.56.2 reads every
cache/index* of a core's first thread and gives up on the rest of the node when one lacks ``id``
(older kernels, ARM): then every core there falls back to its socket. The expected figures are the
kubelet v1.36.2's own "Detected CPU topology" on these snapshots (the differential,
tests/realkube/test_real_kubelet_differential.py, compares every CPU of it with this view).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from numaplane.policy.cpu import StaticPolicyOptions
from numaplane.policy.errors import PolicyConfigError
from numaplane.topology.cpuset import CPUSet
from numaplane.topology.document import topology_from_dict, topology_to_dict
from numaplane.topology.model import Topology
from numaplane.topology.sysfs import discover


def _counts(t: Topology) -> tuple[int, int, int, int, int]:
    on = [c for c in t.cpus if c.online]
    return (
        len(on),
        len({c.core for c in on}),
        len({c.socket for c in on}),
        len({c.numa for c in on}),
        len({c.uncore for c in on}),
    )


# (cpus, cores, sockets, NUMA nodes, uncore caches) in the kubelet's view; the hwloc view differs.
KUBELET = {
    # no cache ids in these captures: one uncore cache per socket
    "amd-opteron6276-4s8n-64c": (64, 64, 4, 8, 4),
    "intel-xeon-x7550-4s-64t-3nodes": (64, 32, 4, 3, 4),
    "nvidia-gb10-arm64-1s1n-20c": (20, 20, 1, 1, 1),
    "arm64-kunpeng920-2s4n-128c": (128, 128, 2, 4, 2),
    # physical_package_id -1 everywhere: one socket -1 (and so one uncore cache -1), as the kubelet logged
    "ibm-power7-8n-256t-smt4": (256, 64, 1, 8, 1),
    # no cache folder at all
    "riscv-sophgo-sg2042-1s4n-64c": (64, 16, 1, 4, 1),
    # cache ids: the L3 of each socket (shared by two SNC nodes, so not a node-level cache)
    "intel-xeon-2s-snc2-4n-80t-hugepages": (80, 40, 2, 4, 2),
}


@pytest.mark.parametrize("name", sorted(KUBELET))
def test_kubelet_view_counts(name: str, snapshot_root: Callable[[str], Path]) -> None:
    t = discover(snapshot_root(name))
    assert t.attributes["view"] == "kubelet"
    assert _counts(t) == KUBELET[name]


def test_opteron_cores_are_single_threads_not_thread_sibling_pairs(snapshot_root: Callable[[str], Path]) -> None:
    root = snapshot_root("amd-opteron6276-4s8n-64c")
    kubelet = discover(root)
    hwloc = discover(root, view="hwloc")
    assert all(c.core == c.cpu for c in kubelet.cpus if c.online)
    assert len({c.core for c in hwloc.cpus if c.online}) == 32
    # its caches have no id file: cAdvisor reads none, and the kubelet's uncore id is the socket
    assert all(c.uncore == c.socket for c in kubelet.cpus if c.online)


def test_cpus_of_a_node_without_directory_are_not_the_kubelets(snapshot_root: Callable[[str], Path]) -> None:
    """Node 0 of this capture is offline (no directory): cAdvisor reads CPUs only from node directories,
    and the real kubelet reported ``online-cpus: 5,7,9,11,13,15,17,19`` (refusing reserved CPU 4)."""
    root = snapshot_root("intel-xeon-e5-2680v3-2s-offline-cpu0-node0")
    kubelet = discover(root)
    assert kubelet.all_cpus == CPUSet([5, 7, 9, 11, 13, 15, 17, 19])
    assert [n.id for n in kubelet.numa_nodes] == [1]
    assert discover(root, view="hwloc").all_cpus == CPUSet.range(4, 20)


def test_sockets_are_counted_as_cadvisor_counts_them(snapshot_root: Callable[[str], Path]) -> None:
    """cAdvisor's ``NumSockets`` (``GetSockets``: the distinct ``physical id`` of /proc/cpuinfo, every
    online CPU) counts package 0, whose CPUs no node directory lists: 2 sockets over 1 NUMA node, so the
    kubelet refuses ``align-by-socket`` there ("failed to run Kubelet: new static policy error: Align by
    socket …", the real kubelet v1.36.2 on this overlay) and numaplane's managers now do too."""
    root = snapshot_root("intel-xeon-e5-2680v3-2s-offline-cpu0-node0")
    kubelet = discover(root)
    assert (kubelet.num_sockets, kubelet.num_numa_nodes, kubelet.socket_ids) == (2, 1, (1,))
    assert kubelet.cpus_per_socket == 4  # NumCPUs / NumSockets = 8 / 2, as the kubelet divides
    assert topology_from_dict(topology_to_dict(kubelet)).num_sockets == 2
    hwloc = discover(root, view="hwloc")
    assert (hwloc.num_sockets, hwloc.num_sockets_override) == (2, None)
    options = StaticPolicyOptions.parse({"align-by-socket": "true"})
    with pytest.raises(PolicyConfigError, match="sockets are more than number of NUMA"):
        options.validate(kubelet, "best-effort")


def test_socket_count_overrides_only_where_cpus_disagree(snapshot_root: Callable[[str], Path]) -> None:
    """Where every online CPU is the kubelet's, the count is the CPUs' own (no override): POWER7's
    ``physical_package_id`` -1 (no cpuinfo line matches, sysfs fallback: one value) is 1 socket."""
    for name, sockets in (("amd-opteron6276-4s8n-64c", 4), ("ibm-power7-8n-256t-smt4", 1)):
        t = discover(snapshot_root(name))
        assert (t.num_sockets, t.num_sockets_override) == (sockets, None), name


def test_x7550_uncore_caches_are_its_sockets(snapshot_root: Callable[[str], Path]) -> None:
    """Node 0 holds two sockets; the L3 of each (16 threads, no id file) is not read by cAdvisor."""
    t = discover(snapshot_root("intel-xeon-x7550-4s-64t-3nodes"))
    on = [c for c in t.cpus if c.online]
    assert {c.uncore for c in on if c.numa == 0} == {0, 1}
    assert all(c.uncore == c.socket for c in on)


CPU = "sys/devices/system/cpu"


def _machine(tmp_path: Path, *, without_id: int | None = None, cpus: int = 12) -> Path:
    """One NUMA node, one package, ``cpus`` single-thread cores; L3 ``id`` 5 shared by CPUs 0-3 and
    ``id`` 9 by the rest (so neither is node-wide); CPU ``without_id`` lacks its L1's ``id`` file."""
    files = {f"{CPU}/online": f"0-{cpus - 1}\n", "sys/devices/system/node/node0/cpulist": f"0-{cpus - 1}\n"}
    for cpu in range(cpus):
        base = f"{CPU}/cpu{cpu}"
        files[f"{base}/topology/core_id"] = f"{cpu}\n"
        files[f"{base}/topology/physical_package_id"] = "0\n"
        files[f"{base}/topology/thread_siblings_list"] = f"{cpu}\n"
        l3 = (5, "f") if cpu < 4 else (9, format(((1 << cpus) - 1) & ~0xF, "x"))
        for index, (level, cache_id, shared) in enumerate(((1, cpu, format(1 << cpu, "x")), (3, *l3))):
            d = f"{base}/cache/index{index}"
            files |= {f"{d}/level": f"{level}\n", f"{d}/size": "32K\n", f"{d}/type": "Unified\n"}
            files[f"{d}/shared_cpu_map"] = f"{shared}\n"
            if not (cpu == without_id and index == 0):
                files[f"{d}/id"] = f"{cache_id}\n"
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def test_uncore_cache_ids_read_as_cadvisor_does(tmp_path: Path) -> None:
    t = discover(_machine(tmp_path))
    assert {c.cpu: c.uncore for c in t.cpus} == {cpu: 5 if cpu < 4 else 9 for cpu in range(12)}


def test_an_unreadable_cache_stops_cadvisor_for_the_rest_of_the_node(tmp_path: Path) -> None:
    """cAdvisor visits the node's CPUs in glob order (cpu0, cpu1, cpu10, cpu11, cpu2, …): with cpu11's
    L1 lacking ``id``, cpu0, cpu1 and cpu10 keep their L3 and every later core falls back to socket 0."""
    t = discover(_machine(tmp_path, without_id=11))
    expected = dict.fromkeys(range(12), 0) | {0: 5, 1: 5, 10: 9}
    assert {c.cpu: c.uncore for c in t.cpus} == expected
    # the hwloc view reads the L3 of every CPU
    assert {c.cpu: c.uncore for c in discover(tmp_path, view="hwloc").cpus} == {
        cpu: 5 if cpu < 4 else 9 for cpu in range(12)
    }


def test_view_is_checked() -> None:
    with pytest.raises(ValueError, match="view"):
        discover("/", view="lscpu")  # type: ignore[arg-type]


def test_socket_count_with_negative_and_non_negative_package_ids(tmp_path: Path) -> None:
    """A mix of package ids -1 and 0 (in no snapshot we hold): cAdvisor's ``GetSockets`` counts the
    ``physical id`` lines of ``/proc/cpuinfo`` its regexp matches (``[0-9]+``: ``-1`` never does), so
    only package 0 counts: 1 socket, as on x86, whose cpuinfo prints the line for every CPU. (An
    architecture that prints no such line falls back to sysfs and would count 2; numaplane reads no
    cpuinfo and follows the x86 rule there: a named gap for such a machine, unseen so far.)"""
    root = _machine(tmp_path)
    for cpu in range(6):
        (root / f"{CPU}/cpu{cpu}/topology/physical_package_id").write_text("-1\n")
    t = discover(root)
    assert t.num_sockets == 1
    assert discover(root, view="hwloc").num_sockets == 2
