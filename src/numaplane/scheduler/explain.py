"""``numaplane explain``: per node, does the pod fit its NUMA zones, and if not, which zone lacks what.

:func:`explain_pod` takes the NUMA verdict, score and reason of one pod on every node from the
production arrays (:func:`numaplane.placement.cycle.numa_verdicts`, what the scheduler's cycle decides
with), the details
from the per-node filter (:func:`numaplane.placement.explain.filter.filter`), and returns an
:class:`ExplainReport`: per node the verdict with the upstream reason
(``cannot align container`` ...), the failing container and resource, each zone's shortfall
(requested vs available), the NUMA zone the kubelet would most likely pick when it fits, the topology
manager policy and scope read from the NRT, and what was ignored on the way:

* per node, zones the plugin skips (type not ``Node``, name not ``node-<id>``, id above 63);
* per input, documents that cannot be attributed to a node (not an object, no ``metadata.name``,
  unreadable files — the CLI passes those as *problems*), and repeated NRTs for one node (the last wins).

An NRT that names a node but does not parse makes that node fail with ``malformed node topology data``
and the parser's message, as in the scheduler. Nodes: with Node objects, every Node is explained (a
Node without NRT passes unchecked, as upstream) and NRTs of unknown nodes are listed as ignored;
without Node objects the NRTs define the nodes, each assumed to advertise the resources its zones list
(so device requests are not rejected for a missing ``status.allocatable``).

Why the per-node filter runs here too, and why it is not a second decision: the arrays answer, per
node, only fits or not, the score and a reason *code*; they reduce each container's check to one
boolean per node and keep neither which container failed, nor which resource in which zone fell short
by how much, nor the zone the kubelet would choose. Those details exist only in the per-node filter's
:class:`~numaplane.placement.model.result.Reject`. The verdict, score and reason shown are the arrays'; the
per-node result adds the details only (were the two ever to disagree, the arrays' verdict is shown).

Pure: inputs are plain dicts; :func:`fetch_cluster` is the only I/O (through the kube port).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from numaplane.kube.port import JsonObj, KubePort
from numaplane.kube.resources import NODE, NODE_RESOURCE_TOPOLOGY
from numaplane.nrt.errors import NRTFormatError
from numaplane.nrt.parse import parse_strict
from numaplane.placement.cycle import REASON_MESSAGES, numa_verdicts
from numaplane.placement.explain.filter import FilterOptions, as_topology
from numaplane.placement.explain.filter import filter as numa_filter
from numaplane.placement.model.errors import NodeDataError
from numaplane.placement.model.node import NodeInfo, node_info
from numaplane.placement.model.requests import pod_request
from numaplane.placement.model.result import Fit
from numaplane.placement.model.strategies import ScoringStrategy
from numaplane.placement.model.view import NodeTopology, malformed
from numaplane.resources.pod import Pod
from numaplane.resources.quantity import Quantity

__all__ = ["ExplainReport", "Ignored", "NodeExplanation", "explain_pod", "fetch_cluster"]


@dataclass(frozen=True, slots=True)
class Ignored:
    """An input that was not used: ``source`` (file, ``api``, node name) and why."""

    source: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"source": self.source, "reason": self.reason}


@dataclass(frozen=True)
class NodeExplanation:
    """The NUMA verdict for one node, with everything needed to understand it."""

    node: str
    fits: bool
    checked: bool
    #: the scheduler's score; ``None`` when the pod does not fit (no score is computed for such a node)
    score: int | None
    reason: str | None = None
    code: str | None = None
    unit: str | None = None
    resource: str | None = None
    shortfalls: tuple[dict[str, Any], ...] = ()
    placements: tuple[tuple[str, int], ...] = ()
    notes: tuple[str, ...] = ()
    ignored_zones: tuple[Ignored, ...] = ()
    policy: str | None = None
    scope: str | None = None
    source: str | None = None

    def summary(self) -> str:
        """One line: why it fits or why not."""
        if self.fits:
            parts = [f"{unit} → NUMA {numa}" for unit, numa in self.placements]
            return "; ".join(parts or list(self.notes) or ["fits"])
        return self.reason or "rejected"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"node": self.node, "fits": self.fits, "checked": self.checked, "score": self.score}
        if self.policy is not None:
            out["policy"] = self.policy
            out["scope"] = self.scope
        if not self.fits:
            out["reason"] = self.reason
            out["code"] = self.code
            out["unit"] = self.unit
            out["resource"] = self.resource
            out["shortfalls"] = list(self.shortfalls)
        else:
            out["placements"] = [{"unit": u, "numa": n} for u, n in self.placements]
        out["notes"] = list(self.notes)
        out["ignoredZones"] = [z.to_dict() for z in self.ignored_zones]
        if self.source is not None:
            out["source"] = self.source
        return out


@dataclass(frozen=True)
class ExplainReport:
    """The explanation of one pod over many nodes; nodes that fit first (best score first)."""

    pod: Pod
    nodes: tuple[NodeExplanation, ...]
    ignored: tuple[Ignored, ...] = ()
    strategy: str = "LeastAllocated"
    requests: Mapping[str, Quantity] = field(default_factory=dict)

    @property
    def fitting(self) -> list[str]:
        return [n.node for n in self.nodes if n.fits]

    def to_dict(self) -> dict[str, Any]:
        return {
            "pod": self.pod.key,
            "qosClass": self.pod.qos_class,
            "requests": {k: str(v) for k, v in sorted(self.requests.items())},
            "scoringStrategy": self.strategy,
            "fits": len(self.fitting),
            "nodes": [n.to_dict() for n in self.nodes],
            "ignored": [i.to_dict() for i in self.ignored],
        }


def _name(doc: Any) -> str | None:
    if not isinstance(doc, Mapping):
        return None
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) and name else None


def _synthetic_node(name: str, topology: NodeTopology) -> NodeInfo:
    """A Node advertising every resource its zones list (allocatable summed over zones)."""
    alloc: dict[str, Quantity] = {}
    for zone in topology.zones:
        for res, qty in zone.allocatable.items():
            alloc[res] = alloc[res] + qty if res in alloc else qty
    return NodeInfo(name, alloc)


def _shortfall(s: Any) -> dict[str, Any]:
    return {
        "zone": s.zone,
        "numa": s.numa_id,
        "resource": s.resource,
        "requested": str(s.requested),
        "available": None if s.available is None else str(s.available),
    }


def _unreported(resource: str, topology: NodeTopology) -> bool:
    """Memory or hugepages the pod asks for that no zone of the node reports at all."""
    return (resource == "memory" or resource.startswith("hugepages-")) and resource not in topology.resource_names


def unreported_resource_note(resource: str) -> str:
    """What to tell a user whose pod is refused because the node's zones carry no ``resource`` row."""
    return (
        f"no NUMA zone of this node reports {resource}: its memory manager policy is None (the kubelet's "
        "memoryManagerPolicy, or the numaplane agent's memoryManager.policy), so NUMA-aware scheduling refuses "
        f"every Guaranteed pod that requests {resource} here; set the policy to Static to publish per-zone memory"
    )


def _inputs(
    name: str, doc: Mapping[str, Any] | None, node: NodeInfo | None, notes: list[str]
) -> tuple[NodeTopology | None, NodeInfo]:
    """The node's NUMA data (``None``: no NRT; malformed: a view with its problem) and Node."""
    topology: NodeTopology | None = None
    if doc is not None:
        try:
            topology = as_topology(parse_strict(doc))
        except NRTFormatError as exc:
            topology = malformed(name, str(exc))
    if node is None:
        node = _synthetic_node(name, topology) if topology is not None else NodeInfo(name)
        notes.append("no Node object: assuming it advertises the resources its NUMA zones list")
    return topology, node


def _explain_node(
    pod: Pod,
    name: str,
    topology: NodeTopology | None,
    node: NodeInfo,
    decided: tuple[bool, int, str | None],
    source: str | None,
    options: FilterOptions,
    notes: list[str],
) -> NodeExplanation:
    """``decided``: the production arrays' verdict, score and reason (``None``: ask the explanation);
    the per-node function adds the details (placements, failing unit, shortfalls)."""
    fits, decided_score, reason = decided
    # a node the pod does not fit has no score (kube-scheduler scores only the nodes that passed Filter;
    # the arrays still compute one, which would read as a ranking of nodes the pod cannot use)
    numa_score = decided_score if fits else None
    verdict = numa_filter(pod, topology, node, options=options)
    ignored = tuple(Ignored(z.name, z.reason) for z in topology.ignored) if topology is not None else ()
    policy = scope = None
    if topology is not None and topology.problem is None:
        policy, scope = topology.config.policy, topology.config.scope
    if isinstance(verdict, Fit):
        # the skipped zones are reported structurally (ignored_zones); drop the filter's prose copy
        verdict_notes = tuple(n for n in verdict.notes if not n.startswith("ignored zones:"))
        return NodeExplanation(
            name,
            fits,
            verdict.checked,
            numa_score,
            reason=None if fits else reason,
            placements=verdict.placements,
            notes=(*verdict_notes, *notes),
            ignored_zones=ignored,
            policy=policy,
            scope=scope,
            source=source,
        )
    if topology is not None and verdict.resource is not None and _unreported(verdict.resource, topology):
        notes.append(unreported_resource_note(verdict.resource))
    return NodeExplanation(
        name,
        fits,
        True,
        numa_score,
        reason=reason or verdict.reason,
        code=verdict.code,
        unit=verdict.unit,
        resource=verdict.resource,
        shortfalls=tuple(_shortfall(s) for s in verdict.shortfalls),
        notes=(*verdict.notes, *notes),
        ignored_zones=ignored,
        policy=policy,
        scope=scope,
        source=source,
    )


def explain_pod(
    pod: Pod,
    nrts: Iterable[tuple[str, Any]],
    nodes: Sequence[Any] | None = None,
    *,
    strategy: ScoringStrategy | None = None,
    options: FilterOptions | None = None,
    problems: Iterable[Ignored] = (),
) -> ExplainReport:
    """Explain ``pod`` over ``nrts`` (``(source, document)`` pairs) and ``nodes`` (module docstring)."""
    strategy = strategy or ScoringStrategy()
    options = options or FilterOptions()
    ignored: list[Ignored] = list(problems)
    by_node: dict[str, tuple[str, Mapping[str, Any]]] = {}
    for source, doc in nrts:
        name = _name(doc)
        if name is None:
            ignored.append(Ignored(source, "not a NodeResourceTopology object with metadata.name"))
            continue
        if name in by_node:
            ignored.append(Ignored(by_node[name][0], f"another NodeResourceTopology for node {name} follows"))
        by_node[name] = (source, doc)
    node_infos: dict[str, NodeInfo] = {}
    node_notes: dict[str, tuple[str, ...]] = {}
    if nodes is not None:
        for doc in nodes:
            name = _name(doc)
            if name is None:
                ignored.append(Ignored("nodes", "not a Node object with metadata.name"))
                continue
            try:
                node_infos[name] = node_info(doc)
            except NodeDataError as exc:
                node_infos[name] = NodeInfo(name)
                node_notes[name] = (f"Node object unusable ({exc.detail}); treated as advertising nothing",)
        for name in sorted(set(by_node) - set(node_infos)):
            ignored.append(Ignored(by_node[name][0], f"no Node object named {name}"))
        names = sorted(node_infos)
    else:
        names = sorted(by_node)
    inputs: dict[str, tuple[NodeTopology | None, NodeInfo, list[str]]] = {}
    for name in names:
        notes = list(node_notes.get(name, ()))
        topology, node = _inputs(name, by_node[name][1] if name in by_node else None, node_infos.get(name), notes)
        inputs[name] = (topology, node, notes)
    # the verdicts, scores and reasons are the production arrays' (as the scheduler decides)
    ev, codes = numa_verdicts(
        pod, {name: (topology, node) for name, (topology, node, _) in inputs.items()}, strategy, options
    )
    results = []
    for name, (topology, node, notes) in inputs.items():
        row = ev.index[name]
        decided = (bool(ev.feasible[row]), int(ev.scores[row]), REASON_MESSAGES.get(int(codes[row])))
        nrt_source = by_node[name][0] if name in by_node else None
        results.append(_explain_node(pod, name, topology, node, decided, nrt_source, options, notes))
    results.sort(key=lambda r: (not r.fits, -(r.score or 0), r.node))
    return ExplainReport(pod, tuple(results), tuple(ignored), strategy.type, pod_request(pod))


async def fetch_cluster(kube: KubePort) -> tuple[list[tuple[str, JsonObj]], list[JsonObj]]:
    """Every NodeResourceTopology (as ``("api", doc)``) and every Node from the API server."""
    nrts = await kube.list(NODE_RESOURCE_TOPOLOGY)
    nodes = await kube.list(NODE)
    return [("api", doc) for doc in nrts.items], list(nodes.items)
