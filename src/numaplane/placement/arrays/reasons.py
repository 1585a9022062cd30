"""Reason codes of the NUMA plugin's verdicts, read from the arrays a scheduling cycle decides with.

:func:`reason_codes` gives, per node row of a :class:`~numaplane.placement.arrays.pipeline.Pipeline`
evaluation, ``FITS`` or the code of the upstream status message that follows from the node's data
alone (:data:`REASON_MESSAGES`), or ``EXPLAIN`` when the message needs the per-node explanation.
:func:`numa_verdicts` evaluates one pod on nodes given with their data (``numaplane explain``).
:class:`~numaplane.placement.cycle.Cycle` re-exports both.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from numaplane.placement.arrays.cluster import POLICY_CODES
from numaplane.placement.arrays.pipeline import Evaluation, Pipeline
from numaplane.placement.explain.filter import DEFAULT_OPTIONS, FilterOptions
from numaplane.placement.model.effective import effective_placement
from numaplane.placement.model.node import NodeInfo
from numaplane.placement.model.result import MSG_APP, MSG_INVALID_DATA, MSG_MALFORMED, MSG_POD
from numaplane.placement.model.strategies import ScoringStrategy
from numaplane.placement.model.view import NodeTopology
from numaplane.resources.pod import Pod

__all__ = ["EXPLAIN", "FITS", "REASON_MESSAGES", "numa_verdicts", "reason_codes"]

#: Reason codes of a node's NUMA verdict (:func:`reason_codes`): it fits; or the upstream
#: message of :data:`REASON_MESSAGES`; or ``EXPLAIN``, the message needs the per-node explanation.
FITS, UNTRUSTED, MALFORMED, CANNOT_ALIGN_POD, CANNOT_ALIGN_CONTAINER, EXPLAIN = range(6)
REASON_MESSAGES: Mapping[int, str] = {
    UNTRUSTED: MSG_INVALID_DATA,
    MALFORMED: MSG_MALFORMED,
    CANNOT_ALIGN_POD: MSG_POD,
    CANNOT_ALIGN_CONTAINER: MSG_APP,
}
_SNN = POLICY_CODES["single-numa-node"]


def reason_codes(pipeline: Pipeline, pod: Pod, ev: Evaluation | npt.NDArray[np.bool_]) -> npt.NDArray[np.int8]:
    """The reason code (module constants) of every row of ``ev`` (``pipeline.evaluate(pod)``, or its
    ``feasible`` verdicts alone), read
    from the arrays that took the decision. A rejection follows from the data alone when the data is
    untrusted (``UNTRUSTED``) or unreadable (``MALFORMED``), or, on usable ``single-numa-node`` data
    with zones, in pod scope (``CANNOT_ALIGN_POD``) and in container scope for a pod without init
    containers (``CANNOT_ALIGN_CONTAINER``: upstream reports every app container so); any other
    rejection (every one of a pod with its own ``numaplane.io/`` scope or policy) is ``EXPLAIN`` (the per-node explanation gives the message)."""
    feasible = ev.feasible if isinstance(ev, Evaluation) else ev
    cl = pipeline.cluster
    n = len(feasible)
    fresh, problem = cl.fresh[:n], cl.problem[:n]
    snn = cl.has_nrt[:n] & ~problem & (cl.policy[:n] == _SNN) & (cl.nzones[:n] > 0)
    codes = np.full(n, EXPLAIN, np.int8)
    wanted = effective_placement(pod)
    if wanted.is_default and wanted.preferences.topology_policy is None:
        codes[snn & cl.scope_pod[:n]] = CANNOT_ALIGN_POD
        if not pod.init_containers:
            codes[snn & ~cl.scope_pod[:n]] = CANNOT_ALIGN_CONTAINER
    # else: the pod's own scope/policy (or an invalid preference) decided; the per-node explanation says how
    codes[problem] = MALFORMED
    codes[~fresh] = UNTRUSTED
    codes[feasible] = FITS
    return codes


def numa_verdicts(
    pod: Pod,
    nodes: Mapping[str, tuple[NodeTopology | None, NodeInfo]],
    strategy: ScoringStrategy,
    options: FilterOptions = DEFAULT_OPTIONS,
) -> tuple[Evaluation, npt.NDArray[np.int8]]:
    """The NUMA plugin's verdict and score (the evaluation) and :func:`reason_codes` of ``pod`` on each
    of ``nodes`` given with their data (trusted; no cache), from the arrays a cycle decides with: for
    ``numaplane explain``."""
    pipeline = Pipeline(strategy, options)
    for name, (topology, info) in nodes.items():
        pipeline.update_node(name, topology, info)
    ev = pipeline.evaluate(pod)
    return ev, reason_codes(pipeline, pod, ev)
