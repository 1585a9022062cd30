"""One standalone scheduling decision, and how an unschedulable pod is reported.

:func:`decide` drives the state's :class:`~numaplane.placement.cycle.Cycle` — the one the simulator
drives: the node-level predicates (:meth:`SchedulerState.node_mask`) are its input mask, the cycle
searches (``percentageOfNodesToScore``), filters (NodeResourcesFit and the NUMA filter, feeding
rejections back to the cache), scores and picks by the configured :class:`SelectionRules`.
:class:`Decision` keeps the totals of the feasible nodes found, or, when there is none, every node's
reasons (the NUMA reasons from the arrays' reason codes, the basic predicates' per node), all worked out
only when read: a placed pod pays no per-node Python loop; and :func:`fit_error_message` turns them into kube-scheduler's ``FitError`` text.

No I/O; the only side effect of :func:`decide` is the NUMA filter's feedback to the cache.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import structlog

from numaplane.resources.pod import Pod
from numaplane.scheduler.state import SchedulerState

__all__ = ["Decision", "decide", "fit_error_message"]

log = structlog.get_logger("numaplane.scheduler")


def fit_error_message(total_nodes: int, reasons: Mapping[str, list[str]]) -> str:
    """kube-scheduler's ``FitError`` text: ``0/N nodes are available: <count> <reason>, ....``

    Counts each reason once per node; the ``"<count> <reason>"`` strings are sorted as strings, as
    kube-scheduler does. With no node at all: ``no nodes available to schedule pods``.
    """
    if total_nodes == 0:
        return "no nodes available to schedule pods"
    counts = Counter(r for node_reasons in reasons.values() for r in node_reasons)
    parts = sorted(f"{count} {reason}" for reason, count in counts.items())
    message = f"0/{total_nodes} nodes are available:"
    if parts:
        message += f" {', '.join(parts)}."
    return message


class Decision:
    """The outcome of one scheduling cycle: a node, or the per-node reasons none fits.

    ``scores``: the total score of each feasible node the cycle found (every feasible node at
    ``percentageOfNodesToScore`` 100).     ``reasons`` holds every rejected node's reasons: those given (or returned by the given function),
    and those of the ``unexplained`` nodes, asked of ``explain`` (in that order, ahead of the given
    ones) when :attr:`reasons` is first read — so read it before the scheduler's state changes (the
    loop does, in the same cycle). :attr:`rejected` counts the nodes of ``total`` not in ``scores``.
    """

    def __init__(
        self,
        node: str | None,
        scores: Mapping[str, int],
        reasons: Mapping[str, list[str]] | Callable[[], Mapping[str, list[str]]],
        total: int,
        *,
        unexplained: Sequence[str] = (),
        explain: Callable[[str], list[str]] | None = None,
    ) -> None:
        if unexplained and explain is None:
            raise ValueError("unexplained nodes need an explain function")
        self.node = node
        self.scores = dict(scores)
        self._given = reasons if callable(reasons) else None
        self._reasons = {} if callable(reasons) else dict(reasons)
        self._unexplained = list(unexplained)
        self._explain = explain
        self.total = total

    @property
    def reasons(self) -> dict[str, list[str]]:
        if self._given is not None:
            self._reasons, self._given = dict(self._given()), None
        if self._unexplained and self._explain is not None:
            explained = {name: self._explain(name) for name in self._unexplained}
            for name, why in explained.items():
                if not why:  # the fit arrays and the per-node predicates disagree (never seen)
                    log.error("basic predicates disagree: node rejected without a reason", node=name)
            self._reasons = {**explained, **self._reasons}
            self._unexplained = []
        return self._reasons

    @property
    def rejected(self) -> int:
        """How many nodes were rejected: those of ``total`` not in ``scores``."""
        return self.total - len(self.scores)

    @property
    def message(self) -> str:
        return fit_error_message(self.total, self.reasons)


def decide(state: SchedulerState, pod: Pod) -> Decision:
    """One cycle of ``pod`` over every node (module docstring); no side effect but the cycle's
    start index and the cache's filter feedback."""
    cycle = state.cycle
    passed = state.node_mask(pod)
    found = cycle.candidates(pod, passed)
    names = cycle.names
    positions = found.rows.tolist()
    chosen: str | None = None
    totals: dict[str, int] = {}
    if positions:
        if cycle.fit.scores_bounded(pod):
            scores: Any = cycle.totals(pod, found)
        else:  # fit scores beyond 0..100 and int64 (negative amounts): exact per node, Python integers
            scores = np.array(state.fit_scores(pod, [names[i] for i in positions]), dtype=object)
            if found.numa_scores is not None:
                rules = cycle.rules
                scores = rules.numa_weight * found.numa_scores.astype(object) + rules.fit_weight * scores
        chosen = names[cycle.pick(found.rows, scores)]
        totals = {names[i]: int(t) for i, t in zip(positions, scores.tolist(), strict=True)}
    total = len(state.nodes)

    def reasons() -> dict[str, list[str]]:
        # Asked only when read (a pod left pending, or a DRA placement that failed), before the state
        # changes: every node's verdict in Python, O(nodes) — not paid per placed pod.
        names = cycle.names
        ok = passed & cycle.fits(pod)
        numa_failed = sorted(name for name, good in zip(names, ok.tolist(), strict=True) if good and name not in totals)
        basic_ok = set(numa_failed).union(totals)
        explained = {
            name: state.verdicts.basic_reasons(pod, name) for name in sorted(state.nodes) if name not in basic_ok
        }
        for name, why in explained.items():
            if not why:  # the fit arrays and the per-node predicates disagree (never seen)
                log.error("basic predicates disagree: node rejected without a reason", node=name)
        ev = state.evaluate(pod, numa_failed, mark=False)
        return {**explained, **{name: [ev.reason(name)] for name in ev.failed}}

    return Decision(chosen, totals, reasons, total)
