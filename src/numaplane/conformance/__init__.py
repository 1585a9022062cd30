"""Conformance runner for the shared case format (``shared/conformance/SCHEMA.md``).

Each kind has a module in :mod:`numaplane.conformance.kinds` exposing ``run(case, ctx) -> Outcome``;
:mod:`numaplane.conformance.runner` loads case files, dispatches and tallies. A case of a kind that
has no module counts as failed, never skipped.
"""
