"""Make the real kubelet see another machine: a real sysfs snapshot bind-mounted in its mount namespace only.

Facts (issue 27, checked with kubelet v1.36.2 / cAdvisor v0.56.2): cAdvisor reads ``node*/cpu*``,
``cpu/online``, ``cpuN/topology/{core_id,physical_package_id}``, ``cpuN/cache/index*``,
``nodeN/meminfo``, ``nodeN/hugepages/*/nr_hugepages``, ``nodeN/distance``, cpufreq, the number of
sockets from ``/proc/cpuinfo`` and the node's memory capacity from ``/proc/meminfo``. So
:func:`prepare_overlay` unpacks a snapshot and completes it where captures are thin:

* ``nodeN/cpuM`` links made from ``nodeN/cpulist`` (else ``nodeN/cpumap``) where missing (hwloc dumps have none; without them
  cAdvisor says "could not detect number of cpus");
* ``cpu/online`` written where missing (from each CPU's ``online`` file, a CPU without one online:
  the rule of :mod:`numaplane.topology.sysfs`);
* ``cpuN/cpufreq/cpuinfo_max_freq`` written where missing (cAdvisor needs a clock speed; ARM cpuinfo
  has none);
* ``/proc/meminfo``: ``MemTotal`` = ``MemFree`` = ``MemAvailable`` = the sum of the nodes' ``MemTotal``
  (the snapshot's own ``proc/meminfo`` when no node reports memory); hugepages totals from the nodes;
* ``/sys/kernel/mm/hugepages/hugepages-<kB>kB/nr_hugepages`` = the sum of the nodes' pages;
* ``/proc/cpuinfo`` with the snapshot's ``physical id``, ``core id``, ``siblings``, ``cpu cores``.

:meth:`MachineOverlay.wrap` turns the kubelet's command into ``unshare -m --propagation private sh -c
'mount --bind …; exec kubelet …'``: the mounts exist only in that namespace and vanish with it;
containerd and the host never see them. The kubelet's process id stays the one started (``unshare``
and ``sh`` both ``exec``).
"""

from __future__ import annotations

import re
import shlex
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from numaplane.topology.cpuset import CPUSet

__all__ = ["MachineOverlay", "prepare_overlay", "snapshot_has_node_memory"]

#: The clock speed written where a snapshot has none (kHz, as ``cpuinfo_max_freq``).
DEFAULT_MAX_FREQ_KHZ = 2_000_000
_MEMINFO_LINE = re.compile(r"^Node\s+\d+\s+(\w+):\s+(\d+)\s*kB", re.M)
_PROC_MEMINFO = re.compile(r"^(\w+):\s+(\d+)\s*kB", re.M)


@dataclass(frozen=True)
class MachineOverlay:
    """An unpacked snapshot (``root``, holding ``sys/``) and the generated files (``generated``)."""

    name: str
    root: Path
    generated: Path

    @property
    def mounts(self) -> tuple[tuple[Path, str], ...]:
        """(source on this machine, target path in the kubelet's namespace), in mount order."""
        return (
            (self.root / "sys/devices/system/cpu", "/sys/devices/system/cpu"),
            (self.root / "sys/devices/system/node", "/sys/devices/system/node"),
            (self.generated / "hugepages", "/sys/kernel/mm/hugepages"),
            (self.generated / "meminfo", "/proc/meminfo"),
            (self.generated / "cpuinfo", "/proc/cpuinfo"),
        )

    def wrap(self, command: Sequence[str]) -> list[str]:
        """``command`` run in a private mount namespace with the snapshot mounted over this machine's."""
        steps = [f"mount --bind {shlex.quote(str(src))} {shlex.quote(dst)}" for src, dst in self.mounts]
        script = " && ".join([*steps, "exec " + shlex.join(command)])
        return ["unshare", "-m", "--propagation", "private", "sh", "-c", script]


def _read(path: Path) -> str:
    try:
        return path.read_text().replace("\x00", "").strip()  # some captures end files with a NUL
    except OSError:
        return ""


def _node_dirs(root: Path) -> dict[int, Path]:
    base = root / "sys/devices/system/node"
    found = {}
    if base.is_dir():
        for d in base.iterdir():
            m = re.fullmatch(r"node(\d+)", d.name)
            if m and d.is_dir():
                found[int(m.group(1))] = d
    return dict(sorted(found.items()))


def snapshot_has_node_memory(root: Path) -> bool:
    """Whether every NUMA node of the snapshot reports ``MemTotal`` (the memory manager's Static needs it)."""
    nodes = _node_dirs(root)
    return bool(nodes) and all("MemTotal" in _read(d / "meminfo") for d in nodes.values())


def _unpack(snapshot: Path, into: Path) -> Path:
    with tarfile.open(snapshot) as tar:
        tar.extractall(into, filter="tar")
    tops = [p for p in into.iterdir() if p.is_dir()]
    for top in tops:
        if (top / "sys").is_dir():
            return top
    raise ValueError(f"{snapshot}: no top folder holding sys/")


def _online(root: Path) -> CPUSet:
    text = _read(root / "sys/devices/system/cpu/online")
    if text:
        return CPUSet.parse(text)
    cpus = [
        int(m.group(1))
        for p in (root / "sys/devices/system/cpu").iterdir()
        if (m := re.fullmatch(r"cpu(\d+)", p.name)) and _read(p / "online") != "0"
    ]
    return CPUSet(cpus)


def _link_node_cpus(root: Path) -> None:
    for node_dir in _node_dirs(root).values():
        cpulist = _read(node_dir / "cpulist")
        cpumap = _read(node_dir / "cpumap").replace(",", "")
        if cpulist:
            cpus = CPUSet.parse(cpulist)
        elif cpumap:
            cpus = CPUSet.from_mask(int(cpumap, 16))
        else:
            continue
        for cpu in cpus:
            link = node_dir / f"cpu{cpu}"
            if not link.exists() and not link.is_symlink():
                link.symlink_to(f"../../cpu/cpu{cpu}")


def _add_cpufreq(root: Path, online: CPUSet) -> None:
    for cpu in online:
        freq = root / f"sys/devices/system/cpu/cpu{cpu}/cpufreq/cpuinfo_max_freq"
        if not freq.exists():
            freq.parent.mkdir(parents=True, exist_ok=True)
            freq.write_text(f"{DEFAULT_MAX_FREQ_KHZ}\n")


def _hugepages(root: Path) -> dict[int, int]:
    """page size in kB -> the machine's pages (the sum over nodes)."""
    pages: dict[int, int] = {}
    for node_dir in _node_dirs(root).values():
        base = node_dir / "hugepages"
        if not base.is_dir():
            continue
        for d in base.iterdir():
            m = re.fullmatch(r"hugepages-(\d+)kB", d.name)
            if m:
                count = _read(d / "nr_hugepages")
                pages[int(m.group(1))] = pages.get(int(m.group(1)), 0) + (int(count) if count.isdigit() else 0)
    return pages


def _mem_total_kb(root: Path) -> int:
    total = 0
    for node_dir in _node_dirs(root).values():
        for key, value in _MEMINFO_LINE.findall(_read(node_dir / "meminfo")):
            if key == "MemTotal":
                total += int(value)
    if total:
        return total
    for key, value in _PROC_MEMINFO.findall(_read(root / "proc/meminfo")):
        if key == "MemTotal":
            return int(value)
    return 64 * 1024 * 1024  # 64 GiB: a capture without any memory figure


def _cpuinfo(root: Path, online: CPUSet) -> str:
    cpu_root = root / "sys/devices/system/cpu"
    package: dict[int, int] = {}
    core: dict[int, int] = {}
    for cpu in online:
        pkg = _read(cpu_root / f"cpu{cpu}/topology/physical_package_id")
        cid = _read(cpu_root / f"cpu{cpu}/topology/core_id")
        package[cpu] = int(pkg) if pkg.lstrip("-").isdigit() else 0
        core[cpu] = int(cid) if cid.lstrip("-").isdigit() else cpu
    blocks = []
    for cpu in online:
        same_pkg = [c for c in online if package[c] == package[cpu]]
        cores = {core[c] for c in same_pkg}
        blocks.append(
            "\n".join(
                [
                    f"processor\t: {cpu}",
                    "vendor_id\t: GenuineIntel",
                    "model name\t: numaplane snapshot CPU",
                    f"cpu MHz\t\t: {DEFAULT_MAX_FREQ_KHZ / 1000:.3f}",
                    f"physical id\t: {package[cpu]}",
                    f"siblings\t: {len(same_pkg)}",
                    f"core id\t\t: {core[cpu]}",
                    f"cpu cores\t: {len(cores)}",
                    "flags\t\t: fpu",
                ]
            )
        )
    return "\n\n".join(blocks) + "\n\n"


def prepare_overlay(snapshot: Path, workdir: Path) -> MachineOverlay:
    """Unpack ``snapshot`` (a ``.tar.gz`` of ``topologies/real/``) under ``workdir`` and complete it."""
    name = snapshot.name.removesuffix(".tar.gz")
    unpacked = workdir / "snapshot"
    unpacked.mkdir(parents=True, exist_ok=True)
    root = _unpack(snapshot, unpacked)
    online = _online(root)
    online_file = root / "sys/devices/system/cpu/online"
    if not online_file.exists():  # cAdvisor reads the list; without it every CPU counts as offline
        online_file.write_text(online.format() + "\n")
    _link_node_cpus(root)
    _add_cpufreq(root, online)
    generated = workdir / "generated"
    (generated / "hugepages").mkdir(parents=True, exist_ok=True)
    pages = _hugepages(root) or {2048: 0}
    pages.setdefault(2048, 0)
    for size_kb, count in sorted(pages.items()):
        d = generated / "hugepages" / f"hugepages-{size_kb}kB"
        d.mkdir(exist_ok=True)
        for knob in (
            "nr_hugepages",
            "free_hugepages",
            "nr_overcommit_hugepages",
            "resv_hugepages",
            "surplus_hugepages",
        ):
            (d / knob).write_text(f"{count if knob in ('nr_hugepages', 'free_hugepages') else 0}\n")
    total_kb = _mem_total_kb(root)
    default_kb = 2048
    meminfo = [
        f"MemTotal:       {total_kb} kB",
        f"MemFree:        {total_kb} kB",
        f"MemAvailable:   {total_kb} kB",
        "SwapTotal:             0 kB",
        "SwapFree:              0 kB",
        f"HugePages_Total: {pages.get(default_kb, 0)}",
        f"HugePages_Free:  {pages.get(default_kb, 0)}",
        "HugePages_Rsvd:        0",
        "HugePages_Surp:        0",
        f"Hugepagesize:       {default_kb} kB",
    ]
    (generated / "meminfo").write_text("\n".join(meminfo) + "\n")
    (generated / "cpuinfo").write_text(_cpuinfo(root, online))
    return MachineOverlay(name=name, root=root, generated=generated)
