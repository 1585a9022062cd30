"""The kube-scheduler's basic predicates and default score, as pure functions.

What a secondary scheduler must honour besides the NUMA check, and what the simulator's "default
scheduler" does: ``NodeUnschedulable``, ``NodeName``, ``NodeAffinity`` (``nodeSelector`` and required
node affinity: ``In``, ``NotIn``, ``Exists``, ``DoesNotExist``, ``Gt``, ``Lt`` on labels and
``metadata.name`` fields), ``TaintToleration`` (``NoSchedule``/``NoExecute`` taints must be tolerated)
and ``NodeResourcesFit`` (effective pod requests ≤ allocatable − requests of pods bound to the node;
``pods`` counts one per pod). The default score is ``NodeResourcesFit`` LeastAllocated over cpu and
memory with equal weights (kube-scheduler's default), 0–100.

Reasons match kube-scheduler's texts (``Insufficient cpu``, ``node(s) had untolerated taint {k: v}``,
``node(s) didn't match Pod's node affinity/selector``, ``node(s) were unschedulable``,
``node(s) didn't match the requested node name``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from numaplane.resources.pod import Pod, parse_resource_list, parse_shared_resource_list
from numaplane.resources.quantity import Quantity

__all__ = [
    "BasicNode",
    "Taint",
    "default_score",
    "fits_node",
    "has_node_constraints",
    "is_restricted",
    "node_reasons",
    "parse_node",
    "resource_reasons",
]


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True)
class BasicNode:
    """A Node as kube-scheduler's basic predicates and default score see it: name, labels,
    ``status.allocatable`` (exact quantities; ``status.capacity`` when allocatable is absent), taints and
    ``spec.unschedulable``.

    Not :class:`numaplane.placement.model.node.NodeInfo`, which holds only what the NUMA filter reads (name and
    which resources the node advertises)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    allocatable: Mapping[str, Quantity] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False


def parse_node(doc: Mapping[str, Any]) -> BasicNode:
    """Parse core/v1 Node JSON (tolerant: missing parts are empty)."""
    meta = doc.get("metadata") or {}
    spec = doc.get("spec") or {}
    status = doc.get("status") or {}
    taints = tuple(
        Taint(key=str(t.get("key", "")), value=str(t.get("value", "")), effect=str(t.get("effect", "NoSchedule")))
        for t in spec.get("taints") or []
        if isinstance(t, Mapping)
    )
    listed = status.get("allocatable") or status.get("capacity")
    shared = parse_shared_resource_list(listed)  # equal maps of many Nodes: one parsed map
    return BasicNode(
        name=str(meta.get("name", "")),
        labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
        allocatable=shared if shared is not None else parse_resource_list(listed, "status.allocatable"),
        taints=taints,
        unschedulable=bool(spec.get("unschedulable", False)),
    )


def _tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Taint) -> bool:
    for tol in tolerations:
        effect = tol.get("effect", "")
        if effect and effect != taint.effect:
            continue
        key = tol.get("key", "")
        op = tol.get("operator", "Equal")
        if op == "Exists":
            if not key or key == taint.key:
                return True
        elif key == taint.key and str(tol.get("value", "")) == taint.value:
            return True
    return False


def _match_expression(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key = str(expr.get("key", ""))
    op = expr.get("operator", "In")
    values = [str(v) for v in expr.get("values") or []]
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and len(values) == 1:
        try:
            left, right = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return left > right if op == "Gt" else left < right
    return False


def _affinity_ok(pod_spec: Mapping[str, Any], node: BasicNode) -> bool:
    selector = pod_spec.get("nodeSelector") or {}
    if any(node.labels.get(k) != v for k, v in selector.items()):
        return False
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return True
    fields = {"metadata.name": node.name}
    for term in terms:  # terms are ORed, expressions inside a term ANDed
        exprs = term.get("matchExpressions") or []
        field_exprs = term.get("matchFields") or []
        if not exprs and not field_exprs:
            continue
        if all(_match_expression(e, node.labels) for e in exprs) and all(
            _match_expression(e, fields) for e in field_exprs
        ):
            return True
    return False


def fits_node(pod: Pod, node: BasicNode, used: Mapping[str, Quantity], pods_on_node: int) -> list[str]:
    """Reasons the pod cannot go to the node (empty list: it fits).

    ``used`` is the sum of effective requests of the pods already bound to the node. The node-level
    reasons (:func:`node_reasons`) come first, then NodeResourcesFit's (:func:`resource_reasons`).
    """
    return node_reasons(pod, node) + resource_reasons(pod, node, used, pods_on_node)


def node_reasons(pod: Pod, node: BasicNode) -> list[str]:
    """Reasons of the predicates that read no usage, in this order: NodeUnschedulable, NodeName,
    NodeAffinity, TaintToleration (the first untolerated taint only)."""
    spec: Mapping[str, Any] = (pod.raw.get("spec") or {}) if pod.raw else {}
    reasons: list[str] = []
    if node.unschedulable and not _tolerates(
        spec.get("tolerations") or [], Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
    ):
        reasons.append("node(s) were unschedulable")
    if pod.node_name and pod.node_name != node.name:
        reasons.append("node(s) didn't match the requested node name")
    if not _affinity_ok(spec, node):
        reasons.append("node(s) didn't match Pod's node affinity/selector")
    for taint in node.taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not _tolerates(spec.get("tolerations") or [], taint):
            reasons.append(f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}")
            break
    return reasons


def resource_reasons(pod: Pod, node: BasicNode, used: Mapping[str, Quantity], pods_on_node: int) -> list[str]:
    """NodeResourcesFit's reasons: ``Too many pods`` (the node's ``pods`` allocatable, rounded up, is
    not above ``pods_on_node``), then ``Insufficient <resource>`` in name order for every non-zero
    effective request above ``allocatable - used`` (missing entries count 0). Exact arithmetic.

    :class:`numaplane.placement.arrays.fit.FitArrays` computes the same verdict (empty or not) for all nodes
    at once."""
    reasons: list[str] = []
    max_pods = node.allocatable.get("pods")
    if max_pods is not None and pods_on_node + 1 > max_pods.value():
        reasons.append("Too many pods")
    for name, q in sorted(pod.effective_requests().items()):
        if q.is_zero():
            continue
        have = node.allocatable.get(name)
        free = (have.amount if have else Fraction(0)) - (used[name].amount if name in used else Fraction(0))
        if q.amount > free:
            reasons.append(f"Insufficient {name}")
    return reasons


def has_node_constraints(pod: Pod) -> bool:
    """False when the pod names no node and has neither a ``nodeSelector`` nor required node affinity
    terms (and its spec holds nothing unusual there): then :func:`node_reasons` is empty on every node
    that is not :func:`is_restricted`. True otherwise (the node-level predicates must be asked)."""
    if pod.node_name:
        return True
    spec = (pod.raw.get("spec") or {}) if pod.raw else {}
    if not isinstance(spec, Mapping):
        return True
    if spec.get("nodeSelector"):
        return True
    affinity = spec.get("affinity")
    if not affinity:
        return False
    if not isinstance(affinity, Mapping):
        return True
    node_affinity = affinity.get("nodeAffinity")
    if not node_affinity:
        return False
    if not isinstance(node_affinity, Mapping):
        return True
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if not required:
        return False
    return not isinstance(required, Mapping) or bool(required.get("nodeSelectorTerms"))


def is_restricted(node: BasicNode) -> bool:
    """Whether the node is cordoned or has a ``NoSchedule`` / ``NoExecute`` taint: the only nodes on
    which :func:`node_reasons` can reject a pod without node constraints (:func:`has_node_constraints`)."""
    return node.unschedulable or any(t.effect in ("NoSchedule", "NoExecute") for t in node.taints)


def default_score(pod: Pod, node: BasicNode, used: Mapping[str, Quantity]) -> int:
    """LeastAllocated over cpu and memory (equal weights), 0–100, like kube-scheduler's default.

    Pods without cpu/memory requests count the scheduler's non-zero defaults (100m CPU, 200Mi).
    """
    reqs = pod.effective_requests()
    defaults = {"cpu": Fraction(1, 10), "memory": Fraction(200 * 1024 * 1024)}
    total = 0
    for name in ("cpu", "memory"):
        cap = node.allocatable.get(name)
        if cap is None or cap.amount <= 0:
            continue
        req = reqs[name].amount if name in reqs and not reqs[name].is_zero() else defaults[name]
        requested = (used[name].amount if name in used else Fraction(0)) + req
        if requested > cap.amount:
            continue
        total += int((cap.amount - requested) * 100 / cap.amount)
    return total // 2
