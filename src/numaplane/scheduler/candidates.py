"""The extender's NUMA verdicts on one request's candidate names, read as arrays.

kube-scheduler asks the extender about up to :data:`~numaplane.limits.MAX_EXTENDER_NODES` names per
request. :func:`candidate_verdicts` maps the names to the rows of the cycle's NUMA evaluation once, with
one gather (``-1``: no row), and answers every question of filter (:func:`candidate_verdicts`) and
prioritize (:func:`candidate_scores`) from arrays indexed by the name's position in the request, each
asking the cycle only for what it needs (verdicts, or scores):

* ``feasible`` — the row's verdict (a name without a row fails);
* :func:`candidate_scores` — the row's 0..100 score (for a name without a row the per-node function's
  for a known node, ``0`` for an unknown one);
* ``known`` — the state holds a Node for the name (with or without a row);
* :meth:`CandidateVerdicts.reasons` — the upstream message of each failed position, one shared string
  per reason code (:data:`~numaplane.placement.arrays.reasons.REASON_MESSAGES`), the per-node explanation only
  for code ``EXPLAIN`` and nodes without a row;
* :meth:`CandidateVerdicts.preemptible` — failed positions on trusted zone data that fit once the node is
  emptied of pods (:meth:`~numaplane.placement.cycle.Cycle.emptied_evaluation`).

With ``mark=True`` the failed positions on trusted, readable data are reported to the NRT cache in one
call (:func:`~numaplane.placement.caches.cache.nodes_maybe_overreserved`), in request order. These are the
answers :meth:`SchedulerState.evaluate <numaplane.scheduler.state.SchedulerState.evaluate>` gives name by
name: the arrays are the ones the cache was synced into just before (the cycle's ``fresh``, ``has_nrt``,
``problem`` and ``nzones`` are the cached view's freshness, presence, problem and zones), so the
per-name cache reads of that loop are not needed (:meth:`~numaplane.placement.cycle.Cycle.trusted_rows`).
Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from typing import Any

import numpy as np
import numpy.typing as npt

from numaplane.placement.caches.cache import nodes_maybe_overreserved
from numaplane.placement.cycle import EXPLAIN, FITS, REASON_MESSAGES
from numaplane.placement.model.result import Reject
from numaplane.resources.pod import Pod
from numaplane.scheduler.state import SchedulerState
from numaplane.scheduler.verdicts import ALIGN_REASONS, MSG_UNEXPLAINED

__all__ = ["CandidateVerdicts", "candidate_scores", "candidate_verdicts"]

I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]
Objects = npt.NDArray[np.object_]

#: Message of each reason code (``None`` where the per-node explanation gives it), indexable by code.
_CODE_MESSAGES: Objects = np.array(
    [REASON_MESSAGES.get(code) for code in range(max(FITS, EXPLAIN, *REASON_MESSAGES) + 1)], dtype=object
)

#: Whether each reason code's message is a ``cannot align`` one, indexable by code.
_CODE_ALIGNS: B = np.array([message in ALIGN_REASONS for message in _CODE_MESSAGES.tolist()], dtype=np.bool_)


def _rows(index: Any, names: list[str]) -> I64:
    """The row of each name in ``index`` (a name → row mapping), ``-1`` for a name without one."""
    return np.fromiter(map(index.get, names, repeat(-1)), dtype=np.int64, count=len(names))


def _known(state: SchedulerState, names: list[str], rows: I64) -> B:
    """Whether the state holds a Node for each name (every name with a row does)."""
    known = rows >= 0
    nodes = state.nodes
    for pos in np.flatnonzero(~known).tolist():
        known[pos] = names[pos] in nodes
    return known


@dataclass(frozen=True)
class CandidateVerdicts:
    """One pod's NUMA filter verdicts on a request's names (module docstring); arrays by request
    position, ``all_feasible`` by row of the cycle's NUMA arrays."""

    state: SchedulerState
    pod: Pod
    names: Objects
    rows: I64
    feasible: B
    known: B
    all_feasible: B

    @property
    def failed(self) -> B:
        """Known names the NUMA filter rejects (with or without a row)."""
        return self.known & ~self.feasible

    def reasons(self) -> tuple[Objects, npt.NDArray[np.int8]]:
        """The upstream message of every failed position (``None`` elsewhere), and its reason code
        (``EXPLAIN`` for a message from the per-node explanation)."""
        failed = self.failed
        has_row = self.rows >= 0
        codes = np.full(len(self.rows), EXPLAIN, dtype=np.int8)
        with_row = failed & has_row
        if with_row.any():
            all_codes = self.state.cycle.reason_codes(self.pod, self.all_feasible)
            codes[with_row] = all_codes[self.rows[with_row]]
        messages: Objects = np.full(len(self.rows), None, dtype=object)
        messages[failed] = _CODE_MESSAGES[codes[failed]]
        for pos in np.flatnonzero(failed & (codes == EXPLAIN)).tolist():
            verdict = self.state.verdicts.explain(self.pod, str(self.names[pos]))
            messages[pos] = verdict.reason if isinstance(verdict, Reject) else MSG_UNEXPLAINED
        return messages, codes

    @staticmethod
    def aligning(messages: Objects, codes: npt.NDArray[np.int8]) -> B:
        """Whether each position's message (:meth:`reasons`) is a ``cannot align`` one (``ALIGN_REASONS``):
        by reason code, the explained messages one by one."""
        out = _CODE_ALIGNS[codes]
        for pos in np.flatnonzero(codes == EXPLAIN).tolist():
            out[pos] = messages[pos] in ALIGN_REASONS
        return out

    def preemptible(self) -> B:
        """Failed positions that evicting pods could make fit (module docstring)."""
        failed = self.failed & (self.rows >= 0)
        out = np.zeros(len(self.rows), dtype=np.bool_)
        if not failed.any():
            return out
        rows = self.rows[failed]
        trusted = self.state.cycle.trusted_rows(rows, zones=True)
        out[failed] = self.state.cycle.emptied_feasible(self.pod)[rows] & trusted
        return out


def candidate_verdicts(state: SchedulerState, pod: Pod, names: list[str], *, mark: bool) -> CandidateVerdicts:
    """``pod``'s filter verdicts on ``names`` (module docstring); ``mark``: report rejections to the cache."""
    index, all_feasible = state.cycle.numa_feasible(pod)
    rows = _rows(index, names)
    has_row = rows >= 0
    feasible = np.zeros(len(names), dtype=np.bool_)
    feasible[has_row] = all_feasible[rows[has_row]]
    array: Objects = np.empty(len(names), dtype=object)
    array[:] = names
    verdicts = CandidateVerdicts(state, pod, array, rows, feasible, _known(state, names, rows), all_feasible)
    if mark:
        rejected = has_row & ~feasible
        if rejected.any():
            trusted = state.cycle.trusted_rows(rows[rejected])
            report = array[rejected][trusted].tolist()
            if report:
                nodes_maybe_overreserved(state.cache, report, pod)
    return verdicts


def candidate_scores(state: SchedulerState, pod: Pod, names: list[str]) -> I64:
    """The 0..100 NUMA score of ``pod`` on each of ``names`` (module docstring), in request order."""
    index, all_scores = state.cycle.numa_scores(pod)
    rows = _rows(index, names)
    has_row = rows >= 0
    out = np.zeros(len(names), dtype=np.int64)
    out[has_row] = all_scores[rows[has_row]]
    for pos in np.flatnonzero(_known(state, names, rows) & ~has_row).tolist():  # Node object unusable
        out[pos] = state.verdicts.numa_score(pod, names[pos])
    return out
