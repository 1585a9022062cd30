"""Per-node verdicts and their explanations for :class:`~numaplane.scheduler.state.SchedulerState`.

:class:`NodeVerdicts` (``SchedulerState.verdicts``) answers for one pod on one node, by the
per-node functions: the explained NUMA verdict (:meth:`NodeVerdicts.explain`, the cycle's
:meth:`~numaplane.placement.cycle.Cycle.explain` for the nodes it holds), and the basic predicates'
reasons and LeastAllocated score.
:class:`NumaEvaluation` is the result of ``SchedulerState.evaluate``; it asks these per-node answers
on demand. It reads the scheduler state's ``cycle``, ``nodes`` and ``usage`` (the same objects,
never replaced: it holds references to them and changes none).

* :meth:`NodeVerdicts.basic_reasons` — kube-scheduler's basic predicates, reasons of the *first*
  failing plugin in kube-scheduler's order (NodeUnschedulable, NodeName, TaintToleration,
  NodeAffinity, NodeResourcesFit), as the framework stops at the first failing filter plugin (per
  node, :func:`~numaplane.placement.explain.predicates.fits_node`: asked only when reasons are reported).

Why these per-node functions stay in production, and why none is a second decision path: every
verdict that places or rejects a pod comes from the cycle's arrays
(:class:`~numaplane.placement.cycle.Cycle`); the functions here run only afterwards, and only for the
cases the arrays cannot answer:

* the *text* of a rejection. The arrays keep one boolean per node and plugin, and a reason code
  (:func:`~numaplane.placement.arrays.reasons.reason_codes`) that settles only untrusted or unreadable NRT data
  and the ``cannot align pod/container`` rejections of ``single-numa-node`` nodes. Which container
  kind failed (init, sidecar, app), inconsistent or unusable zones, other policies, and which basic
  predicate failed with which resources (``Insufficient cpu``, taints, affinity) exist only in the
  per-node results — asked when a ``FitError``/``FailedScheduling`` message or an extender failure is
  reported, never to decide;
* nodes the arrays have no row for: a Node object that does not parse (its problem is the reason, its
  LeastAllocated score 0, and, should kube-scheduler ask the extender to score it, its NUMA score from
  the cached NRT per node);
* LeastAllocated scores beyond 0..100 (negative cpu or memory amounts, see
  :meth:`~numaplane.placement.arrays.fit.FitArrays.scores_bounded`): Python integers, exact where the int64
  arrays clip.

Whether eviction could help (:attr:`NumaEvaluation.preemptible`) is the arrays' alone (the emptied
twin, :attr:`NumaVerdicts.preemptible <numaplane.placement.cycle.NumaVerdicts>`); its per-node form is a reference in the tests. Were a
per-node verdict ever to disagree with the arrays', the arrays' verdict stands (see
:meth:`NumaEvaluation.reason`).

No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from numaplane.placement.cycle import EXPLAIN, REASON_MESSAGES, Cycle
from numaplane.placement.explain.predicates import default_score, fits_node
from numaplane.placement.model.result import MSG_UNEXPLAINED, Fit, Reject
from numaplane.resources.pod import Pod
from numaplane.scheduler.records import NodeRecord
from numaplane.scheduler.usage import NodeUsage

__all__ = ["NodeVerdicts", "NumaEvaluation", "plugin_of_reason"]

# kube-scheduler's default filter order for the predicates we implement.
_PLUGIN_ORDER = ("NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodeResourcesFit")


def plugin_of_reason(reason: str) -> str:
    """The kube-scheduler filter plugin that reports ``reason`` (predicates.py texts)."""
    if reason == "node(s) were unschedulable":
        return "NodeUnschedulable"
    if reason == "node(s) didn't match the requested node name":
        return "NodeName"
    if reason.startswith("node(s) had untolerated taint"):
        return "TaintToleration"
    if reason == "node(s) didn't match Pod's node affinity/selector":
        return "NodeAffinity"
    return "NodeResourcesFit"


@dataclass
class NumaEvaluation:
    """The NUMA verdicts of one pod over candidate nodes.

    ``scores`` maps each passing candidate to its NUMA score (0..100, higher is better),
    ``rejected_scores`` each failed candidate with a row in the arrays to the arrays' score (upstream's
    Score scores any node kube-scheduler passes it); ``failed``
    lists rejected candidates in input order; ``unknown`` candidates the state has no Node for;
    ``preemptible`` (when asked for) the failed candidates that eviction could make fit
    (the pod fits the node's zones with every zone's ``available`` raised to its ``allocatable``, the node
    emptied of pods; untrusted, missing or malformed data never qualifies). :meth:`reason` gives a failed node's upstream message
    cheaply, :meth:`reject` the fully explained rejection (both computed on demand).
    """

    pod: Pod
    scores: dict[str, int]
    failed: list[str]
    unknown: list[str]
    _verdicts: NodeVerdicts = field(repr=False)
    preemptible: frozenset[str] = frozenset()
    codes: dict[str, int] = field(default_factory=dict)
    rejected_scores: dict[str, int] = field(default_factory=dict)
    _rejects: dict[str, Reject | Fit] = field(default_factory=dict, repr=False)

    def reason(self, name: str) -> str:
        """The upstream status message of a failed node (the decision is the vectorised path's: this
        only explains it).

        ``codes`` holds the failed nodes' reason codes read from the arrays that took the decision
        (:meth:`numaplane.placement.cycle.Cycle.reason_codes`): untrusted or unreadable data, and
        the ``cannot align`` rejections that follow from the data alone, give their message at once.
        Everything else (code ``EXPLAIN``, or a node without a row) asks :meth:`reject`, whose verdict
        equals the vectorised one (the property tests compare them on random clusters); were it ever a
        :class:`Fit`, the node is still reported rejected, with :data:`MSG_UNEXPLAINED`.
        """
        message = REASON_MESSAGES.get(self.codes.get(name, EXPLAIN))
        if message is not None:
            return message
        verdict = self.reject(name)
        return verdict.reason if isinstance(verdict, Reject) else MSG_UNEXPLAINED

    def reject(self, name: str) -> Reject | Fit:
        """The per-node verdict of a failed node: a :class:`Reject` (a :class:`Fit` only if the per-node
        function disagrees with the vectorised path, which callers treat as a pass)."""
        cached = self._rejects.get(name)
        if cached is None:
            cached = self._verdicts.explain(self.pod, name)
            self._rejects[name] = cached
        return cached


class NodeVerdicts:
    """Per-node verdicts over the state of a :class:`~numaplane.scheduler.state.SchedulerState`
    (module docstring)."""

    def __init__(self, cycle: Cycle, nodes: Mapping[str, NodeRecord], usage: NodeUsage) -> None:
        self.cycle = cycle
        self.nodes = nodes
        self.usage = usage

    def explain(self, pod: Pod, name: str) -> Reject | Fit:
        """The explained NUMA verdict for one node (a node without a usable Node object is rejected)."""
        record = self.nodes.get(name)
        if record is None:
            return Reject("node not found", "Error")
        if record.numa is None:
            return Reject(record.problem or "malformed node object", "Error")  # as SchedulerState.unusable_node
        return self.cycle.explain(pod, name)  # the cycle holds every node whose Node object parses

    def basic_reasons(self, pod: Pod, name: str) -> list[str]:
        """Reasons the basic predicates reject ``pod`` on ``name`` (first failing plugin only)."""
        record = self.nodes.get(name)
        if record is None:
            return ["node not found"]
        if record.basic is None:
            return [record.problem or "malformed node object"]
        reasons = fits_node(pod, record.basic, self.usage.used(name), self.usage.count(name))
        if not reasons:
            return []
        first = min(_PLUGIN_ORDER.index(plugin_of_reason(r)) for r in reasons)
        return [r for r in reasons if _PLUGIN_ORDER.index(plugin_of_reason(r)) == first]

    def fit_score(self, pod: Pod, name: str) -> int:
        """kube-scheduler's default NodeResourcesFit LeastAllocated score (0..100) on ``name``."""
        record = self.nodes.get(name)
        if record is None or record.basic is None:
            return 0
        return default_score(pod, record.basic, self.usage.used(name))
