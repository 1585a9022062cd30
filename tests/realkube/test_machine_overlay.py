"""The files that make the real kubelet see another machine (``numaplane_harness.machineoverlay``).

Fast: no kubelet runs here. Each check is a fact cAdvisor v0.56.2 depends on (issue 27): the kubelet
run on these overlays is ``test_real_kubelet_differential.py``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from numaplane.topology.cpuset import CPUSet
from numaplane.topology.sysfs import discover
from numaplane_harness.machineoverlay import prepare_overlay, snapshot_has_node_memory

REAL = Path(os.environ["NUMAPLANE_SHARED"]) / "topologies" / "real"


def _field(cpuinfo: str, name: str) -> list[str]:
    return re.findall(rf"^{name}\s*: (.*)$", cpuinfo, re.M)


def test_cpuinfo_meminfo_and_node_links_follow_the_snapshot(tmp_path: Path) -> None:
    overlay = prepare_overlay(REAL / "amd-opteron6276-4s8n-64c.tar.gz", tmp_path)
    topology = discover(overlay.root, view="kubelet")
    cpuinfo = (overlay.generated / "cpuinfo").read_text()
    assert [int(p) for p in _field(cpuinfo, "processor")] == list(topology.all_cpus)
    # cAdvisor's NumSockets: distinct physical ids in cpuinfo
    assert len(set(_field(cpuinfo, "physical id"))) == 4 == len({c.socket for c in topology.cpus if c.online})
    assert all(line.startswith("2000.") for line in _field(cpuinfo, "cpu MHz"))
    node_root = overlay.root / "sys/devices/system/node"
    for node in topology.numa_nodes:
        linked = CPUSet(int(p.name[3:]) for p in (node_root / f"node{node.id}").glob("cpu[0-9]*"))
        assert linked == CPUSet.parse((node_root / f"node{node.id}" / "cpulist").read_text().strip())
    total_kb = sum(n.memory_total_bytes for n in topology.numa_nodes) // 1024
    meminfo = (overlay.generated / "meminfo").read_text()
    for key in ("MemTotal", "MemFree", "MemAvailable"):
        assert re.search(rf"^{key}:\s+{total_kb} kB$", meminfo, re.M), key
    assert snapshot_has_node_memory(overlay.root)


def test_machine_hugepages_are_the_sum_of_the_nodes(tmp_path: Path) -> None:
    overlay = prepare_overlay(REAL / "intel-xeon-2s-snc2-4n-80t-hugepages.tar.gz", tmp_path)
    topology = discover(overlay.root, view="kubelet")
    sizes: dict[int, int] = {}
    for node in topology.numa_nodes:
        for pages in node.hugepages:
            sizes[pages.page_size_bytes // 1024] = sizes.get(pages.page_size_bytes // 1024, 0) + pages.total
    assert sizes.get(2048, 0) > 0
    for size_kb, total in sizes.items():
        assert (overlay.generated / f"hugepages/hugepages-{size_kb}kB/nr_hugepages").read_text() == f"{total}\n"
    assert f"HugePages_Total: {sizes[2048]}\n" in (overlay.generated / "meminfo").read_text()


def test_thin_captures_are_completed(tmp_path: Path) -> None:
    # hwloc dump with node cpumap only: links from the mask
    epyc = prepare_overlay(REAL / "amd-epyc7451-2s8n-96t.tar.gz", tmp_path / "epyc")
    node6 = epyc.root / "sys/devices/system/node/node6"
    assert not (node6 / "cpulist").exists()
    mask = int((node6 / "cpumap").read_text().strip().replace(",", ""), 16)
    assert CPUSet(int(p.name[3:]) for p in node6.glob("cpu[0-9]*")) == CPUSet.from_mask(mask) != CPUSet()
    # ARM: no clock speed in the capture, cpulist files ending in a NUL; no cpu/online: written from the CPUs
    arm = prepare_overlay(REAL / "arm64-kunpeng920-2s4n-128c.tar.gz", tmp_path / "arm")
    assert (arm.root / "sys/devices/system/cpu/cpu127/cpufreq/cpuinfo_max_freq").read_text() == "2000000\n"
    ryzen = prepare_overlay(REAL / "amd-ryzen5-1600-1s1n-12t.tar.gz", tmp_path / "ryzen")
    assert (ryzen.root / "sys/devices/system/cpu/online").read_text() == "0-11\n"
    assert not snapshot_has_node_memory(ryzen.root)


def test_only_the_kubelet_sees_the_mounts(tmp_path: Path) -> None:
    overlay = prepare_overlay(REAL / "kvm-icelake-1s1n-12t.tar.gz", tmp_path)
    command = overlay.wrap(["/bin/kubelet", "--config=a b"])
    assert command[:5] == ["unshare", "-m", "--propagation", "private", "sh"]
    script = command[-1]
    for target in (
        "/sys/devices/system/cpu",
        "/sys/devices/system/node",
        "/sys/kernel/mm/hugepages",
        "/proc/meminfo",
        "/proc/cpuinfo",
    ):
        assert f" {target} && " in script
    assert script.endswith("exec /bin/kubelet '--config=a b'")
