"""NUMA-aware placement for the scheduler (pure core: no I/O, no clock), in rooms by role.

The NodeResourceTopologyMatch plugin's decisions, laid out as scheduler-plugins lays out its plugin
(the import direction is a lint-imports contract: each room imports only the rooms below it):

* :mod:`~numaplane.placement.cycle` (top) — the one scheduling cycle over a changing set of nodes,
  which the standalone scheduler, the extender and the simulator drive: the node-selection rule
  (weights, tie break, ``percentageOfNodesToScore`` search), an input mask for the caller's other
  predicates, and the extender's filter and prioritize answered in one call each;
* :mod:`~numaplane.placement.arrays` — the deciding arrays: one pod over every node at once
  (NUMA struct-of-arrays, kernels, row memo per pod shape, NodeResourcesFit arrays, the search,
  every row's reason code);
* :mod:`~numaplane.placement.caches` — Passthrough, DiscardReserved and over-reserve NRT caches as
  event-driven state machines;
* :mod:`~numaplane.placement.explain` — the explaining per-node functions (``filter``, ``score``,
  LeastNUMANodes, kubelet-admission mode, basic predicates, DRA zones): the reference the arrays equal,
  and the text of a rejection;
* :mod:`~numaplane.placement.model` (bottom) — the shared values: NRT and Node views, requests,
  effective preferences, verdicts, errors, the table of scoring strategies.

The scheduler and the simulator use the cycle, never the arrays directly (lint-imports).
Submodules are imported directly (``from numaplane.placement.explain.filter import filter``); no
package here imports anything, so that light users do not pay for numpy.
"""
