"""The cluster snapshot format (``numaplane snapshot`` writes it, ``numaplane simulate --from`` reads it).

One YAML document, ``apiVersion: numaplane.io/v1``, ``kind: ClusterSnapshot``::

    apiVersion: numaplane.io/v1
    kind: ClusterSnapshot
    metadata: {capturedAt: "2026-12-01T16:00:00Z", source: "https://10.0.0.1:6443", tool: "numaplane 0.x"}
    nodes:                      # one Node per item, reduced (reduce_node)
    - {"name": "w1", "labels": {...}, "taints": [...], "unschedulable": false,
       "capacity": {"cpu": "64", ...}, "allocatable": {"cpu": "62", ...}}
    nodeResourceTopologies:     # one NRT per item, reduced (reduce_nrt)
    - {"name": "w1", "attributes": [...], "topologyPolicies": [...], "zones": [...],
       "policy": {"topologyManagerPolicy": "single-numa-node", "topologyManagerScope": "container"}}
    pods:                       # bound and pending pods, reduced to core/v1 Pod shape (reduce_pod)
    - {"metadata": {...}, "spec": {...}, "status": {"phase": "Running", "qosClass": "Guaranteed"}}
    summary: {nodes: 1, nodeResourceTopologies: 1, pods: 1, boundPods: 1, pendingPods: 0}

Invariants:

* Each list item is written on one line as JSON (JSON is YAML's flow syntax), so the file is YAML
  for any tool and a reader can stream it line by line (:func:`read_snapshot` does, falling back to
  a full YAML parse for hand-edited files). The writer holds one item at a time.
* Pod specs keep only what placement and admission need: containers' and init containers' names,
  ``resources`` and ``restartPolicy``; pod ``overhead`` and ``resources``; ``nodeName``,
  ``schedulerName``, ``priority``, ``nodeSelector``, ``tolerations``, node affinity;
  ``numaplane.io/*`` annotations (per-pod preferences); owner kind and name; phase and QoS class.
  Never env, images, commands, volumes, secrets or other annotations.
* Pods in phase ``Succeeded`` or ``Failed`` are left out; a pod is *bound* when ``spec.nodeName`` is
  set, *pending* otherwise.
* Reading is strict (:func:`read_snapshot`): every section is present and the writer's ``summary:``
  footer (written last) is present and equals the counts read, so a truncated file is refused, not
  read as a smaller cluster; each item line is JSON bounded in nesting depth and integer length;
  a Node item has a ``name``, ``labels`` a map of strings, ``capacity`` / ``allocatable`` maps of
  valid quantities; an NRT item a ``name`` and a ``zones`` list; a pod item a mapping.
* ``policy`` is what the NRT attributes state (``topologyManagerPolicy``, ``topologyManagerScope``
  and, when published, ``cpuManagerPolicy``, ``memoryManagerPolicy``, ``reservedSystemCPUs``), with
  the deprecated ``topologyPolicies`` as a fallback for the topology manager policy and scope.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml

from numaplane.boundedjson import JSONInputError, check_depth
from numaplane.documents import DocumentError, check_tree
from numaplane.limits import MAX_JSON_DEPTH
from numaplane.resources.errors import QuantityError
from numaplane.resources.quantity import parse_quantity
from numaplane.sim.errors import SnapshotFormatError

__all__ = [
    "API_VERSION",
    "KIND",
    "SECTIONS",
    "Snapshot",
    "SnapshotWriter",
    "keep_pod",
    "policy_from_attributes",
    "read_snapshot",
    "reduce_node",
    "reduce_nrt",
    "reduce_pod",
]

API_VERSION = "numaplane.io/v1"
KIND = "ClusterSnapshot"
SECTIONS = ("nodes", "nodeResourceTopologies", "pods")
PREFERENCE_PREFIX = "numaplane.io/"
_POLICY_ATTRIBUTES = (
    "topologyManagerPolicy",
    "topologyManagerScope",
    "cpuManagerPolicy",
    "memoryManagerPolicy",
    "reservedSystemCPUs",
)
# deprecated v1alpha1 topologyPolicies values -> (policy, scope)
_LEGACY_POLICIES = {
    "SingleNUMANodeContainerLevel": ("single-numa-node", "container"),
    "SingleNUMANodePodLevel": ("single-numa-node", "pod"),
    "Restricted": ("restricted", None),
    "RestrictedContainerLevel": ("restricted", "container"),
    "RestrictedPodLevel": ("restricted", "pod"),
    "BestEffort": ("best-effort", None),
    "BestEffortContainerLevel": ("best-effort", "container"),
    "BestEffortPodLevel": ("best-effort", "pod"),
    "None": ("none", None),
}


# ---------------------------------------------------------------------------------------- reduction


def _str_map(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


def reduce_node(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A Node as the snapshot keeps it: name, labels, taints, schedulability, capacity, allocatable."""
    meta = doc.get("metadata") or {}
    spec = doc.get("spec") or {}
    status = doc.get("status") or {}
    return {
        "name": str(meta.get("name", "")),
        "labels": _str_map(meta.get("labels")),
        "taints": [dict(t) for t in spec.get("taints") or () if isinstance(t, Mapping)],
        "unschedulable": bool(spec.get("unschedulable", False)),
        "capacity": _str_map(status.get("capacity")),
        "allocatable": _str_map(status.get("allocatable")),
    }


def policy_from_attributes(attributes: Any, topology_policies: Any = ()) -> dict[str, str]:
    """The resource-manager policy an NRT states (see the module docstring)."""
    policy: dict[str, str] = {}
    for attr in attributes or ():
        if isinstance(attr, Mapping) and attr.get("name") in _POLICY_ATTRIBUTES:
            policy[str(attr["name"])] = str(attr.get("value", ""))
    for legacy in topology_policies or ():
        mapped = _LEGACY_POLICIES.get(str(legacy))
        if mapped is None:
            continue
        policy.setdefault("topologyManagerPolicy", mapped[0])
        if mapped[1] is not None:
            policy.setdefault("topologyManagerScope", mapped[1])
    return policy


def reduce_nrt(doc: Mapping[str, Any]) -> dict[str, Any]:
    """An NRT as the snapshot keeps it: name, attributes, legacy policies, zones, and the policy."""
    meta = doc.get("metadata") or {}
    attributes = [dict(a) for a in doc.get("attributes") or () if isinstance(a, Mapping)]
    legacy = [str(p) for p in doc.get("topologyPolicies") or ()]
    out: dict[str, Any] = {"name": str(meta.get("name", "")), "attributes": attributes}
    if legacy:
        out["topologyPolicies"] = legacy
    out["zones"] = [dict(z) for z in doc.get("zones") or () if isinstance(z, Mapping)]
    out["policy"] = policy_from_attributes(attributes, legacy)
    return out


def keep_pod(doc: Mapping[str, Any]) -> bool:
    """Whether a pod belongs in a snapshot: not finished (``Succeeded`` / ``Failed``)."""
    phase = (doc.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed")


def _container(doc: Any, init: bool) -> dict[str, Any]:
    doc = doc if isinstance(doc, Mapping) else {}
    out: dict[str, Any] = {"name": str(doc.get("name", ""))}
    resources = doc.get("resources") or {}
    kept = {k: _str_map(resources.get(k)) for k in ("requests", "limits") if resources.get(k)}
    if kept:
        out["resources"] = kept
    if init and doc.get("restartPolicy"):
        out["restartPolicy"] = str(doc["restartPolicy"])
    return out


def reduce_pod(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A pod reduced to what placement and admission need (see the module docstring)."""
    status = doc.get("status") or {}
    return {
        "metadata": _reduce_pod_metadata(doc.get("metadata") or {}),
        "spec": _reduce_pod_spec(doc.get("spec") or {}),
        "status": {k: str(status[k]) for k in ("phase", "qosClass") if status.get(k)},
    }


def _reduce_pod_metadata(meta: Mapping[str, Any]) -> dict[str, Any]:
    """Name, namespace, uid, creation time, numaplane's preference annotations, the controller owner."""
    rmeta: dict[str, Any] = {
        "name": str(meta.get("name", "")),
        "namespace": str(meta.get("namespace") or "default"),
    }
    for key in ("uid", "creationTimestamp"):
        if meta.get(key):
            rmeta[key] = str(meta[key])
    prefs = {k: v for k, v in _str_map(meta.get("annotations")).items() if k.startswith(PREFERENCE_PREFIX)}
    if prefs:
        rmeta["annotations"] = prefs
    owners = [
        {"kind": str(o.get("kind", "")), "name": str(o.get("name", ""))}
        for o in meta.get("ownerReferences") or ()
        if isinstance(o, Mapping) and o.get("controller", True)
    ]
    if owners:
        rmeta["ownerReferences"] = owners[:1]
    return rmeta


def _reduce_pod_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Binding, scheduling constraints (captured, not evaluated), pod-level resources, containers."""
    rspec: dict[str, Any] = {}
    for key in ("nodeName", "schedulerName", "priority"):
        if spec.get(key) not in (None, ""):
            rspec[key] = spec[key]
    for key in ("nodeSelector", "overhead"):
        if spec.get(key):
            rspec[key] = _str_map(spec[key])
    if spec.get("tolerations"):
        rspec["tolerations"] = [dict(t) for t in spec["tolerations"] if isinstance(t, Mapping)]
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity")
    if node_affinity:
        rspec["affinity"] = {"nodeAffinity": node_affinity}
    pod_resources = spec.get("resources") or {}
    kept = {k: _str_map(pod_resources.get(k)) for k in ("requests", "limits") if pod_resources.get(k)}
    if kept:
        rspec["resources"] = kept
    if spec.get("initContainers"):
        rspec["initContainers"] = [_container(c, True) for c in spec["initContainers"]]
    rspec["containers"] = [_container(c, False) for c in spec.get("containers") or ()]
    return rspec


# ---------------------------------------------------------------------------------------- writing


class SnapshotWriter:
    """Writes a snapshot to a text stream one item at a time (sections in :data:`SECTIONS` order)."""

    def __init__(self, out: TextIO, metadata: Mapping[str, Any]) -> None:
        self._out = out
        self._section: str | None = None
        self._in_section = 0
        self._done: list[str] = []
        self.counts: dict[str, int] = dict.fromkeys(SECTIONS, 0)
        self.bound_pods = 0
        out.write("# numaplane cluster snapshot (numaplane.sim.snapshot documents the format)\n")
        header = {"apiVersion": API_VERSION, "kind": KIND, "metadata": dict(metadata)}
        out.write(yaml.safe_dump(header, sort_keys=False))

    def section(self, name: str) -> None:
        """Start the list ``name`` (ends the previous one)."""
        if name not in SECTIONS or name in self._done or name == self._section:
            raise ValueError(f"section {name!r}: unknown or already written")
        self._end_section()
        self._section = name
        self._in_section = 0

    def add(self, item: Mapping[str, Any]) -> None:
        """Append one reduced item to the current section."""
        if self._section is None:
            raise ValueError("add() before section()")
        if self._in_section == 0:
            self._out.write(f"{self._section}:\n")
        self._out.write("- " + json.dumps(item, separators=(",", ":"), sort_keys=False) + "\n")
        self._in_section += 1
        self.counts[self._section] += 1
        if self._section == "pods" and (item.get("spec") or {}).get("nodeName"):
            self.bound_pods += 1

    def _end_section(self) -> None:
        if self._section is not None:
            if self._in_section == 0:
                self._out.write(f"{self._section}: []\n")
            self._done.append(self._section)
            self._section = None

    def close(self) -> dict[str, int]:
        """Finish the document (missing sections are written empty); returns the summary."""
        self._end_section()
        for name in SECTIONS:
            if name not in self._done:
                self._out.write(f"{name}: []\n")
                self._done.append(name)
        summary = {
            **self.counts,
            "boundPods": self.bound_pods,
            "pendingPods": self.counts["pods"] - self.bound_pods,
        }
        self._out.write("summary: " + json.dumps(summary, separators=(", ", ": ")) + "\n")
        return summary


# ---------------------------------------------------------------------------------------- reading


@dataclass
class Snapshot:
    """A snapshot in memory: the header's metadata and the three sections' items (reduced dicts)."""

    metadata: dict[str, Any] = field(default_factory=dict)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    nrts: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    source: str = ""


_SECTION_ATTR = {"nodes": "nodes", "nodeResourceTopologies": "nrts", "pods": "pods"}


def read_snapshot(path: str | Path) -> Snapshot:
    """Read and validate a snapshot file (streamed line by line when it is in the writer's layout).

    Raise :class:`SnapshotFormatError` naming the section, item and field for anything the module
    docstring's reading rules refuse (a missing section or ``summary:``, counts differing from the
    summary, an unusable item)."""
    source = str(path)
    try:
        with open(path, encoding="utf-8") as stream:
            try:
                snap, summary = _read_fast(stream, source)
            except _NotFastLayout:
                stream.seek(0)
                snap, summary = _read_yaml(stream, source)
    except OSError as exc:
        raise SnapshotFormatError(source, "", f"cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError:
        raise SnapshotFormatError(source, "", "not UTF-8 text") from None
    _check_items(snap)
    _check_summary(snap, summary)
    return snap


def _check_summary(snap: Snapshot, summary: Any) -> None:
    """The writer's footer is there and says what was read (else the file is truncated or edited)."""
    if summary is None:
        raise SnapshotFormatError(
            snap.source, "summary", "missing: the writer ends every snapshot with it (is the file truncated?)"
        )
    if not isinstance(summary, Mapping):
        raise SnapshotFormatError(snap.source, "summary", "expected a mapping of counts")
    bound = sum(1 for p in snap.pods if isinstance(p.get("spec"), Mapping) and p["spec"].get("nodeName"))
    read = {
        "nodes": len(snap.nodes),
        "nodeResourceTopologies": len(snap.nrts),
        "pods": len(snap.pods),
        "boundPods": bound,
        "pendingPods": len(snap.pods) - bound,
    }
    differ = [
        f"{key} {summary.get(key)!r} in the summary, {count} read"
        for key, count in read.items()
        if summary.get(key) != count
    ]
    if differ:
        raise SnapshotFormatError(snap.source, "summary", "; ".join(differ) + " (is the file truncated?)")


def _check_map(value: Any, where: str, source: str, *, quantities: bool) -> None:
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise SnapshotFormatError(source, where, f"expected a mapping, got {type(value).__name__}")
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str | int | float) or isinstance(item, bool):
            raise SnapshotFormatError(source, f"{where}.{key}", "expected a string")
        if quantities:
            try:
                parse_quantity(str(item))
            except QuantityError as exc:
                raise SnapshotFormatError(source, f"{where}.{key}", str(exc)) from None


def _item_name(item: Mapping[str, Any], where: str, source: str) -> str:
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise SnapshotFormatError(source, f"{where}.name", "missing or not a string")
    return name


def _check_items(snap: Snapshot) -> None:
    """Each item has the shape the rebuild reads (module docstring), so bad data is named, not a crash."""
    source = snap.source
    for i, node in enumerate(snap.nodes):
        where = f"nodes[{i}]"
        name = _item_name(node, where, source)
        where = f"nodes[{i}] ({name})"
        _check_map(node.get("labels"), f"{where}.labels", source, quantities=False)
        for key in ("capacity", "allocatable"):
            _check_map(node.get(key), f"{where}.{key}", source, quantities=True)
        taints = node.get("taints")
        if taints is not None and (not isinstance(taints, list) or not all(isinstance(t, Mapping) for t in taints)):
            raise SnapshotFormatError(source, f"{where}.taints", "expected a list of mappings")
    for i, nrt in enumerate(snap.nrts):
        where = f"nodeResourceTopologies[{i}]"
        name = _item_name(nrt, where, source)
        zones = nrt.get("zones")
        if zones is not None and not isinstance(zones, list):
            raise SnapshotFormatError(source, f"{where} ({name}).zones", "expected a list")
        policy = nrt.get("policy")
        if policy is not None and not isinstance(policy, Mapping):
            raise SnapshotFormatError(source, f"{where} ({name}).policy", "expected a mapping")


def _item(text: str, number: int, section: str, source: str) -> Any:
    """One item line's JSON, bounded; text that is not JSON is another layout (``_NotFastLayout``)."""
    where = f"line {number} ({section})"
    try:
        item = json.loads(text)
    except json.JSONDecodeError:
        raise _NotFastLayout from None
    except RecursionError:
        raise SnapshotFormatError(source, where, f"nested deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:  # an integer over 4,300 digits
        raise SnapshotFormatError(source, where, f"not usable JSON: {exc}") from None
    try:
        check_depth(item)
    except JSONInputError as exc:
        raise SnapshotFormatError(source, where, str(exc)) from None
    return item


class _NotFastLayout(Exception):
    """The file is not in the writer's one-item-per-line layout."""


def _lines(stream: TextIO) -> Iterator[tuple[int, str]]:
    for number, line in enumerate(stream, 1):
        yield number, line.rstrip("\n")


def _read_fast(stream: TextIO, source: str) -> tuple[Snapshot, Any]:
    header_lines: list[str] = []
    summary: Any = None
    snap = Snapshot(source=source)
    section: str | None = None
    seen: set[str] = set()
    for number, line in _lines(stream):
        if not line or line.startswith("#"):
            continue
        if line.startswith("- "):
            if section is None:
                raise _NotFastLayout
            item = _item(line[2:], number, section, source)
            if not isinstance(item, dict):
                raise SnapshotFormatError(source, f"line {number} ({section})", "an item must be a mapping")
            getattr(snap, _SECTION_ATTR[section]).append(item)
            continue
        key = line.split(":", 1)[0]
        if key in SECTIONS:
            rest = line[len(key) + 1 :].strip()
            if rest not in ("", "[]"):
                raise _NotFastLayout
            section = key if rest == "" else None
            seen.add(key)
            continue
        if key == "summary":
            section = None
            try:
                summary = yaml.safe_load(line[len(key) + 1 :]) if summary is None else "twice"
            except yaml.YAMLError:
                raise _NotFastLayout from None
            continue
        if section is not None or (line.startswith(" ") and not header_lines):
            raise _NotFastLayout
        header_lines.append(line)
    try:
        header = yaml.safe_load("\n".join(header_lines)) or {}
    except yaml.YAMLError:
        raise _NotFastLayout from None
    try:
        check_tree(header, source)  # no alias bomb in the header either (the YAML reader's rule)
        check_tree(summary, source)
    except DocumentError as exc:
        raise SnapshotFormatError(source, "", exc.reason) from exc
    _check_header(header, source)
    _check_sections(seen, source)
    snap.metadata = dict(header.get("metadata") or {})
    return snap, summary


def _check_sections(seen: Any, source: str) -> None:
    missing = [name for name in SECTIONS if name not in seen]
    if missing:
        raise SnapshotFormatError(
            source, missing[0], "section missing: the writer writes every section (is the file truncated?)"
        )


def _read_yaml(stream: TextIO, source: str) -> tuple[Snapshot, Any]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        doc = check_tree(yaml.load(stream, Loader=loader), source)
    except DocumentError as exc:
        raise SnapshotFormatError(source, "", exc.reason) from exc
    except yaml.YAMLError as exc:
        raise SnapshotFormatError(source, "", f"not valid YAML: {exc}") from exc
    except (RecursionError, ValueError) as exc:  # deep nesting; an integer over 4,300 digits
        raise SnapshotFormatError(source, "", f"not a usable YAML document: {type(exc).__name__}") from exc
    _check_header(doc, source)
    snap = Snapshot(metadata=dict(doc.get("metadata") or {}), source=source)
    for section, attr in _SECTION_ATTR.items():
        items = doc.get(section) or []
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise SnapshotFormatError(source, section, "expected a list of mappings")
        setattr(snap, attr, items)
    _check_sections(doc, source)
    return snap, doc.get("summary")


def _check_header(doc: Any, source: str) -> None:
    if not isinstance(doc, Mapping):
        raise SnapshotFormatError(source, "", "a snapshot is a mapping with apiVersion and kind")
    if doc.get("apiVersion") != API_VERSION:
        raise SnapshotFormatError(source, "apiVersion", f"expected {API_VERSION!r}, got {doc.get('apiVersion')!r}")
    if doc.get("kind") != KIND:
        raise SnapshotFormatError(source, "kind", f"expected {KIND!r}, got {doc.get('kind')!r}")
