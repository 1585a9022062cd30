"""``numaplane e2e``: the validation suite a user runs against their own cluster.

Read-only checks by default (:mod:`numaplane.e2e.checks`), disruptive ones with ``--serial``
(:mod:`numaplane.e2e.serial`); results as a table, JSON or JUnit XML (:mod:`numaplane.e2e.report`).
"""
