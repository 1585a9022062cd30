"""``numaplane simulate --from SNAPSHOT``: what-if on a captured cluster (see :mod:`numaplane.sim.whatif`)."""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from numaplane.cli._output import InputError, console, emit_document
from numaplane.cli._validate import warn_line
from numaplane.documents import DocumentError, read_document
from numaplane.sim.errors import ScenarioError, SimulationError, SnapshotFormatError, WorkloadError
from numaplane.sim.scenario import Scenario, parse_policy_flag, parse_scenario, parse_schedulers
from numaplane.sim.snapshot import read_snapshot
from numaplane.sim.spec import SchedulerSpec
from numaplane.sim.whatif import load_cluster, run_whatif
from numaplane.sim.whatif_report import render_whatif, whatif_document
from numaplane.sim.workload import parse_workload

__all__ = ["FROM_OPTIONS", "run_from"]

#: options that only make sense with --from (added to `simulate` by numaplane.cli.simulate)
FROM_OPTIONS = (
    click.option(
        "--from",
        "from_snapshot",
        type=click.Path(dir_okay=False),
        metavar="SNAPSHOT",
        help="What-if on a captured cluster (`numaplane snapshot` output) instead of a generated one; the "
        "options of a generated cluster (--nodes, --topology, --workload, --policy, --report, ...) are refused with it.",
    ),
    click.option(
        "--scenario",
        type=click.Path(dir_okay=False),
        help="With --from: a WhatIfScenario file (policy changes per node selector, added workload, schedulers).",
    ),
    click.option(
        "--set-policy",
        "set_policy",
        multiple=True,
        metavar="POLICY[/SCOPE][@SELECTOR]",
        help="With --from: change the topology manager policy of the nodes a label selector matches (repeatable).",
    ),
    click.option(
        "--add-workload",
        "add_workload",
        multiple=True,
        type=click.Path(dir_okay=False),
        help="With --from: add the pods of a Workload file (repeatable).",
    ),
)


def _read_yaml(path: str, what: str) -> Any:
    try:
        return read_document(path)
    except DocumentError as exc:
        reason = exc.reason.replace("cannot read:", f"cannot read {what}:", 1)
        raise ScenarioError(path, reason) from exc


def _scenario(opts: dict[str, Any], schedulers_given: bool) -> Scenario:
    scenario = (
        parse_scenario(
            _read_yaml(opts["scenario"], "scenario"), opts["scenario"], validation=opts["validation"], warn=warn_line
        )
        if opts["scenario"]
        else Scenario()
    )
    flags = Scenario(
        policies=tuple(parse_policy_flag(text) for text in opts["set_policy"]),
        workload=tuple(
            a
            for path in opts["add_workload"]
            for a in parse_workload(_read_yaml(path, "workload"), path, validation=opts["validation"], warn=warn_line)
        ),
        schedulers=parse_schedulers([s for s in opts["schedulers"].split(",") if s.strip()], "--schedulers")
        if schedulers_given
        else (),
    )
    combined = scenario.combined(flags)
    return (
        combined if combined.schedulers else Scenario(combined.policies, combined.workload, (SchedulerSpec("default"),))
    )


def run_from(opts: dict[str, Any], *, schedulers_given: bool) -> None:
    """Load the snapshot, replay the scenario, print the report in ``opts["output"]`` format."""
    err = console(stderr=True)
    quiet = opts["quiet"] or not sys.stderr.isatty()
    try:
        started = time.perf_counter()
        snapshot = read_snapshot(opts["from_snapshot"])
        scenario = _scenario(opts, schedulers_given)
        cluster = load_cluster(snapshot)
        if not quiet:
            err.print(f"loaded {opts['from_snapshot']} in {time.perf_counter() - started:.1f} s")
        result = run_whatif(cluster, scenario)
    except (ScenarioError, SnapshotFormatError, WorkloadError, DocumentError) as exc:
        raise InputError(str(exc)) from exc  # a bad input: exit 2
    except (SimulationError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    meta = {"file": opts["from_snapshot"], **{k: v for k, v in snapshot.metadata.items() if isinstance(v, str)}}
    doc = whatif_document(result, meta)
    if opts["output"] == "table":
        render_whatif(doc, console())
    else:
        emit_document(doc, opts["output"])
