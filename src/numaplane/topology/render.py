"""Render a :class:`Topology` for people and programs (an adapter: only the CLI and tools import it).

Formats:

* ``json`` / ``yaml``: :func:`~numaplane.topology.document.topology_document` (the topology document
  with camelCase keys under ``apiVersion``/``kind``), which reads back with :func:`~numaplane.topology.document.topology_from_dict`
  (``numaplane topology --from FILE``, ``--topology FILE``) and gives the same document;
* ``table``: rich tables — a summary, one row per NUMA node (CPUs, cores, memory, hugepages,
  devices), the distance matrix, one row per socket, and discovery warnings;
* ``svg`` / ``png``: an lstopo-like picture (``topology/render_picture.py``, matplotlib Agg, loaded
  only when a picture is asked for).

Units shown: memory in GiB (2**30 bytes) with one decimal; hugepages as ``<size>: total (free)``.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Mapping
from typing import Literal

import yaml
from rich import box
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from numaplane.topology.cpuset import CPUSet
from numaplane.topology.document import topology_document
from numaplane.topology.model import HugePages, PCIDevice, Topology

__all__ = [
    "FORMATS",
    "OutputFormat",
    "device_summary",
    "gib",
    "hugepages_text",
    "render",
    "render_table",
    "table_renderables",
    "to_json",
    "to_yaml",
]

OutputFormat = Literal["table", "json", "yaml", "svg", "png"]
FORMATS: tuple[OutputFormat, ...] = ("table", "json", "yaml", "svg", "png")

# PCI class (first 4 hex digits, else first 2) → short name; classes not listed are not "notable".
PCI_CLASSES: Mapping[str, str] = {
    "0100": "SCSI",
    "0101": "IDE",
    "0104": "RAID",
    "0106": "SATA",
    "0107": "SAS",
    "0108": "NVMe",
    "0200": "Ethernet",
    "0207": "InfiniBand",
    "0280": "Network",
    "0300": "VGA",
    "0302": "3D",
    "0380": "Display",
    "0b40": "Coprocessor",
    "0c04": "FibreChannel",
    "0c06": "InfiniBand",
    "1200": "Accelerator",
    "01": "Storage",
    "02": "Network",
    "03": "Display",
    "0b": "Processor",
    "12": "Accelerator",
}


def gib(n_bytes: int) -> str:
    """``n_bytes`` in GiB with one decimal (``"125.4 GiB"``)."""
    return f"{n_bytes / (1 << 30):.1f} GiB"


def to_json(topology: Topology) -> str:
    """The topology document as indented JSON (ends with a newline)."""
    return json.dumps(topology_document(topology), indent=2) + "\n"


def to_yaml(topology: Topology) -> str:
    """The topology document as YAML, keys in document order."""
    return yaml.safe_dump(topology_document(topology), sort_keys=False, width=120)


def render(topology: Topology, fmt: OutputFormat) -> bytes:
    """The topology in ``fmt`` as bytes (UTF-8 for the text formats)."""
    if fmt == "json":
        return to_json(topology).encode()
    if fmt == "yaml":
        return to_yaml(topology).encode()
    if fmt == "table":
        return render_table(topology).encode()
    if fmt in ("svg", "png"):
        from numaplane.topology.render_picture import render_picture

        return render_picture(topology, fmt)
    raise ValueError(f"unknown output format {fmt!r}; expected one of {', '.join(FORMATS)}")


def render_table(topology: Topology, width: int = 140) -> str:
    """The tables as plain text (no colour)."""
    console = Console(
        file=io.StringIO(), width=width, color_system=None, force_terminal=False, markup=False, highlight=False
    )
    for renderable in table_renderables(topology):
        console.print(renderable)
    output = console.file
    assert isinstance(output, io.StringIO)
    return output.getvalue()


def hugepages_text(pages: Iterable[HugePages], *, skip_empty: bool = True) -> str:
    """``"2Mi: 128 (128 free), 1Gi: 4"`` (pools of 0 pages left out unless ``skip_empty`` is false)."""
    parts = []
    for h in pages:
        if skip_empty and h.total == 0:
            continue
        size = h.resource_name.removeprefix("hugepages-")
        parts.append(f"{size}: {h.total}" + (f" ({h.free} free)" if h.free is not None else ""))
    return ", ".join(parts)


def pci_class_name(class_code: str) -> str | None:
    """A short name for notable PCI classes (network, storage, display, accelerators), else None."""
    return PCI_CLASSES.get(class_code[:4]) or PCI_CLASSES.get(class_code[:2])


def device_summary(devices: Iterable[PCIDevice]) -> list[tuple[int, str]]:
    """Notable devices grouped as ``(count, "Ethernet 8086:159b ice")``, most common first."""
    counts: dict[str, int] = {}
    for d in devices:
        name = pci_class_name(d.class_code)
        if name is None:
            continue
        label = name + (f" {d.vendor}:{d.device}" if d.vendor or d.device else "")
        label += f" {d.driver}" if d.driver else ""
        if d.sriov_totalvfs:
            label += f" sriov≤{d.sriov_totalvfs}"
        counts[label] = counts.get(label, 0) + 1
    return sorted(((n, label) for label, n in counts.items()), key=lambda item: (-item[0], item[1]))


def table_renderables(topology: Topology) -> list[RenderableType]:
    """Summary, NUMA nodes, devices, distances, sockets and warnings, as rich renderables."""
    out: list[RenderableType] = [_summary(topology), _heading("NUMA nodes"), _numa_table(topology)]
    if topology.pci_devices:
        out += [_heading("PCI devices by NUMA node (network, storage, display, accelerators)"), _device_table(topology)]
    distances = _distance_table(topology)
    if distances is not None:
        out += [_heading("NUMA distances (10 = local)"), distances]
    out += [_heading("Sockets"), _socket_table(topology)]
    warnings = topology.attributes.get("warnings")
    if isinstance(warnings, list) and warnings:
        out += [_heading("Discovery warnings"), _warning_table([str(w) for w in warnings])]
    return out


def _heading(text: str) -> Text:
    return Text(f"\n{text}", style="bold")


def _table(*columns: str, wrap: tuple[str, ...] = ()) -> Table:
    """A table whose ``wrap`` columns share the spare width and wrap; the others never wrap."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for name in columns:
        if name in wrap:
            table.add_column(name, overflow="fold", min_width=10, ratio=1)
        else:
            table.add_column(name, no_wrap=True, justify="right" if name in _NUMERIC or name.isdigit() else "left")
    return table


_NUMERIC = frozenset({"#", "Cores", "PCI", "Functions", "Threads/core", "L3", "Memory", "Free"})


def _cpus(cpus: CPUSet) -> str:
    """A cpuset with a space after each comma, so long lists wrap between ids."""
    return cpus.format().replace(",", ", ") or "-"


def _summary(t: Topology) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    table.add_row("Machine", t.name or "(unnamed)")
    offline = t.offline_cpus
    table.add_row("CPUs", f"{t.num_cpus} online ({t.all_cpus})" + (f", offline {offline}" if offline else ""))
    table.add_row("Cores", f"{t.num_cores}, up to {t.threads_per_core} thread(s) per core")
    table.add_row("Sockets", f"{t.num_sockets} (ids {', '.join(map(str, t.socket_ids))})")
    cpu_less = [n.id for n in t.numa_nodes if n.cpu_less]
    nodes = f"{t.num_numa_nodes} with CPUs (ids {', '.join(map(str, t.numa_ids))})"
    if cpu_less:
        nodes += f", {len(cpu_less)} without CPUs (ids {', '.join(map(str, cpu_less))})"
    table.add_row("NUMA nodes", nodes)
    table.add_row("Uncore (L3) caches", str(t.num_uncore_caches))
    total = sum(n.memory_total_bytes for n in t.numa_nodes)
    table.add_row("Memory", gib(total) if total else "unknown")
    if t.isolated_cpus:
        table.add_row("Isolated CPUs", t.isolated_cpus.format())
    for kind in sorted({c.core_type for c in t.online_cpus if c.core_type}):
        cpus = CPUSet(c.cpu for c in t.online_cpus if c.core_type == kind)
        table.add_row(f"{kind}-core CPUs", cpus.format())
    if t.pci_devices:
        affine = sum(1 for d in t.pci_devices if d.numa_affine)
        table.add_row("PCI functions", f"{len(t.pci_devices)} ({affine} with a NUMA node)")
    if t.source:
        table.add_row("Source", t.source)
    return table


def _numa_table(t: Topology) -> Table:
    table = _table(
        "Node", "CPUs", "#", "Cores", "Sockets", "Memory", "Free", "Hugepages", "PCI", wrap=("CPUs", "Hugepages")
    )
    pci: dict[int, int] = {}
    for d in t.pci_devices:
        pci[d.numa_node] = pci.get(d.numa_node, 0) + 1
    for node in t.numa_nodes:
        infos = [t.cpu_info[c] for c in node.cpus]
        table.add_row(
            str(node.id) + ("" if node.online else " (offline)"),
            _cpus(node.cpus),
            str(len(node.cpus)),
            str(len({c.core for c in infos})),
            ",".join(str(s) for s in sorted({c.socket for c in infos})) or "-",
            gib(node.memory_total_bytes) if node.memory_total_bytes else "?",
            gib(node.memory_free_bytes) if node.memory_free_bytes is not None else "?",
            hugepages_text(node.hugepages) or "-",
            str(pci.get(node.id, 0)),
        )
    return table


def _device_table(t: Topology) -> Table:
    table = _table("Node", "Functions", "Notable devices", wrap=("Notable devices",))
    by_numa: dict[int, list[PCIDevice]] = {}
    for d in t.pci_devices:
        by_numa.setdefault(d.numa_node, []).append(d)
    for nid in sorted(by_numa, key=lambda n: (n < 0, n)):
        devices = by_numa[nid]
        notable = "\n".join(f"{n}× {label}" for n, label in device_summary(devices))
        table.add_row(str(nid) if nid >= 0 else "none", str(len(devices)), notable or "-")
    return table


def _distance_table(t: Topology) -> Table | None:
    if not any(n.distances for n in t.numa_nodes):
        return None
    ids = [n.id for n in t.numa_nodes]
    table = _table("from \\ to", *map(str, ids))
    for node in t.numa_nodes:
        table.add_row(str(node.id), *(str(node.distances[j]) if j in node.distances else "-" for j in ids))
    return table


def _socket_table(t: Topology) -> Table:
    table = _table("Socket", "Raw id", "CPUs", "#", "Cores", "Threads/core", "NUMA nodes", "L3", wrap=("CPUs",))
    for sid, cpus in t.cpus_by_socket.items():
        infos = [t.cpu_info[c] for c in cpus]
        cores: dict[int, int] = {}
        for c in infos:
            cores[c.core] = cores.get(c.core, 0) + 1
        raw = {c.raw_socket_id for c in infos if c.raw_socket_id is not None}
        table.add_row(
            str(sid),
            ",".join(map(str, sorted(raw))) or str(sid),
            _cpus(cpus),
            str(len(cpus)),
            str(len(cores)),
            str(max(cores.values())),
            ",".join(str(n) for n in sorted({c.numa for c in infos})),
            str(len({c.uncore for c in infos})),
        )
    return table


def _warning_table(warnings: list[str]) -> Table:
    table = Table.grid()
    table.add_column(overflow="fold")
    for w in warnings:
        table.add_row(f"• {w}")
    return table
