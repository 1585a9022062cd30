"""``numaplane conformance FILE...``: run conformance cases of the shared format."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from numaplane.cli._output import InputError, console, emit_document
from numaplane.conformance.errors import CaseFileError
from numaplane.conformance.runner import Report, known_kinds, run_files


def _expand(paths: tuple[str, ...]) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            files.extend(sorted(p.glob("*.jsonl")))
        elif p.is_file():
            files.append(p)
        else:
            raise InputError(f"{raw}: no such file or directory")
    if not files:
        raise InputError("no .jsonl case files given")
    return files


@click.command(name="conformance")
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option(
    "--set-dir",
    "set_dirs",
    multiple=True,
    type=click.Path(file_okay=False),
    help="Extra case-set folder whose topologies/ and data/ resolve fixture names (default: the files' folders).",
)
@click.option("--output", "-o", type=click.Choice(["table", "json", "yaml"]), default="table", show_default=True)
@click.option("--kind", "kinds", multiple=True, help="Only run cases of this kind (repeatable).")
@click.option("--id", "ids", multiple=True, help="Only run the case with this id (repeatable).")
@click.option(
    "--path",
    "which",
    type=click.Choice(["both", "reference", "production"]),
    default="both",
    show_default=True,
    help="reference: each kind's runner (nrt-filter/score: the scheduler's vectorised arrays, nrt-zones: the "
    "exporter's scanner); production: also the agent's admission path for cpu-static and memory-static "
    "(tallied as '<kind> (production)').",
)
def command(
    files: tuple[str, ...],
    set_dirs: tuple[str, ...],
    output: str,
    kinds: tuple[str, ...],
    ids: tuple[str, ...],
    which: str,
) -> None:
    """Run conformance cases (JSON lines, format of shared/conformance/SCHEMA.md).

    FILES are .jsonl case files or folders holding them. Prints pass/fail per kind and a readable
    diff for each failure; exits 1 when any case fails. A case whose kind has no runner counts as
    failed (once), never as skipped. A case the production path does not apply to is counted as
    skipped on that row, with the reason below the table (its id in -o json). A file that is not
    UTF-8 JSON lines or holds no case, or a case lacking a field its kind reads, is an input error
    (exit 2) naming the file, line, case and field.

    Example: numaplane conformance ../shared/conformance/cpu-take.jsonl ../shared/conformance/cpu-static.jsonl
    """
    paths = _expand(files)
    unknown = sorted(set(kinds) - set(known_kinds()))
    if unknown:
        raise click.BadParameter(
            f"unknown kind(s) {', '.join(unknown)}; known: {', '.join(known_kinds())}", param_hint="--kind"
        )
    run_paths = ("reference", "production") if which == "both" else (which,)
    try:
        report = run_files(
            paths, [Path(d) for d in set_dirs], kinds=set(kinds) or None, ids=set(ids) or None, paths_to_run=run_paths
        )
    except CaseFileError as exc:
        raise InputError(str(exc)) from exc
    if not report.results and (kinds or ids):
        raise InputError("no case in the files matches the given --kind / --id")
    if output == "table":
        _print_table(report)
    else:
        emit_document(report.to_dict(), output)
    if report.failed:
        raise SystemExit(1)


def _print_table(report: Report) -> None:
    out = console()
    for r in report.results:
        if r.outcome.passed:
            continue
        out.rule(f"[bold red]FAIL[/] {escape(r.id)}  ({escape(r.label)})")
        if r.note:
            out.print(f"[dim]{escape(r.note)}[/]")
        out.print(f"[bold]where:[/]    {escape(str(r.outcome.where))}")
        out.print(f"[bold]expected:[/] {escape(json.dumps(r.outcome.expected, sort_keys=True))}")
        out.print(f"[bold]got:[/]      {escape(_show(r.outcome.got))}")
    table = Table(title="conformance")
    table.add_column("kind")
    table.add_column("passed", justify="right", style="green")
    table.add_column("failed", justify="right", style="red")
    table.add_column("skipped", justify="right")
    for kind, tally in report.by_kind().items():
        table.add_row(escape(kind) or "(none)", str(tally["passed"]), str(tally["failed"]), str(tally["skipped"]))
    total = ("total", str(report.passed), str(report.failed), str(len(report.skipped)))
    table.add_row(*(f"[bold]{cell}[/]" for cell in total))
    out.print(table)
    for label, reasons in report.skip_reasons().items():
        for reason, count in reasons.items():
            out.print(f"skipped on {escape(label)}: {count} case(s): {escape(reason)}")
    if report.skipped:
        out.print("(the skipped cases' ids: -o json, skippedCases)")


def _show(value: object) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True)
    except TypeError:
        return repr(value)
