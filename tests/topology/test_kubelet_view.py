"""The resource managers' view of the real snapshots is cAdvisor v0.56.2's (issue 27).

Cores are threads with equal (core_id, physical_package_id) within one NUMA node, never
thread_siblings; a core's uncore cache is its first level>2 cache not shared by exactly its node's
threads, else the NUMA node id. The expected figures are what the kubelet reported for these
machines (the issue's trial: Opteron 64 cores, 8 L3 groups) or follow from the snapshot's files.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

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
    "amd-opteron6276-4s8n-64c": (64, 64, 4, 8, 8),
    "riscv-sophgo-sg2042-1s4n-64c": (64, 16, 1, 4, 4),
    "intel-xeon-x7550-4s-64t-3nodes": (64, 32, 4, 3, 3),
    "nvidia-gb10-arm64-1s1n-20c": (20, 20, 1, 1, 1),
    "intel-xeon-2s-snc2-4n-80t-hugepages": (80, 40, 2, 4, 2),
    "arm64-kunpeng920-2s4n-128c": (128, 128, 2, 4, 4),
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
    # the L3 there is shared by exactly a NUMA node's CPUs: cAdvisor files it under the node, so the
    # kubelet's uncore id is the node id
    assert all(c.uncore == c.numa for c in kubelet.cpus if c.online)


def test_view_is_checked() -> None:
    with pytest.raises(ValueError, match="view"):
        discover("/", view="lscpu")  # type: ignore[arg-type]
