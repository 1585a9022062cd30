"""NUMA nodes for sysfs discovery: CPU membership, memory, hugepages and distances.

The rules (trust ``cpulist`` over ``cpumap``, ``cpuN/nodeM`` links, offline nodes, distance row
mapping, a machine without a node directory) are documented in ``topology/sysfs.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from numaplane.topology.cpuset import CPUSet
from numaplane.topology.model import HugePages
from numaplane.topology.sysfs_parse import (
    parse_cpulist,
    parse_distances,
    parse_hugepage_size,
    parse_meminfo,
)
from numaplane.topology.sysfs_reader import Reader

__all__ = ["NodeFacts", "node_dir_ids", "read_numa"]

NODE_DIR = "sys/devices/system/node"
CPU_DIR = "sys/devices/system/cpu"
_NODE = re.compile(r"node([0-9]+)\Z")


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """One NUMA node as sysfs describes it (CPUs are assigned separately). Sizes in bytes."""

    id: int
    online: bool
    memory_total_bytes: int
    memory_free_bytes: int | None
    hugepages: tuple[HugePages, ...]
    distances: dict[int, int]


def _node_ids(names: Iterable[str]) -> list[int]:
    return sorted(int(m.group(1)) for m in map(_NODE.match, names) if m)


def node_dir_ids(r: Reader) -> list[int]:
    """The ids of the ``nodeN`` directories (ascending; empty without ``sys/devices/system/node``)."""
    return _node_ids(r.listdir(NODE_DIR) or ())


def read_numa(
    r: Reader, universe: CPUSet, online: CPUSet, warnings: list[str], raw_lists: dict[str, str]
) -> tuple[dict[int, int], list[NodeFacts]]:
    """CPU → node id for every CPU whose node is known, and the nodes to model (ascending ids)."""
    names = r.listdir(NODE_DIR)
    if names is None:
        warnings.append("no sys/devices/system/node (kernel without NUMA): one node 0 holds every CPU")
        return dict.fromkeys(universe, 0), [_node_from_proc(r, warnings)]
    dirs = _node_ids(names)
    lists: dict[str, CPUSet] = {}
    for key in ("online", "possible", "has_cpu", "has_memory", "has_normal_memory"):
        text = r.text(f"{NODE_DIR}/{key}")
        if text is not None:
            lists[key] = parse_cpulist(text, r.path(f"{NODE_DIR}/{key}"))
            raw_lists[f"node_{key}"] = lists[key].format()
    numa: dict[int, int] = {}
    claimed_twice = CPUSet()
    for nid in dirs:
        for cpu in _node_cpus(r, nid, universe, warnings) & universe:
            if cpu in numa:
                claimed_twice |= CPUSet([cpu])
            else:
                numa[cpu] = nid
    if claimed_twice:
        warnings.append(f"CPUs {claimed_twice} are listed by several nodes: the lowest node id kept")
    for cpu in universe:
        if cpu not in numa:
            linked = _node_ids(r.listdir(f"{CPU_DIR}/cpu{cpu}") or ())
            if linked:
                numa[cpu] = linked[0]
    orphans = CPUSet(cpu for cpu in online if cpu not in numa)
    if orphans:
        if not dirs:
            target, why = 0, "there is no node directory"
        else:
            absent = [n for n in lists.get("possible", CPUSet()) if n not in dirs]
            if absent:
                target, why = absent[0], f"node{absent[0]} is possible but offline (no directory)"
            else:
                target, why = dirs[0], "it is the lowest node"
        warnings.append(f"online CPUs {orphans} are in no node's cpulist: assigned to node {target} ({why})")
        for cpu in orphans:
            numa[cpu] = target
    node_ids = sorted(set(dirs) | {numa[cpu] for cpu in online})
    online_nodes = lists.get("online")
    order_candidates = [
        ("node/online", sorted(online_nodes) if online_nodes is not None else None),
        ("the node directories", dirs),
        ("node/possible", sorted(lists["possible"]) if "possible" in lists else None),
    ]
    nodes = []
    no_meminfo: list[int] = []
    for nid in node_ids:
        has_dir = nid in dirs
        is_online = nid in online_nodes if online_nodes is not None else has_dir
        if not has_dir:
            nodes.append(NodeFacts(nid, is_online, 0, None, (), {}))
            continue
        base = f"{NODE_DIR}/node{nid}"
        text = r.text(f"{base}/meminfo")
        total, free = 0, None
        if text is None:
            no_meminfo.append(nid)
        else:
            info = parse_meminfo(text, r.path(f"{base}/meminfo"))
            total, free = info.get("MemTotal", 0), info.get("MemFree")
        nodes.append(
            NodeFacts(nid, is_online, total, free, _hugepages(r, base), _distances(r, nid, order_candidates, warnings))
        )
    if no_meminfo:
        warnings.append(f"no meminfo for node(s) {CPUSet(no_meminfo)}: memory size unknown (0)")
    return numa, nodes


def _node_cpus(r: Reader, nid: int, universe: CPUSet, warnings: list[str]) -> CPUSet:
    base = f"{NODE_DIR}/node{nid}"
    listed = r.cpus(f"{base}/cpulist")
    mapped = r.cpus_mask(f"{base}/cpumap")
    if listed is not None and mapped is not None and listed != mapped:
        agree = (listed & universe) == (mapped & universe)
        warnings.append(
            f"node{nid}: cpulist {listed} and cpumap {mapped} disagree; cpulist trusted"
            + (" (they agree on the CPUs that exist)" if agree else "")
        )
    if listed is not None:
        return listed
    if mapped is not None:
        return mapped
    warnings.append(f"node{nid} has neither cpulist nor cpumap: its CPUs come from cpuN/nodeM links")
    return CPUSet()


def _distances(
    r: Reader, nid: int, candidates: list[tuple[str, list[int] | None]], warnings: list[str]
) -> dict[int, int]:
    rel = f"{NODE_DIR}/node{nid}/distance"
    text = r.text(rel)
    if text is None:
        return {}
    values = parse_distances(text, r.path(rel))
    expected = next(label for label, ids in candidates if ids is not None)
    for label, ids in candidates:
        if ids is not None and len(ids) == len(values):
            if label != expected:
                warnings.append(f"node{nid}/distance has {len(values)} values: mapped onto {label}")
            return dict(zip(ids, values, strict=True))
    warnings.append(f"node{nid}/distance has {len(values)} values, matching no node list: ignored")
    return {}


def _hugepages(r: Reader, base: str) -> tuple[HugePages, ...]:
    names = r.listdir(f"{base}/hugepages")
    pages = []
    for name in sorted(names or ()):
        where = f"{base}/hugepages/{name}"
        if not r.is_dir(where):
            continue
        size = parse_hugepage_size(name, r.path(where))
        total = r.integer(f"{where}/nr_hugepages")
        if total is None:
            continue
        pages.append(HugePages(size, total, r.integer(f"{where}/free_hugepages")))
    return tuple(sorted(pages, key=lambda h: h.page_size_bytes))


def _node_from_proc(r: Reader, warnings: list[str]) -> NodeFacts:
    """Node 0 of a machine without NUMA support: ``proc/meminfo`` and the global hugepage pools."""
    text = r.text("proc/meminfo")
    total, free = 0, None
    if text is None:
        warnings.append("no proc/meminfo either: memory size unknown (0)")
    else:
        info = parse_meminfo(text, r.path("proc/meminfo"))
        total, free = info.get("MemTotal", 0), info.get("MemFree")
    return NodeFacts(0, True, total, free, _hugepages(r, "sys/kernel/mm"), {0: 10})
