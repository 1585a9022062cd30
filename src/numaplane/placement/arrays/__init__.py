"""The deciding room: one pod over many nodes at once, in struct-of-arrays form.

The NUMA arrays (:mod:`.cluster`) with their kernels (:mod:`.kernels`, :mod:`.pipeline_numa`,
:mod:`.numa_combos`) and the row memo per pod shape (:mod:`.shapes`) behind :mod:`.pipeline`;
kube-scheduler's NodeResourcesFit arrays (:mod:`.fit`, :mod:`.fit_store`); the
``percentageOfNodesToScore`` search (:mod:`.sampling`) and every row's reason code (:mod:`.reasons`).
Their verdicts and scores equal the per-node functions' (:mod:`numaplane.placement.explain`), checked by
the property tests. Only :mod:`numaplane.placement.cycle` drives them (lint-imports). Pure: no I/O.
"""
