"""``numaplane explain``: per node, whether a pod fits its NUMA zones and, if not, which zone lacks what.

Inputs: ``--pod FILE`` (a Pod, YAML or JSON); NodeResourceTopology objects from ``--nrt PATH`` (a file
or a folder of ``*.yaml``/``*.yml``/``*.json`` files; multi-document YAML and ``*List`` documents are
expanded) or from the API server (``--kubeconfig PATH`` / ``--api-server URL``, which also reads the
Nodes); Node objects from ``--nodes PATH`` (same forms; optional). Unreadable files and documents that
are not NodeResourceTopology objects are reported as ignored, unless nothing usable is left: a
``--nrt`` (or ``--nodes``) input without one object of its kind, or inputs that leave no node to
explain, are errors naming the input (exit 2), never "fits 0 node(s)". Output: ``--output
table|json|yaml``. The pod is defaulted as the API server does (:func:`pod_from_manifest`). Exit
status 0 when the pod fits some node, 1 when it fits none (0 with ``--exit-zero``), 2 for unusable
arguments or input.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import click

from numaplane.cli._connect import api_server_option
from numaplane.cli._output import OUTPUT_CHOICES, InputError, console, emit_document
from numaplane.cli._validate import validate_option, warn_line
from numaplane.documents import DocumentError, read_document, read_documents
from numaplane.placement.model.strategies import STRATEGY_TYPES
from numaplane.resources.podschema import Validation

_SUFFIXES = (".yaml", ".yml", ".json")
_STRATEGIES = STRATEGY_TYPES  # the one table of scoring strategies


def _documents(path: Path, kind: str) -> tuple[list[tuple[str, Any]], list[tuple[str, str]]]:
    """``(source, document)`` pairs of ``kind`` under ``path`` and ``(source, problem)`` pairs."""
    files = sorted(p for p in path.iterdir() if p.suffix in _SUFFIXES) if path.is_dir() else [path]
    docs: list[tuple[str, Any]] = []
    problems: list[tuple[str, str]] = []
    for file in files:
        try:
            loaded = read_documents(file)
        except DocumentError as exc:
            problems.append((str(file), f"unreadable: {exc.reason}"))
            continue
        for index, doc in enumerate(loaded):
            source = str(file) if len(loaded) == 1 else f"{file}#{index}"
            items = doc.get("items") if isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List") else None
            for item in items if isinstance(items, list) else [doc]:
                if isinstance(item, dict) and item.get("kind") not in (None, kind):
                    problems.append((source, f"kind {item.get('kind')!r} is not {kind}"))
                    continue
                docs.append((source, item))
    return docs, problems


def _load_pod(path: Path, validation: Validation = "strict") -> Any:
    from numaplane.resources.errors import ResourceError
    from numaplane.resources.manifest import pod_from_manifest

    try:
        doc = read_document(path)
    except DocumentError as exc:
        raise InputError(f"--pod {path}: unreadable: {exc.reason}") from exc
    if doc is None:
        raise InputError(f"--pod {path}: empty: no YAML/JSON document in it")
    if not isinstance(doc, dict):
        raise InputError(f"--pod {path}: not a Pod object")
    try:
        return pod_from_manifest(doc, validation=validation, warn=lambda m: warn_line(f"--pod {path}: {m}"))
    except (ResourceError, AttributeError, TypeError, ValueError) as exc:
        raise InputError(f"--pod {path}: {exc}") from exc


async def _from_api(kubeconfig: str | None, api_server: str | None) -> tuple[list[tuple[str, Any]], list[Any]]:
    from numaplane.kube.client import LightkubePort
    from numaplane.scheduler.explain import fetch_cluster

    kube = LightkubePort.from_server(api_server) if api_server else LightkubePort.from_kubeconfig(kubeconfig)
    try:
        return await fetch_cluster(kube)
    finally:
        await kube.close()


def _table(report: Any) -> None:
    from rich.markup import escape
    from rich.table import Table

    # the pod's own numaplane.io/ preferences: each node's notes say how they changed its verdict
    asked = ", ".join(f"{k}={v}" for k, v in sorted(report.pod.annotations.items()) if k.startswith("numaplane.io/"))
    title = f"pod {report.pod.key} ({report.pod.qos_class}{'; ' + asked if asked else ''})"
    table = Table(title=f"{escape(title)}: fits {len(report.fitting)} node(s)")
    for column in ("NODE", "FITS", "SCORE", "POLICY / SCOPE", "WHY"):
        table.add_column(column, overflow="fold")
    for node in report.nodes:
        lines = [node.summary()]
        if not node.fits:
            where = ", ".join(
                p for p in (node.unit and f"unit {node.unit}", node.resource and f"resource {node.resource}") if p
            )
            if where:
                lines.append(where)
            for s in node.shortfalls:
                have = "not listed" if s["available"] is None else f"{s['available']} available"
                lines.append(f"{s['zone']}: {s['resource']} {s['requested']} requested, {have}")
        lines.extend(n for n in node.notes if n not in lines)
        lines.extend(f"ignored zone {z.source}: {z.reason}" for z in node.ignored_zones)
        policy = f"{node.policy} / {node.scope}" if node.policy else "-"
        table.add_row(
            escape(node.node),
            "yes" if node.fits else "no",
            "-" if node.score is None else str(node.score),
            escape(policy),
            escape("\n".join(lines)),
        )
    out = console()
    out.print(table)
    for item in report.ignored:
        out.print(f"ignored {escape(item.source)}: {escape(item.reason)}")


@click.command(name="explain")
@click.option("--pod", "pod_file", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--nrt",
    "nrt_path",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    help="NodeResourceTopology file or folder.",
)
@click.option(
    "--nodes", "nodes_path", type=click.Path(exists=True, path_type=Path), default=None, help="Node file/folder."
)
@click.option("--kubeconfig", type=click.Path(dir_okay=False), default=None, help="Read NRTs and Nodes from the API.")
@api_server_option
@click.option("--scoring-strategy", type=click.Choice(_STRATEGIES), default="LeastAllocated", show_default=True)
@click.option("--kubelet-admission", is_flag=True, help="Also check restricted / best-effort nodes.")
@click.option("--output", "-o", type=click.Choice(OUTPUT_CHOICES), default="table", show_default=True)
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when the pod fits no node (default: exit 1).")
@validate_option
def command(
    pod_file: Path,
    nrt_path: Path | None,
    nodes_path: Path | None,
    kubeconfig: str | None,
    api_server: str | None,
    scoring_strategy: str,
    kubelet_admission: bool,
    output: str,
    exit_zero: bool,
    validation: Validation,
) -> None:
    """Explain per node whether POD fits its NUMA zones, and which zone lacks what if not.

    Exit status: 0 the pod fits some node, 1 it fits none (see --exit-zero), 2 unusable input (also an
    --nrt or --nodes input holding no object of its kind: nothing to explain against).

    \b
    Examples:
      numaplane explain --pod examples/pods/guaranteed.yaml --nrt examples/nrts/
      numaplane explain --pod pod.yaml --kubeconfig ~/.kube/config -o json
    """
    from numaplane.placement.explain.filter import FilterOptions
    from numaplane.placement.model.strategies import ScoringStrategy
    from numaplane.scheduler.explain import Ignored, explain_pod

    if nrt_path is None and kubeconfig is None and api_server is None:
        raise click.UsageError("give --nrt PATH, or --kubeconfig PATH / --api-server URL")
    if nrt_path is not None and (kubeconfig is not None or api_server is not None):
        raise click.UsageError("--nrt and --kubeconfig/--api-server are exclusive")
    pod = _load_pod(pod_file, validation)
    problems: list[tuple[str, str]] = []
    nodes: list[Any] | None = None
    if nrt_path is not None:
        nrts, found = _documents(nrt_path, "NodeResourceTopology")
        if not nrts:  # nothing to explain against: an input error, not "fits 0 node(s)"
            raise InputError(_nothing_in(f"--nrt {nrt_path}", nrt_path, "NodeResourceTopology", found))
        problems += found
    else:
        from numaplane.kube.errors import KubeError

        try:
            nrts, nodes = asyncio.run(_from_api(kubeconfig, api_server))
        except KubeError as exc:
            raise click.ClickException(f"reading the cluster: {exc}") from exc
    if nodes_path is not None:
        node_docs, found = _documents(nodes_path, "Node")
        if not node_docs:
            raise InputError(_nothing_in(f"--nodes {nodes_path}", nodes_path, "Node", found))
        problems += found
        nodes = [doc for _, doc in node_docs]
    report = explain_pod(
        pod,
        nrts,
        nodes,
        strategy=ScoringStrategy(scoring_strategy),
        options=FilterOptions(kubelet_admission=kubelet_admission),
        problems=[Ignored(source, reason) for source, reason in problems],
    )
    if not report.nodes:  # e.g. NRTs without a name: no node was explained, so none was found lacking
        first = f": {report.ignored[0].source}: {report.ignored[0].reason}" if report.ignored else ""
        where = f"--nrt {nrt_path}" if nrt_path is not None else "the cluster"
        raise InputError(f"{where}: no node to explain ({len(report.ignored)} input(s) ignored{first})")
    if output == "table":
        _table(report)
    else:
        emit_document({"apiVersion": "numaplane.io/v1", "kind": "PodExplanation", **report.to_dict()}, output)
    if not report.fitting and not exit_zero:
        raise SystemExit(1)


def _nothing_in(option: str, path: Path, kind: str, problems: list[tuple[str, str]]) -> str:
    """The error for an input that holds no object of ``kind``, naming it and what was found instead."""
    if not problems:
        what = f"no {'/'.join(_SUFFIXES)} file in the folder" if path.is_dir() else "no document in it"
        return f"{option}: no {kind} object ({what})"
    source, reason = problems[0]
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"{option}: no {kind} object; {source}: {reason}{more}"


__all__ = ["command"]
