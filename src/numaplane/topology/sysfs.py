"""Discover a machine's topology from a Linux sysfs tree (an adapter: this module reads files).

``root`` is ``/`` (this machine) or an unpacked snapshot whose top folder holds ``sys/`` (and maybe
``proc/``; :mod:`numaplane.topology.snapshot` finds and unpacks those). :func:`discover` returns a :class:`Topology` following the identity rules of
``topology/model.py``; :func:`discover_with_warnings` also returns what discovery had to guess. The
warnings are stored in ``Topology.attributes["warnings"]`` as well, next to
``attributes["sysfs"]`` (the raw CPU and node lists: ``cpu_possible``, ``cpu_offline``,
``node_possible``, …, for those files that exist).

Sources and rules (fallbacks are warned about, malformed content raises :class:`SysfsError`):

* CPUs: every ``cpuN`` directory (ids up to ``MAX_CPU_ID``); ``cpu/online`` says which are online. A
  CPU ``cpu/online`` lists without a ``cpuN`` directory is not counted (warned): the list alone is no
  CPU, so a hostile ``0-65535`` in a 20-CPU snapshot stays 20 CPUs. Without ``cpu/online`` (old
  kernels, trimmed captures) each CPU's ``online`` file decides, and a CPU without one is online
  (cpu0 usually has none). Only online CPUs are placed in cores and sockets; offline ones keep ``online=False``, their
  own id as core, their ``physical_package_id`` if sysfs still shows it (else -1) and their NUMA node
  if one is known (else -1).
* Cores: the union of ``thread_siblings_list`` (or ``core_cpus_list``, or the hex masks) over online
  CPUs; the id is the lowest CPU id (so ``core_id`` values that repeat per cluster or die, as on
  RISC-V, do not matter). Without sibling files, CPUs sharing (package, die, cluster, core_id) form
  a core. ``raw_core_id`` keeps ``core_id``.
* Sockets: ``physical_package_id``. Where it is -1 or missing, CPUs are grouped by
  ``core_siblings_list`` (or ``package_cpus_list``) and the groups numbered in order of their lowest
  CPU from 0 (or from one above the highest real package id); ``raw_socket_id`` keeps the raw value.
* Uncore cache: the level-3 ``cache/indexN``: its ``id``, or — when any L3 lacks one — the lowest CPU
  of its ``shared_cpu_list``; 0 when there is no usable L3.
* NUMA: ``nodeN/cpulist``, else ``nodeN/cpumap``; when both exist and disagree, ``cpulist`` is
  trusted (with a warning). A CPU no node lists takes its ``cpuN/nodeM`` link; an online CPU still
  without a node goes to the lowest *possible* node that has no directory (an offline node), else
  to the lowest node. Without ``sys/devices/system/node`` there is one node 0 sized from
  ``proc/meminfo``. Node ``online`` comes from ``node/online`` (default: the directory exists).
* Distances: ``nodeN/distance`` lists one value per online node in id order; when its length does
  not match the online nodes, the node directories and then ``node/possible`` are tried.
* Memory: ``MemTotal``/``MemFree`` of ``nodeN/meminfo`` (bytes; 0 and ``None`` when missing);
  hugepages from ``nodeN/hugepages/hugepages-<kB>kB/{nr,free}_hugepages``.
* PCI: ``sys/bus/pci/devices/*`` with ``vendor``/``device``/``class`` as lower-case hex without
  ``0x``, ``numa_node`` (-1 when missing), the ``driver`` link's name (it may dangle in captures),
  ``sriov_totalvfs`` and the ``physfn`` link's name.
* Hybrid parts: ``sys/devices/cpu_core/cpus`` → core type ``"P"``, ``cpu_atom/cpus`` → ``"E"``.

Two views (``view=``), differing only in cores and uncore caches:

* ``"kubelet"`` (the default; what the resource managers, the NRT exporter and the scheduler need):
  built as cAdvisor v0.56.2 builds ``MachineInfo.Topology`` and the kubelet's ``topology.Discover``
  reads it. Within one NUMA node, online CPUs with equal (``core_id``, ``physical_package_id``) form
  a core (``thread_siblings`` is never read); the core id is its lowest CPU. For each core, the first
  ``cache/index*`` (in name order) of its first thread (in cAdvisor's order: ``cpu10`` before
  ``cpu2``) with ``level`` > 2 whose ``shared_cpu_map`` counts a number of CPUs other than (cores of
  the node × threads of this core) is its uncore cache, id from ``id``. cAdvisor reads every index of
  that thread and gives up on the rest of the node at the first index lacking ``id``, ``size``,
  ``level``, ``type`` or ``shared_cpu_map`` (older kernels and ARM have no cache ``id``: the x7550,
  Opteron, Kunpeng, POWER and GB10 snapshots), and at a CPU without a ``cache`` folder (RISC-V). A
  core without an uncore cache takes its socket id (the kubelet's ``getUncoreCacheID``). Sockets are
  ``physical_package_id`` as read, -1 included (cAdvisor does not regroup: on the POWER7 capture every
  CPU is in socket -1). Where ``nodeN`` directories exist, a CPU none of them lists is offline in this
  view (cAdvisor reads CPUs from the node directories only). The socket *count* (``num_sockets``,
  the kubelet's ``NumSockets``) is cAdvisor's ``GetSockets``: the distinct ``physical_package_id`` of
  every online CPU, those no node directory lists included (set as ``num_sockets_override`` where it
  differs from the sockets of the visible CPUs); the NUMA node count is the nodes holding a visible
  CPU, as the kubelet's ``CPUDetails.NUMANodes()``. CPUs without ``core_id`` fall back to the
  hwloc grouping (warned).
* ``"hwloc"`` (pictures and ``lscpu``-like output): cores by ``thread_siblings_list`` and the L3's
  ``id`` as described above, as hwloc and lscpu show the machine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from numaplane.limits import MAX_CPU_ID
from numaplane.topology.cpuset import CPUSet
from numaplane.topology.errors import SysfsError
from numaplane.topology.model import CPUInfo, NUMANode, PCIDevice, Topology
from numaplane.topology.sysfs_numa import NodeFacts, node_dir_ids, read_numa
from numaplane.topology.sysfs_parse import parse_bool, parse_cpulist
from numaplane.topology.sysfs_reader import Reader

__all__ = ["Discovery", "View", "discover", "discover_with_warnings"]

View = Literal["kubelet", "hwloc"]
"""Which picture of cores and uncore caches to build (see the module docstring)."""

CPU_DIR = "sys/devices/system/cpu"
NODE_DIR = "sys/devices/system/node"
PCI_DIR = "sys/bus/pci/devices"
_NUMBERED = re.compile(r"(cpu|node|index)([0-9]+)\Z")


@dataclass(frozen=True)
class Discovery:
    """A discovered topology and the guesses discovery made (human-readable, one per line)."""

    topology: Topology
    warnings: tuple[str, ...]


def discover(root: str | Path = "/", *, view: View = "kubelet") -> Topology:
    """The topology of the sysfs tree under ``root``; warnings are in ``attributes["warnings"]``."""
    return discover_with_warnings(root, view=view).topology


def discover_with_warnings(root: str | Path = "/", *, view: View = "kubelet") -> Discovery:
    """Like :func:`discover`, also returning the warnings. Raises :class:`SysfsError` naming a file."""
    if view not in ("kubelet", "hwloc"):
        raise ValueError(f"view must be 'kubelet' or 'hwloc', not {view!r}")
    r = Reader(Path(root))
    warnings: list[str] = []
    raw_lists: dict[str, str] = {}
    universe, online = _cpu_sets(r, warnings, raw_lists)
    raws = {cpu: _read_cpu(r, cpu) for cpu in universe}
    core = _cores(r, raws, online, warnings)
    socket = _sockets(r, raws, online, warnings)
    uncore = _uncore(r, online, warnings)
    numa, nodes = read_numa(r, universe, online, warnings, raw_lists)
    num_sockets: int | None = None
    if view == "kubelet":
        # counted over every online CPU, before the node directories hide some (see _kubelet_num_sockets)
        num_sockets = _kubelet_num_sockets(raws, online)
        online, nodes = _kubelet_visible(r, online, numa, nodes, warnings)
        # cAdvisor's SocketID is physical_package_id as read, -1 included (POWER7): no regrouping
        socket = {cpu: pkg if (pkg := raws[cpu].package) is not None else socket[cpu] for cpu in online}
        core = _kubelet_cores(raws, online, numa, core, warnings)
        uncore = _kubelet_uncore(r, online, numa, core, socket)
    types = _core_types(r)
    cpus: list[CPUInfo] = []
    for cpu in universe:
        raw = raws[cpu]
        is_online = cpu in online
        if is_online:
            sock = socket[cpu]
        else:
            sock = raw.package if raw.package is not None and raw.package >= 0 else -1
        cpus.append(
            CPUInfo(
                cpu=cpu,
                core=core.get(cpu, cpu),
                socket=sock,
                numa=numa.get(cpu, -1),
                uncore=uncore.get(cpu, 0) if is_online else 0,
                die=raw.die if raw.die is not None and raw.die >= 0 else 0,
                online=is_online,
                raw_core_id=raw.core_id,
                raw_socket_id=raw.package if raw.package is not None and raw.package != sock else None,
                core_type=types.get(cpu),
            )
        )
    node_models = tuple(
        NUMANode(
            id=n.id,
            cpus=CPUSet(c.cpu for c in cpus if c.online and c.numa == n.id),
            memory_total_bytes=n.memory_total_bytes,
            memory_free_bytes=n.memory_free_bytes,
            hugepages=n.hugepages,
            distances=n.distances,
            online=n.online,
        )
        for n in nodes
    )
    isolated_text = r.text(f"{CPU_DIR}/isolated")
    isolated = parse_cpulist(isolated_text, r.path(f"{CPU_DIR}/isolated")) if isolated_text else CPUSet()
    name = Path(root).resolve().name or _hostname(r)
    if num_sockets is not None and num_sockets == len({c.socket for c in cpus if c.online}):
        num_sockets = None  # the count the CPUs give: no override
    topology = Topology(
        cpus=tuple(cpus),
        numa_nodes=node_models,
        pci_devices=_pci_devices(r),
        isolated_cpus=isolated,
        name=name,
        source=f"sysfs:{root}",
        attributes={"warnings": list(warnings), "sysfs": raw_lists, "view": view},
        num_sockets_override=num_sockets,
    )
    return Discovery(topology, tuple(warnings))


# -- CPUs -----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _RawCPU:
    """What ``cpuN/topology`` says (``None`` = file missing)."""

    cpu: int
    package: int | None
    core_id: int | None
    die: int | None
    cluster: int | None
    threads: CPUSet | None


def _cpu_sets(r: Reader, warnings: list[str], raw_lists: dict[str, str]) -> tuple[CPUSet, CPUSet]:
    names = r.listdir(CPU_DIR)
    if names is None:
        raise SysfsError(r.path(CPU_DIR), "missing: not a sysfs root (expected <root>/sys/devices/system/cpu)")
    ids = [int(m.group(2)) for m in map(_NUMBERED.match, names) if m and m.group(1) == "cpu"]
    if ids and max(ids) > MAX_CPU_ID:
        raise SysfsError(r.path(f"{CPU_DIR}/cpu{max(ids)}"), f"CPU id above {MAX_CPU_ID}")
    dirs = CPUSet(ids)
    for key in ("possible", "present", "offline"):
        text = r.text(f"{CPU_DIR}/{key}")
        if text is not None:
            raw_lists[f"cpu_{key}"] = parse_cpulist(text, r.path(f"{CPU_DIR}/{key}")).format()
    text = r.text(f"{CPU_DIR}/online")
    if text is not None:
        listed = parse_cpulist(text, r.path(f"{CPU_DIR}/online"))
        online = listed & dirs  # a CPU the kernel runs has its cpuN directory; the list alone is no CPU
        missing = listed - dirs
        if missing:
            warnings.append(f"online CPUs {missing} have no cpuN directory: not counted")
    else:
        flags = []
        for cpu in dirs:
            flag = r.text(f"{CPU_DIR}/cpu{cpu}/online")
            if flag is None or parse_bool(flag, r.path(f"{CPU_DIR}/cpu{cpu}/online")):
                flags.append(cpu)
        online = CPUSet(flags)
        warnings.append("no cpu/online file: per-CPU online files used (a CPU without one is online)")
    universe = dirs
    if not online:
        raise SysfsError(r.path(CPU_DIR), "no online CPU found")
    raw_lists["cpu_online"] = online.format()
    return universe, online


def _read_cpu(r: Reader, cpu: int) -> _RawCPU:
    base = f"{CPU_DIR}/cpu{cpu}/topology"
    threads = r.cpus(f"{base}/thread_siblings_list", f"{base}/core_cpus_list") or r.cpus_mask(
        f"{base}/thread_siblings", f"{base}/core_cpus"
    )
    return _RawCPU(
        cpu=cpu,
        package=r.integer(f"{base}/physical_package_id"),
        core_id=r.integer(f"{base}/core_id"),
        die=r.integer(f"{base}/die_id"),
        cluster=r.integer(f"{base}/cluster_id"),
        threads=threads,
    )


def _cores(r: Reader, raws: dict[int, _RawCPU], online: CPUSet, warnings: list[str]) -> dict[int, int]:
    """Online CPU → core id (lowest CPU id of its thread-sibling group)."""
    uf = UnionFind()
    by_key: dict[tuple[int | None, ...], int] = {}
    without: list[int] = []
    for cpu in online:
        raw = raws[cpu]
        uf.add(cpu)
        if raw.threads is not None:
            for sibling in raw.threads & online:
                uf.union(cpu, sibling)
        elif raw.core_id is not None:
            key = (raw.package, raw.die, raw.cluster, raw.core_id)
            uf.union(cpu, by_key.setdefault(key, cpu))
            without.append(cpu)
        else:
            without.append(cpu)
    if without:
        warnings.append(
            f"CPUs {CPUSet(without)} have no thread_siblings_list: cores grouped by "
            "(package, die, cluster, core_id), or one core per CPU"
        )
    core = {cpu: uf.find(cpu) for cpu in online}
    groups: dict[int, int] = {}
    for cpu, c in core.items():
        groups[c] = groups.get(c, 0) | (1 << cpu)
    for cpu in online:
        threads = raws[cpu].threads
        if threads is not None and (threads & online).mask != groups[core[cpu]]:
            warnings.append(f"thread sibling lists are not symmetric (e.g. cpu{cpu}): cores merged")
            break
    return core


def _sockets(r: Reader, raws: dict[int, _RawCPU], online: CPUSet, warnings: list[str]) -> dict[int, int]:
    """Online CPU → socket id (``physical_package_id``, or hwloc-style groups where it is -1)."""
    socket: dict[int, int] = {}
    unknown: list[int] = []
    for cpu in online:
        package = raws[cpu].package
        if package is not None and package >= 0:
            socket[cpu] = package
        else:
            unknown.append(cpu)
    if not unknown:
        return socket
    pool = CPUSet(unknown)
    uf = UnionFind()
    lone: list[int] = []
    for cpu in unknown:
        base = f"{CPU_DIR}/cpu{cpu}/topology"
        siblings = r.cpus(f"{base}/core_siblings_list", f"{base}/package_cpus_list") or r.cpus_mask(
            f"{base}/core_siblings", f"{base}/package_cpus"
        )
        uf.add(cpu)
        if siblings is None:
            lone.append(cpu)
        else:
            for sibling in siblings & pool:
                uf.union(cpu, sibling)
    for cpu in lone[1:]:
        uf.union(lone[0], cpu)
    next_id = max(socket.values(), default=-1) + 1
    numbering: dict[int, int] = {}
    for cpu in unknown:
        group = uf.find(cpu)
        if group not in numbering:
            numbering[group] = next_id
            next_id += 1
        socket[cpu] = numbering[group]
    warnings.append(
        f"physical_package_id is -1 or missing for CPUs {pool}: packages grouped by core_siblings_list "
        f"into {len(numbering)} socket(s)"
    )
    return socket


def _uncore(r: Reader, online: CPUSet, warnings: list[str]) -> dict[int, int]:
    """Online CPU → uncore (L3) cache id; see the module docstring."""
    caches: list[tuple[int | None, CPUSet]] = []
    owner: dict[int, int] = {}
    for cpu in online:
        if cpu in owner:
            continue
        index = _l3_index(r, cpu)
        if index is None:
            continue
        cache_id = r.integer(f"{index}/id")
        shared = r.cpus(f"{index}/shared_cpu_list") or r.cpus_mask(f"{index}/shared_cpu_map") or CPUSet()
        members = (shared & online) | CPUSet([cpu]) if shared else CPUSet()
        caches.append((cache_id, members))
        for member in members or CPUSet([cpu]):
            owner.setdefault(member, len(caches) - 1)
    if not caches:
        return {}
    if all(cache_id is not None for cache_id, _ in caches):
        return {cpu: caches[i][0] or 0 for cpu, i in owner.items()}
    if any(not members for _, members in caches):
        warnings.append("L3 caches report neither id nor shared_cpu_list: uncore cache ids set to 0")
        return {}
    return {cpu: caches[i][1].first() for cpu, i in owner.items()}


def _kubelet_visible(
    r: Reader, online: CPUSet, numa: dict[int, int], nodes: list[NodeFacts], warnings: list[str]
) -> tuple[CPUSet, list[NodeFacts]]:
    """The online CPUs and NUMA nodes cAdvisor shows the kubelet: where ``nodeN`` directories exist it
    reads nodes and their CPUs only from them (``GetNodesInfo``), so a CPU no directory lists (its
    node offline, as node 0 of intel-xeon-e5-2680v3-2s-offline-cpu0-node0) is not the kubelet's."""
    dirs = set(node_dir_ids(r))
    if not dirs:
        return online, nodes  # cAdvisor's getCPUTopology: every CPU on node 0, as read_numa does
    unseen = CPUSet(cpu for cpu in online if numa.get(cpu, -1) not in dirs)
    if unseen:
        warnings.append(f"online CPUs {unseen} are in no node directory: the kubelet does not see them (offline here)")
        for cpu in unseen:
            numa.pop(cpu, None)
    return online - unseen, [n for n in nodes if n.id in dirs]


def _kubelet_num_sockets(raws: dict[int, _RawCPU], online: CPUSet) -> int:
    """The kubelet's ``NumSockets``: cAdvisor v0.56.2 ``machine.GetSockets`` (``MachineInfo.NumSockets``,
    copied as is by the kubelet's ``topology.Discover``).

    cAdvisor counts the distinct ``physical id`` lines of ``/proc/cpuinfo`` (regexp
    ``^physical id\\s*:\\s*([0-9]+)$``: a negative id never matches), which lists every CPU the kernel
    has online with its ``physical_package_id``; only when no line matches (ARM, POWER, RISC-V print
    none) does it fall back to ``sysfs.GetUniqueCPUPropertyCount``: the distinct ``physical_package_id``
    of the ``cpuN`` directories ``cpu/online`` lists, a missing file read as ``0``. Either way the count
    is over the kernel's online CPUs, not over the CPUs the node directories list (the NUMA side of
    the kubelet's view, ``NumNUMANodes`` = the nodes with a CPU in ``CPUDetails``): on
    intel-xeon-e5-2680v3-2s-offline-cpu0-node0 (node 0 offline, its online CPUs in no node directory)
    the kubelet counts 2 sockets over 1 NUMA node and so refuses ``align-by-socket``."""
    ids = {package if (package := raws[cpu].package) is not None else 0 for cpu in online}
    listed = {i for i in ids if i >= 0}  # the ids /proc/cpuinfo's regexp matches
    return len(listed) if listed else len(ids)


def _kubelet_cores(
    raws: dict[int, _RawCPU], online: CPUSet, numa: dict[int, int], hwloc: dict[int, int], warnings: list[str]
) -> dict[int, int]:
    """Online CPU → core id as cAdvisor groups threads: (NUMA node, ``core_id``, package); lowest CPU."""
    first: dict[tuple[int, int, int | None], int] = {}
    core: dict[int, int] = {}
    without: list[int] = []
    for cpu in online:  # ascending, so the first CPU of a group is its lowest
        raw = raws[cpu]
        if raw.core_id is None:
            core[cpu] = hwloc[cpu]
            without.append(cpu)
            continue
        core[cpu] = first.setdefault((numa.get(cpu, -1), raw.core_id, raw.package), cpu)
    if without:
        warnings.append(f"CPUs {CPUSet(without)} have no topology/core_id: their cores follow thread siblings")
    return core


def _kubelet_uncore(
    r: Reader, online: CPUSet, numa: dict[int, int], core: dict[int, int], socket: dict[int, int]
) -> dict[int, int]:
    """Online CPU → uncore cache id as the kubelet gets it from cAdvisor (module docstring).

    cAdvisor lists a node's CPUs as ``filepath.Glob`` does (``cpu10`` before ``cpu2``), makes a core at
    its first thread and reads the caches of that thread; the first core whose caches cannot be read
    stops the reading for the rest of the node (``addCacheInfo`` returns its error). A core without an
    uncore cache gets its socket id (the kubelet's ``getUncoreCacheID``)."""
    by_node: dict[int, list[int]] = {}
    for cpu in sorted(online, key=lambda c: f"cpu{c}"):
        by_node.setdefault(numa.get(cpu, -1), []).append(cpu)
    uncore: dict[int, int] = {}
    for cpus in by_node.values():
        threads: dict[int, list[int]] = {}
        for cpu in cpus:
            threads.setdefault(core[cpu], []).append(cpu)
        readable = True
        for members in threads.values():
            cache_id: int | None = None
            if readable:
                caches = _cadvisor_caches(r, members[0])
                if caches is None:
                    readable = False
                else:
                    per_node = len(threads) * len(members)
                    cache_id = next((i for level, i, n in caches if level > 2 and n != per_node), None)
            for cpu in members:
                uncore[cpu] = socket[members[0]] if cache_id is None else cache_id
    return uncore


def _cadvisor_caches(r: Reader, cpu: int) -> list[tuple[int, int, int]] | None:
    """``(level, id, CPUs sharing it)`` of each ``cache/index*`` of ``cpu`` in name order, as cAdvisor
    v0.56.2 ``GetCacheInfo`` reads them; ``None`` where it fails: a missing folder, or an index without
    a readable ``id``, ``size`` (``<n>K``), ``level``, ``type`` or ``shared_cpu_map`` (on every
    architecture but s390x cAdvisor needs the ``id`` file, which older kernels and ARM lack)."""
    base = f"{CPU_DIR}/cpu{cpu}/cache"
    names = r.listdir(base)
    if names is None:
        return None
    out = []
    for name in sorted(n for n in names if n.startswith("index")):
        where = f"{base}/{name}"
        cache_id = _leading_int(r.text(f"{where}/id"))
        size = r.text(f"{where}/size")
        level = _leading_int(r.text(f"{where}/level"))
        shared = r.text(f"{where}/shared_cpu_map")
        if (
            cache_id is None
            or level is None
            or size is None
            or not re.match(r"\s*[0-9]+K", size)
            or r.text(f"{where}/type") is None
            or shared is None
        ):
            return None
        try:
            count = sum(int(chunk.strip(), 16).bit_count() for chunk in shared.split(","))
        except ValueError:
            return None
        out.append((level, cache_id, count))
    return out


def _leading_int(text: str | None) -> int | None:
    """Go's ``fmt.Sscanf(text, "%d")``: the leading integer, ``None`` when there is none."""
    if text is None:
        return None
    m = re.match(r"\s*([+-]?[0-9]+)", text)
    return int(m.group(1)) if m else None


def _l3_index(r: Reader, cpu: int) -> str | None:
    base = f"{CPU_DIR}/cpu{cpu}/cache"
    names = r.listdir(base)
    if not names:
        return None
    indexes = sorted(
        (int(m.group(2)) for m in map(_NUMBERED.match, names) if m and m.group(1) == "index"), reverse=True
    )
    for i in indexes:
        if r.integer(f"{base}/index{i}/level") == 3:
            return f"{base}/index{i}"
    return None


def _core_types(r: Reader) -> dict[int, str]:
    types: dict[int, str] = {}
    for kind, label in (("cpu_atom", "E"), ("cpu_core", "P")):
        cpus = r.cpus(f"sys/devices/{kind}/cpus")
        for cpu in cpus or ():
            types[cpu] = label
    return types


# -- PCI ------------------------------------------------------------------------------------------
def _pci_devices(r: Reader) -> tuple[PCIDevice, ...]:
    names = r.listdir(PCI_DIR)
    devices: list[PCIDevice] = []
    for address in sorted(names or ()):
        base = f"{PCI_DIR}/{address}"
        if not r.is_dir(base):
            continue  # a link into a part of the tree the capture dropped
        numa = r.integer(f"{base}/numa_node")
        devices.append(
            PCIDevice(
                address=address,
                vendor=r.hex_id(f"{base}/vendor"),
                device=r.hex_id(f"{base}/device"),
                class_code=r.hex_id(f"{base}/class"),
                numa_node=numa if numa is not None and numa >= 0 else -1,
                driver=r.link_name(f"{base}/driver"),
                sriov_totalvfs=r.integer(f"{base}/sriov_totalvfs"),
                physfn=r.link_name(f"{base}/physfn"),
            )
        )
    return tuple(devices)


def _hostname(r: Reader) -> str:
    text = r.text("proc/sys/kernel/hostname")
    return text.strip() if text and text.strip() else "localhost"


class UnionFind:
    """Disjoint sets of ints whose representative is always the smallest member."""

    __slots__ = ("_parent",)

    def __init__(self) -> None:
        self._parent: dict[int, int] = {}

    def add(self, x: int) -> None:
        self._parent.setdefault(x, x)

    def find(self, x: int) -> int:
        parent = self._parent
        root = parent.setdefault(x, x)
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            lo, hi = (ra, rb) if ra < rb else (rb, ra)
            self._parent[hi] = lo
