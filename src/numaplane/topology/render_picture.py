"""An lstopo-like picture of a :class:`Topology` (SVG or PNG, drawn with matplotlib's Agg backend).

Nesting: machine → packages (sockets) → NUMA nodes → L3 groups (only where one NUMA node holds
several L3 caches) → cores → threads (PUs, labelled with the CPU id). Where a NUMA node spans
several packages (x7550: node 0 = packages 0 and 1) the node box holds the packages instead, and a
many-to-many tangle gets a group box. NUMA boxes carry memory, hugepages and their notable PCI
devices; CPU-less nodes sit next to the package they are nearest to (by distance) or in a
machine-level row; offline CPUs (grey) and devices without NUMA affinity get machine-level boxes.

Sizes are in inches; every thread cell has the same size whatever the machine, and containers
choose their number of columns to keep a sane aspect ratio, so 256-thread machines stay readable
(the figure grows instead of the text shrinking). PNG resolution is capped at about 5000 pixels.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from numaplane.topology.cpuset import CPUSet
from numaplane.topology.model import CPUInfo, NUMANode, PCIDevice, Topology
from numaplane.topology.render import device_summary, gib, hugepages_text
from numaplane.topology.render_layout import Box, layout

__all__ = ["build_boxes", "render_picture"]

MAX_DEVICE_LINES = 8
COLORS = {
    "machine": ("#FFFFFF", "#000000"),
    "group": ("#EEEEEE", "#555555"),
    "package": ("#D9D9D9", "#333333"),
    "numa": ("#D4E8B0", "#4F6B2A"),
    "memnode": ("#E8F3D6", "#4F6B2A"),
    "l3": ("#F4F4F4", "#777777"),
    "core": ("#BEBEBE", "#555555"),
    "pu": ("#FFFFFF", "#333333"),
    "pu-e": ("#DCEBFA", "#2F5D8A"),
    "pu-off": ("#A6A6A6", "#7A7A7A"),
    "offline": ("#EFEFEF", "#7A7A7A"),
    "devices": ("#FFF3D1", "#9C7A1E"),
    "legend": ("#FFFFFF", "#FFFFFF"),
    "grid": ("#FFFFFF", "#FFFFFF"),
}
ISOLATED_EDGE = "#D9480F"


def render_picture(topology: Topology, fmt: Literal["svg", "png"]) -> bytes:
    """The picture as SVG text (UTF-8) or PNG bytes."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyBboxPatch

    root = build_boxes(topology)
    layout(root)
    fig = Figure(figsize=(root.w, root.h))
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
    ax.set_xlim(0, root.w)
    ax.set_ylim(root.h, 0)
    ax.set_axis_off()
    for b in root.walk():
        face, edge = COLORS[b.kind]
        width = 1.6 if b.isolated else (1.0 if b.kind in ("machine", "package", "numa") else 0.6)
        if b.kind not in ("legend", "grid"):
            ax.add_patch(
                FancyBboxPatch(
                    (b.x, b.y),
                    b.w,
                    b.h,
                    boxstyle="round,pad=0,rounding_size=0.025",
                    facecolor=face,
                    edgecolor=ISOLATED_EDGE if b.isolated else edge,
                    linewidth=width,
                )
            )
        for i, (text, size, bold) in enumerate(b.header()):
            ax.text(
                b.x + b.pad,
                b.y + b.pad + i * b.line_h,
                text,
                fontsize=size,
                va="top",
                ha="left",
                fontweight="bold" if bold else "normal",
                color="#555555" if b.kind == "legend" else "#000000",
            )
        if b.label:
            ax.text(
                b.x + b.w / 2,
                b.y + b.h / 2,
                b.label,
                fontsize=b.font,
                va="center",
                ha="center",
                color="#3A3A3A" if b.kind == "pu-off" else "#000000",
            )
    out = io.BytesIO()
    if fmt == "svg":
        with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "numaplane"}):
            fig.savefig(out, format="svg", metadata={"Date": None})
    else:
        dpi = max(60.0, min(150.0, 5000.0 / max(root.w, root.h)))
        fig.savefig(out, format="png", dpi=dpi, metadata={"Software": None})
    return out.getvalue()


# -- the box tree -----------------------------------------------------------------------------------
@dataclass
class _Context:
    topology: Topology
    isolated: CPUSet
    by_numa: dict[int, list[PCIDevice]] = field(default_factory=dict)


def build_boxes(t: Topology) -> Box:
    """The box tree (not yet laid out) for ``t``."""
    ctx = _Context(t, t.isolated_cpus)
    for d in t.pci_devices:
        ctx.by_numa.setdefault(d.numa_node, []).append(d)
    total = sum(n.memory_total_bytes for n in t.numa_nodes)
    title = f"Machine {t.name}" if t.name else "Machine"
    facts = (
        f"{t.num_cpus} CPUs · {t.num_cores} cores · {t.num_sockets} socket(s) · "
        f"{len(t.memory_numa_ids)} NUMA node(s)" + (f" · {gib(total)}" if total else "")
    )
    machine = Box("machine", [title, facts], max_cols=1)
    main = Box("grid", [], target=1.5, pad=0.0)
    machine.children.append(main)
    cpu_less = [n for n in t.numa_nodes if n.cpu_less]
    placed_memory: set[int] = set()
    for sockets, nodes in _components(t):
        near = [n for n in cpu_less if _nearest(t, n) in nodes]
        placed_memory.update(n.id for n in near)
        main.children.append(_component_box(ctx, sockets, nodes, near))
    rest = [n for n in cpu_less if n.id not in placed_memory]
    if rest:
        row = Box("group", ["Memory-only NUMA nodes"], target=4.0)
        row.children = [_memory_node_box(ctx, n) for n in rest]
        machine.children.append(row)
    offline = [c for c in t.cpus if not c.online]
    if offline:
        box = Box("offline", [f"Offline CPUs ({len(offline)})"], target=3.0)
        box.children = [_pu_box(ctx, c) for c in offline]
        machine.children.append(box)
    unaffine = ctx.by_numa.get(-1, [])
    if unaffine:
        machine.children.append(_devices_box(unaffine, "PCI without NUMA affinity"))
    machine.children.append(_legend(t, offline))
    return machine


def _components(t: Topology) -> list[tuple[list[int], list[int]]]:
    """Groups of (sockets, NUMA nodes) linked by shared CPUs, in order of their lowest CPU."""
    parent: dict[tuple[str, int], tuple[str, int]] = {}

    def find(x: tuple[str, int]) -> tuple[str, int]:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    first: dict[tuple[str, int], int] = {}
    for c in t.online_cpus:
        a, b = find(("s", c.socket)), find(("n", c.numa))
        if a != b:
            parent[b] = a
    for c in t.online_cpus:
        root = find(("s", c.socket))
        first[root] = min(first.get(root, c.cpu), c.cpu)
    groups: dict[tuple[str, int], tuple[set[int], set[int]]] = {}
    for key in list(parent):
        sockets, nodes = groups.setdefault(find(key), (set(), set()))
        (sockets if key[0] == "s" else nodes).add(key[1])
    return [(sorted(s), sorted(n)) for root, (s, n) in sorted(groups.items(), key=lambda kv: first[kv[0]])]


def _nearest(t: Topology, node: NUMANode) -> int | None:
    """The CPU node strictly nearest to a CPU-less node, or None when there is a tie or no data."""
    cpu_nodes = [nid for nid in t.numa_ids if nid in node.distances]
    if not cpu_nodes:
        return None
    best = min(node.distances[n] for n in cpu_nodes)
    winners = [n for n in cpu_nodes if node.distances[n] == best]
    return winners[0] if len(winners) == 1 else None


def _component_box(ctx: _Context, sockets: list[int], nodes: list[int], memory: list[NUMANode]) -> Box:
    t = ctx.topology
    if len(sockets) == 1:
        outer = Box("package", [_package_title(t, sockets[0])], target=2.0)
        for nid in nodes:
            outer.children.append(
                _numa_box(ctx, nid, [c for c in t.online_cpus if c.numa == nid and c.socket == sockets[0]])
            )
    elif len(nodes) == 1:
        outer = _numa_box(ctx, nodes[0], [], target=2.0)
        for sid in sockets:
            pkg = Box("package", [_package_title(t, sid)], target=1.6)
            pkg.children = _cpu_boxes(ctx, [c for c in t.online_cpus if c.socket == sid and c.numa == nodes[0]])
            outer.children.append(pkg)
    else:
        outer = Box("group", [f"Packages {_ids(sockets)} sharing NUMA nodes {_ids(nodes)}"], target=2.0)
        for sid in sockets:
            pkg = Box("package", [_package_title(t, sid)], target=2.0)
            for nid in nodes:
                cpus = [c for c in t.online_cpus if c.socket == sid and c.numa == nid]
                if cpus:
                    pkg.children.append(_numa_box(ctx, nid, cpus))
            outer.children.append(pkg)
    outer.children.extend(_memory_node_box(ctx, n) for n in memory)
    return outer


def _package_title(t: Topology, sid: int) -> str:
    raw = {c.raw_socket_id for c in t.online_cpus if c.socket == sid and c.raw_socket_id is not None}
    return f"Package {sid}" + (f" (raw id {_ids(sorted(raw))})" if raw else "")


def _numa_box(ctx: _Context, nid: int, cpus: list[CPUInfo], target: float = 1.6) -> Box:
    node = ctx.topology.numa_by_id.get(nid)
    lines = [f"NUMA node {nid}" + ("" if node is None or node.online else " (offline)")]
    if node is not None:
        lines.extend(_memory_lines(node))
    box = Box("numa", lines, target=target)
    box.children = _cpu_boxes(ctx, cpus)
    devices = ctx.by_numa.get(nid, [])
    if devices:
        # cores in their own (invisible) grid so the device list does not widen a grid column
        grid = Box("grid", [], children=box.children, target=target, pad=0.0)
        box.children = [grid, _devices_box(devices, "PCI")] if box.children else [_devices_box(devices, "PCI")]
        box.max_cols = 1
    return box


def _memory_lines(node: NUMANode) -> list[str]:
    if node.memory_total_bytes:
        free = f", {gib(node.memory_free_bytes)} free" if node.memory_free_bytes is not None else ""
        lines = [f"{gib(node.memory_total_bytes)}{free}"]
    else:
        lines = ["memory size unknown"]
    pages = hugepages_text(node.hugepages)
    if pages:
        lines.append(f"hugepages {pages}")
    return lines


def _memory_node_box(ctx: _Context, node: NUMANode) -> Box:
    box = Box("memnode", [f"NUMA node {node.id} (no CPUs)", *_memory_lines(node)], target=1.0)
    devices = ctx.by_numa.get(node.id, [])
    if devices:
        box.children.append(_devices_box(devices, "PCI"))
    return box


def _cpu_boxes(ctx: _Context, cpus: list[CPUInfo]) -> list[Box]:
    """Core boxes, grouped by core type on hybrid parts and into L3 boxes when these CPUs span
    several uncore caches."""
    types = sorted({c.core_type or "" for c in cpus}, key=lambda k: {"P": 0, "E": 1}.get(k, 2))
    if len(types) > 1:
        groups = []
        for kind in types:
            group = Box("l3", [f"{kind}-cores" if kind else "other cores"], target=1.6)
            group.children = _cpu_boxes(ctx, [c for c in cpus if (c.core_type or "") == kind])
            groups.append(group)
        return groups
    cores: dict[int, list[CPUInfo]] = {}
    for c in cpus:
        cores.setdefault(c.core, []).append(c)
    core_boxes = {cid: _core_box(ctx, members) for cid, members in sorted(cores.items())}
    uncores: dict[int, list[int]] = {}
    for cid, members in sorted(cores.items()):
        uncores.setdefault(members[0].uncore, []).append(cid)
    if len(uncores) <= 1 or all(len(v) == 1 for v in uncores.values()):
        return list(core_boxes.values())
    out = []
    for uid, cids in uncores.items():
        l3 = Box("l3", [f"L3 #{uid}"], target=1.6)
        l3.children = [core_boxes[cid] for cid in cids]
        out.append(l3)
    return out


def _core_box(ctx: _Context, members: list[CPUInfo]) -> Box:
    box = Box("core", [], target=4.0, max_cols=4, pad=0.035, gap=0.025)
    box.children = [_pu_box(ctx, c) for c in sorted(members, key=lambda c: c.cpu)]
    return box


def _pu_box(ctx: _Context, c: CPUInfo) -> Box:
    kind = "pu-off" if not c.online else ("pu-e" if c.core_type == "E" else "pu")
    return Box(kind, [], leaf=(0.34, 0.24), label=str(c.cpu), isolated=c.cpu in ctx.isolated)


def _devices_box(devices: list[PCIDevice], title: str) -> Box:
    summary = device_summary(devices)
    lines = [f"{title}: {len(devices)} function(s)"]
    lines += [f"{n}× {label}" for n, label in summary[:MAX_DEVICE_LINES]]
    hidden = sum(n for n, _ in summary[MAX_DEVICE_LINES:])
    if hidden:
        lines.append(f"… {hidden} more notable")
    return Box("devices", lines, bold_first=True)


def _legend(t: Topology, offline: list[CPUInfo]) -> Box:
    items = ["white cell = thread (logical CPU id)", "grey box = core"]
    if offline:
        items.append("dark grey cell = offline CPU")
    if t.isolated_cpus:
        items.append("orange border = isolated CPU")
    if any(c.core_type == "E" for c in t.cpus):
        items.append("blue cell = efficiency (E) core")
    return Box("legend", [" · ".join(items)], bold_first=False, pad=0.02)


def _ids(values: Iterable[int]) -> str:
    return ",".join(str(v) for v in values)
