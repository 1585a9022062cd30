"""One standalone scheduling decision, and how an unschedulable pod is reported.

:func:`decide` — kube-scheduler's basic predicates on every node
(:meth:`SchedulerState.basic_filter`), the NUMA filter and score on the nodes that passed
(:meth:`SchedulerState.evaluate`), then the node the shared selection rule picks
(:func:`numaplane.placement.cycle.best_node` over :func:`numaplane.placement.cycle.totals` with the
configured weights: the same rule the simulator applies). :class:`Decision` keeps the per-node
reasons, and :func:`fit_error_message` turns them into kube-scheduler's ``FitError`` text.

No I/O; the only side effect of :func:`decide` is the NUMA filter's feedback to the cache.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

import structlog

from numaplane.placement.cycle import best_node, totals
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

    ``reasons`` holds every rejected node's reasons: those given, and those of the ``unexplained``
    nodes, asked of ``explain`` (in that order, ahead of the given ones) when :attr:`reasons` is first
    read — so read it before the scheduler's state changes (the loop does, in the same cycle).
    :attr:`rejected` counts the rejected nodes without asking.
    """

    def __init__(
        self,
        node: str | None,
        scores: Mapping[str, int],
        reasons: Mapping[str, list[str]],
        total: int,
        *,
        unexplained: Sequence[str] = (),
        explain: Callable[[str], list[str]] | None = None,
    ) -> None:
        if unexplained and explain is None:
            raise ValueError("unexplained nodes need an explain function")
        self.node = node
        self.scores = dict(scores)
        self._reasons = dict(reasons)
        self._unexplained = list(unexplained)
        self._explain = explain
        self.total = total

    @property
    def reasons(self) -> dict[str, list[str]]:
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
        """How many nodes were rejected."""
        return len(self._reasons) + len(self._unexplained)

    @property
    def message(self) -> str:
        return fit_error_message(self.total, self.reasons)


def decide(state: SchedulerState, pod: Pod) -> Decision:
    """Predicates, NUMA filter and scores of ``pod`` over every node, and the chosen node (module
    docstring); no side effect but the cache's filter feedback."""
    basic = state.basic_filter(pod)
    reasons: dict[str, list[str]] = {}
    ev = state.evaluate(pod, basic.passed)
    for name in ev.failed:
        reasons[name] = [ev.reason(name)]
    for name in ev.unknown:
        reasons[name] = ["node not found"]
    fit_scores = dict(zip(ev.scores, state.fit_scores(pod, list(ev.scores)), strict=True))
    scores = totals(state.config.selection, ev.scores, fit_scores)
    total = len(basic.passed) + len(basic.failed)
    explain = functools.partial(state.verdicts.basic_reasons, pod)
    return Decision(best_node(scores), scores, reasons, total, unexplained=basic.failed, explain=explain)
