"""Discovery on small hand-made sysfs trees: fallbacks, warnings and errors."""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numaplane.topology.cpuset import CPUSet
from numaplane.topology.errors import SysfsError
from numaplane.topology.snapshot import unpack_snapshot
from numaplane.topology.sysfs import discover, discover_with_warnings

CPU = "sys/devices/system/cpu"
NODE = "sys/devices/system/node"


def base_machine() -> tuple[dict[str, str], dict[str, str]]:
    """4 CPUs, 2 cores × 2 threads (0+2, 1+3), one package, two NUMA nodes; (files, symlinks)."""
    files = {f"{CPU}/online": "0-3\n", f"{CPU}/possible": "0-3\n", f"{CPU}/isolated": "\n"}
    for cpu in range(4):
        t = f"{CPU}/cpu{cpu}/topology"
        files |= {
            f"{t}/physical_package_id": "0\n",
            f"{t}/core_id": f"{cpu % 2}\n",
            f"{t}/thread_siblings_list": f"{cpu % 2},{cpu % 2 + 2}\n",
            f"{t}/core_siblings_list": "0-3\n",
            f"{CPU}/cpu{cpu}/cache/index3/level": "3\n",
            f"{CPU}/cpu{cpu}/cache/index3/id": "7\n",
            f"{CPU}/cpu{cpu}/cache/index3/shared_cpu_list": "0-3\n",
            # what cAdvisor also needs to read a cache (the kubelet view)
            f"{CPU}/cpu{cpu}/cache/index3/shared_cpu_map": "f\n",
            f"{CPU}/cpu{cpu}/cache/index3/size": "8192K\n",
            f"{CPU}/cpu{cpu}/cache/index3/type": "Unified\n",
        }
    files[f"{NODE}/online"] = "0-1\n"
    for node, cpus, mask in ((0, "0,2", "5"), (1, "1,3", "a")):
        n = f"{NODE}/node{node}"
        files |= {
            f"{n}/cpulist": cpus + "\n",
            f"{n}/cpumap": mask + "\n",
            f"{n}/meminfo": f"Node {node} MemTotal: 1048576 kB\nNode {node} MemFree: 524288 kB\n",
            f"{n}/distance": "10 20\n" if node == 0 else "20 10\n",
            f"{n}/hugepages/hugepages-2048kB/nr_hugepages": "4\n",
            f"{n}/hugepages/hugepages-2048kB/free_hugepages": "3\n",
        }
    dev = "sys/devices/pci0000:00/0000:00:03.0"
    files |= {
        f"{dev}/vendor": "0x8086\n",
        f"{dev}/device": "0x159b\n",
        f"{dev}/class": "0x020000\n",
        f"{dev}/numa_node": "1\n",
        f"{dev}/sriov_totalvfs": "64\n",
    }
    links = {
        "sys/bus/pci/devices/0000:00:03.0": "../../../devices/pci0000:00/0000:00:03.0",
        f"{dev}/driver": "../../../bus/pci/drivers/ice",  # dangles, as in captures
    }
    return files, links


def write_tree(root: Path, files: dict[str, str], links: dict[str, str] | None = None) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for rel, target in (links or {}).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, path)
    return root


def build(tmp_path: Path, drop: tuple[str, ...] = (), **changes: str) -> Path:
    files, links = base_machine()
    for prefix in drop:
        files = {k: v for k, v in files.items() if not k.startswith(prefix)}
    files |= {k.replace("__", "/"): v for k, v in changes.items()}
    return write_tree(tmp_path, files, links)


def test_base_machine(tmp_path: Path) -> None:
    result = discover_with_warnings(build(tmp_path))
    t = result.topology
    assert result.warnings == ()
    assert t.num_cpus == 4 and t.num_cores == 2 and t.threads_per_core == 2 and t.num_sockets == 1
    assert t.cpus_by_core == {0: CPUSet([0, 2]), 1: CPUSet([1, 3])}
    assert t.cpus_by_numa == {0: CPUSet([0, 2]), 1: CPUSet([1, 3])}
    assert t.cpus_by_uncore == {7: CPUSet(range(4))}
    assert [c.raw_core_id for c in t.cpus] == [0, 1, 0, 1]
    node1 = t.numa_by_id[1]
    assert node1.memory_total_bytes == 1 << 30 and node1.memory_free_bytes == 1 << 29
    assert node1.hugepages[0].total == 4 and node1.hugepages[0].free == 3
    assert dict(node1.distances) == {0: 20, 1: 10}
    (dev,) = t.pci_devices
    assert (dev.vendor, dev.device, dev.class_code, dev.numa_node) == ("8086", "159b", "020000", 1)
    assert dev.driver == "ice" and dev.sriov_totalvfs == 64
    assert t.attributes["warnings"] == []


def test_no_node_directory_means_one_node(tmp_path: Path) -> None:
    root = build(tmp_path, drop=(NODE,), proc__meminfo="MemTotal: 2097152 kB\nMemFree: 1024 kB\n")
    result = discover_with_warnings(root)
    t = result.topology
    assert t.numa_ids == (0,) and t.cpus_by_numa[0] == CPUSet(range(4))
    assert t.memory_bytes(0) == 2 << 30
    assert any("node 0" in w for w in result.warnings)


def test_package_minus_one_grouped_by_core_siblings(tmp_path: Path) -> None:
    changes = {}
    for cpu in range(4):
        changes[f"{CPU}/cpu{cpu}/topology/physical_package_id".replace("/", "__")] = "-1\n"
        changes[f"{CPU}/cpu{cpu}/topology/core_siblings_list".replace("/", "__")] = "0,2\n" if cpu % 2 == 0 else "1,3\n"
    root = build(tmp_path, **changes)
    result = discover_with_warnings(root, view="hwloc")
    t = result.topology
    assert t.cpus_by_socket == {0: CPUSet([0, 2]), 1: CPUSet([1, 3])}
    assert all(c.raw_socket_id == -1 for c in t.cpus)
    assert any("physical_package_id" in w for w in result.warnings)
    # the kubelet's view keeps cAdvisor's SocketID: -1 as read
    assert discover(root).cpus_by_socket == {-1: CPUSet(range(4))}


def test_cpulist_trusted_over_cpumap(tmp_path: Path) -> None:
    result = discover_with_warnings(build(tmp_path, **{f"{NODE}__node0__cpumap": "1\n"}))
    assert result.topology.cpus_by_numa[0] == CPUSet([0, 2])
    assert any("cpulist trusted" in w for w in result.warnings)


def test_cpumap_used_without_cpulist_and_links_as_last_resort(tmp_path: Path) -> None:
    root = build(tmp_path, drop=(f"{NODE}/node0/cpulist", f"{NODE}/node1/cpulist", f"{NODE}/node1/cpumap"))
    os.symlink("../../node/node1", root / CPU / "cpu1" / "node1")
    os.symlink("../../node/node1", root / CPU / "cpu3" / "node1")
    t = discover(root)
    assert t.cpus_by_numa == {0: CPUSet([0, 2]), 1: CPUSet([1, 3])}


def test_missing_thread_siblings_fall_back_to_core_id(tmp_path: Path) -> None:
    root = build(tmp_path, drop=tuple(f"{CPU}/cpu{c}/topology/thread_siblings_list" for c in range(4)))
    result = discover_with_warnings(root)
    assert result.topology.cpus_by_core == {0: CPUSet([0, 2]), 1: CPUSet([1, 3])}
    assert any("thread_siblings_list" in w for w in result.warnings)


def test_offline_cpu_kept_but_not_placed(tmp_path: Path) -> None:
    root = build(tmp_path, drop=(f"{CPU}/cpu3/topology",), **{f"{CPU}__online": "0-2\n"})
    t = discover(root)
    assert t.offline_cpus == CPUSet([3]) and t.num_cpus == 3
    off = next(c for c in t.cpus if c.cpu == 3)
    assert not off.online and off.numa == 1 and off.core == 3
    assert t.cpus_by_core[1] == CPUSet([1])


def test_per_cpu_online_files_without_global_list(tmp_path: Path) -> None:
    root = build(tmp_path, drop=(f"{CPU}/online",), **{f"{CPU}__cpu1__online": "0\n", f"{CPU}__cpu2__online": "1\n"})
    result = discover_with_warnings(root)
    assert result.topology.offline_cpus == CPUSet([1])
    assert any("no cpu/online" in w for w in result.warnings)


@pytest.mark.parametrize(
    ("rel", "content"),
    [
        (f"{CPU}/cpu1/topology/thread_siblings_list", "1,,3\n"),
        (f"{CPU}/cpu0/topology/physical_package_id", "zero\n"),
        (f"{CPU}/online", "0-3 junk\n"),
        (f"{NODE}/node1/meminfo", "Node 1 MemTotal: many kB\n"),
        (f"{NODE}/node0/distance", "10 x\n"),
        ("sys/devices/pci0000:00/0000:00:03.0/numa_node", "one\n"),
        (f"{NODE}/node0/hugepages/hugepages-2048kB/nr_hugepages", "-\n"),
    ],
)
def test_malformed_file_is_a_sysfs_error_naming_it(tmp_path: Path, rel: str, content: str) -> None:
    root = build(tmp_path, **{rel.replace("/", "__"): content})
    with pytest.raises(SysfsError) as info:
        discover(root)
    # the PCI file is reached (and named) through its sys/bus/pci/devices link
    assert info.value.file.endswith("/".join(rel.split("/")[-2:]))


def test_not_a_sysfs_root(tmp_path: Path) -> None:
    with pytest.raises(SysfsError, match="not a sysfs root"):
        discover(tmp_path)


def test_directory_where_a_file_belongs(tmp_path: Path) -> None:
    root = build(tmp_path, drop=(f"{CPU}/online",))
    (root / CPU / "online").mkdir()
    with pytest.raises(SysfsError) as info:
        discover(root)
    assert info.value.file.endswith(f"{CPU}/online")


FILES = sorted(base_machine()[0])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rel=st.sampled_from(FILES),
    content=st.text(alphabet="0123456789abcdef,-x: \n\x00kBNode", max_size=24) | st.text(max_size=12),
)
def test_any_single_corrupted_file_gives_sysfs_error_or_a_topology(rel: str, content: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        files, links = base_machine()
        files[rel] = content
        root = write_tree(Path(tmp), files, links)
        try:
            discover(root)
        except SysfsError as exc:
            assert exc.file.startswith(tmp)


def _tar(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def _file(name: str, data: bytes = b"0\n") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _link(name: str, target: str) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    return info, None


@pytest.mark.parametrize(
    "member",
    [_file("../evil"), _link("m/sys/escape", "../../../../etc/passwd"), _link("m/abs", "/etc")],
)
def test_unpack_refuses_members_leaving_the_folder(
    tmp_path: Path, member: tuple[tarfile.TarInfo, bytes | None]
) -> None:
    archive = tmp_path / "bad.tar.gz"
    archive.write_bytes(_tar([_file("m/sys/devices/system/cpu/online"), member]))
    with pytest.raises(SysfsError, match="cannot unpack"):
        unpack_snapshot(archive, tmp_path / "out")
    assert not (tmp_path / "evil").exists()


def test_unpack_finds_the_snapshot_folder(tmp_path: Path) -> None:
    archive = tmp_path / "ok.tar.gz"
    archive.write_bytes(_tar([_file("m/sys/devices/system/cpu/online", b"0\n")]))
    assert unpack_snapshot(archive, tmp_path / "out") == tmp_path / "out" / "m"


# ---- issue 25 item 12: cpu/online naming CPUs the snapshot has no directory for -----------------------


def test_online_cpus_without_a_cpu_directory_do_not_count(tmp_path: Path, snapshot_root: Callable[[str], Path]) -> None:
    """``cpu/online = 0-65535`` in a 20-CPU snapshot made a 65,536-CPU machine (11-30 s, 320 MB)."""
    root = tmp_path / "desktop"
    shutil.copytree(snapshot_root("intel-desktop-1s1n-20t"), root, symlinks=True)
    (root / CPU / "online").write_text("0-65535\n")
    started = time.perf_counter()
    result = discover_with_warnings(root)
    assert time.perf_counter() - started < 5
    assert result.topology.num_cpus == 20 and len(result.topology.cpus) == 20
    assert "online CPUs 20-65535 have no cpuN directory: not counted" in result.warnings
    original = discover(snapshot_root("intel-desktop-1s1n-20t"))
    assert [(c.cpu, c.core, c.socket, c.numa) for c in result.topology.cpus] == [
        (c.cpu, c.core, c.socket, c.numa) for c in original.cpus
    ]


def test_a_cpu_directory_beyond_the_largest_cpu_id_is_an_error(tmp_path: Path) -> None:
    root = build(tmp_path)
    (root / CPU / "cpu65536").mkdir()
    with pytest.raises(SysfsError, match="cpu65536: CPU id above 65535"):
        discover(root)
