"""NUMA-aware placement for the scheduler (pure core: no I/O, no clock).

The NodeResourceTopologyMatch plugin's decisions, per node and vectorised over a cluster:

* :mod:`~numaplane.placement.view` — what the scheduler reads from an NRT object (policy, scope, zones);
* :mod:`~numaplane.placement.filter` — ``filter(pod, nrt, node) -> Fit | Reject``
  (:mod:`~numaplane.placement.result`), with :mod:`~numaplane.placement.admission` as the opt-in
  kubelet-admission mode for ``restricted`` / ``best-effort`` nodes;
* :mod:`~numaplane.placement.score` — ``score(pod, nrt, node, strategy) -> int`` (Most/LeastAllocated,
  BalancedAllocation) and :mod:`~numaplane.placement.least_numa` (LeastNUMANodes);
* :mod:`~numaplane.placement.cache` — Passthrough, DiscardReserved and
  :mod:`~numaplane.placement.overreserve` caches as event-driven state machines;
* :mod:`~numaplane.placement.pipeline` — one pod over many nodes at once, on the struct-of-arrays view
  of :mod:`~numaplane.placement.cluster` with the kernels of :mod:`~numaplane.placement.kernels` and
  :mod:`~numaplane.placement.pipeline_numa`; results equal the per-node functions;
* :mod:`~numaplane.placement.fit` — kube-scheduler's NodeResourcesFit and LeastAllocated score over
  every node at once (store: :mod:`~numaplane.placement.fit_store`, quantities and requests:
  :mod:`~numaplane.placement.fit_quantity`);
* :mod:`~numaplane.placement.cycle` — the one scheduling cycle over a changing set of nodes, which
  the standalone scheduler, the extender and the simulator drive: the node-selection rule (weights,
  tie break, ``percentageOfNodesToScore`` search), the fit and NUMA arrays, an input mask for the
  caller's other predicates; the reason code of every node's verdict comes from
  :mod:`~numaplane.placement.reasons`. The scheduler and the simulator use these modules, never the
  pipeline, its kernels or the search directly (lint-imports).

Submodules are imported directly (``from numaplane.placement.filter import filter``); this package
imports nothing so that light users do not pay for numpy.
"""
