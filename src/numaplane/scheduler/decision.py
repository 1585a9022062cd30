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
from collections.abc import Callable, Mapping
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
    ``percentageOfNodesToScore`` 100), or a function returning them; ``reasons``: every rejected
    node's reasons, or a function returning them. A function is called when its attribute is first
    read — so read :attr:`scores` and :attr:`reasons` before the scheduler's state changes (the loop
    does, in the same cycle, before any ``await``). ``feasible`` (how many nodes ``scores`` holds) and
    ``score`` (the chosen node's total) let a caller that reads only those skip building ``scores``:
    per placed pod the loop reads the node, its score and the counts, never a mapping over every
    feasible node. :attr:`rejected` counts the nodes of ``total`` not in ``scores``.
    """

    def __init__(
        self,
        node: str | None,
        scores: Mapping[str, int] | Callable[[], Mapping[str, int]],
        reasons: Mapping[str, list[str]] | Callable[[], Mapping[str, list[str]]],
        total: int,
        *,
        feasible: int | None = None,
        score: int | None = None,
    ) -> None:
        if callable(scores) and feasible is None:
            raise ValueError("scores given as a function need their count (feasible)")
        self.node = node
        self._scores_given = scores if callable(scores) else None
        self._scores = {} if callable(scores) else dict(scores)
        self._given = reasons if callable(reasons) else None
        self._reasons = {} if callable(reasons) else dict(reasons)
        self.feasible = len(self._scores) if feasible is None else feasible
        self._score = score
        self.total = total

    @property
    def scores(self) -> dict[str, int]:
        if self._scores_given is not None:
            self._scores, self._scores_given = dict(self._scores_given()), None
        return self._scores

    @property
    def score(self) -> int:
        """The chosen node's total score (``KeyError`` without a chosen node)."""
        if self._score is not None:
            return self._score
        if self.node is None:
            raise KeyError("no node was chosen")
        return self.scores[self.node]

    @property
    def reasons(self) -> dict[str, list[str]]:
        if self._given is not None:
            self._reasons, self._given = dict(self._given()), None
        return self._reasons

    @property
    def rejected(self) -> int:
        """How many nodes were rejected: those of ``total`` not in ``scores``."""
        return self.total - self.feasible

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
    chosen_total: int | None = None
    scores: Any = None
    if positions:
        if cycle.fit.scores_bounded(pod):
            scores = cycle.totals(pod, found)
        else:  # fit scores beyond 0..100 and int64 (negative amounts): exact per node, Python integers
            scores = np.array(state.fit_scores(pod, [names[i] for i in positions]), dtype=object)
            if found.numa_scores is not None:
                rules = cycle.rules
                scores = rules.numa_weight * found.numa_scores.astype(object) + rules.fit_weight * scores
        picked = cycle.pick(found.rows, scores)
        chosen = names[picked]
        chosen_total = int(scores[int(np.flatnonzero(found.rows == picked)[0])])

    def totals() -> dict[str, int]:
        # every feasible node's total: built only when read (DRA's order, the reasons), not per placed pod
        if scores is None:
            return {}
        return {names[i]: int(t) for i, t in zip(positions, scores.tolist(), strict=True)}

    total = len(state.nodes)

    def reasons() -> dict[str, list[str]]:
        # Asked only when read (a pod left pending, or a DRA placement that failed), before the state
        # changes: every node's verdict in Python, O(nodes) — not paid per placed pod.
        names = cycle.names
        ok = passed & cycle.fits(pod)
        found_at = set(positions)
        numa_failed = sorted(
            name for i, (name, good) in enumerate(zip(names, ok.tolist(), strict=True)) if good and i not in found_at
        )
        basic_ok = set(numa_failed).union(names[i] for i in positions)
        explained = {
            name: state.verdicts.basic_reasons(pod, name) for name in sorted(state.nodes) if name not in basic_ok
        }
        for name, why in explained.items():
            if not why:  # the fit arrays and the per-node predicates disagree (never seen)
                log.error("basic predicates disagree: node rejected without a reason", node=name)
        ev = state.evaluate(pod, numa_failed, mark=False)
        return {**explained, **{name: [ev.reason(name)] for name in ev.failed}}

    return Decision(chosen, totals, reasons, total, feasible=len(positions), score=chosen_total)
