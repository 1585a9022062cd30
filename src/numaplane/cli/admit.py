"""``numaplane admit``: admit pods on one node with the resource manager, as a dry run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from numaplane.cli._output import InputError, console, emit_document, format_bytes
from numaplane.cli._validate import validate_option, warn_line
from numaplane.documents import DocumentError, read_documents
from numaplane.policy.config_schema import CONFIG_SCHEMA
from numaplane.policy.errors import PolicyConfigError
from numaplane.policy.manager import ResourceManager
from numaplane.resources.errors import PodSpecError
from numaplane.resources.manifest import pod_from_manifest
from numaplane.resources.pod import Pod
from numaplane.resources.podschema import Validation
from numaplane.sim.cluster import load_topology
from numaplane.sim.errors import ClusterSpecError


def _read_yaml_documents(path: str) -> list[Any]:
    """The non-empty documents of a YAML/JSON file; an empty file is an error, never silently nothing."""
    try:
        docs = read_documents(path)
    except DocumentError as exc:
        raise InputError(str(exc)) from exc
    if not docs:
        raise InputError(f"{path}: empty: no YAML/JSON document in it")
    return docs


@click.command(name="admit")
@click.argument("pods", nargs=-1, type=click.Path(dir_okay=False))
@click.option(
    "--topology",
    "topology_spec",
    default="intel-xeon-gold6330-2s2n-112t-pci",
    show_default=True,
    help="A built-in topology name, a topology JSON/YAML file, or a sysfs folder / .tar.gz snapshot.",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    help="The resource manager's config document (YAML/JSON; see README). Default: kubelet defaults "
    "with the static CPU policy.",
)
@click.option("--output", "-o", type=click.Choice(["table", "json", "yaml"]), default="table", show_default=True)
@click.option("--print-config-schema", is_flag=True, help="Print the config document's JSON schema and exit.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when a pod is rejected (default: exit 1 when any pod is).")
@validate_option
def command(
    pods: tuple[str, ...],
    topology_spec: str,
    config_path: str | None,
    output: str,
    print_config_schema: bool,
    exit_zero: bool,
    validation: Validation,
) -> None:
    """Admit POD files (YAML/JSON, several documents per file allowed) in order on one node.

    Shows, per pod and container, the merged NUMA hint and the exclusive CPUs, memory blocks and
    devices the kubelet-exact managers give, or the admission error (TopologyAffinityError,
    SMTAlignmentError, ...). Nothing is changed anywhere: a dry run for "what would the node do".
    Pods are defaulted as the API server does (a request missing for a resource is its limit), and
    what the API server refuses is refused. Exit status: 0 all admitted, 1 a pod was rejected (see
    --exit-zero), 2 unusable input.

    \b
    Examples:
      numaplane admit examples/pods/guaranteed.yaml
      numaplane admit --config node.yaml pod-a.yaml pod-b.yaml -o json
    """
    if print_config_schema:
        emit_document(CONFIG_SCHEMA, "json")
        return
    if not pods:
        raise click.UsageError("give at least one POD file")
    manager = _manager(topology_spec, config_path)
    parsed = [pod for path in pods for pod in _read_pods(path, validation)]
    results = [manager.admit(pod).to_dict() | {"name": pod.key} for pod in parsed]
    rejected = sum(not r["admitted"] for r in results)
    if output != "table":
        emit_document(
            {
                "apiVersion": "numaplane.io/v1",
                "kind": "AdmissionReport",
                "topology": manager.topology.name,
                "admissions": results,
                "available": {str(numa): dict(resources) for numa, resources in sorted(manager.available().items())},
            },
            output,
        )
    else:
        console().print(_table(manager, results))
        if rejected:
            console().print(f"{rejected} of {len(results)} pod(s) rejected")
    _exit(rejected, exit_zero)


def _manager(topology_spec: str, config_path: str | None) -> ResourceManager:
    """The resource manager of ``--topology`` and ``--config`` (bad input: :class:`InputError`)."""
    try:
        topology = load_topology(topology_spec)
    except ClusterSpecError as exc:
        raise InputError(f"--topology {topology_spec}: {exc}") from exc
    config_doc: Any = {"cpuManager": {"reservedCPUCount": 1}}
    if config_path:
        docs = _read_yaml_documents(config_path)
        if len(docs) > 1:
            raise InputError(f"{config_path}: {len(docs)} documents; the config is one document")
        config_doc = docs[0]
    try:
        return ResourceManager(topology, config_doc)
    except PolicyConfigError as exc:
        raise InputError(f"{config_path or 'config'}: {exc}") from exc


def _read_pods(path: str, validation: Validation = "strict") -> list[Pod]:
    """The pods of one file, checked against the Pod schema (``validation``) and defaulted as the API
    server does (bad input: :class:`InputError`)."""
    pods = []
    for i, doc in enumerate(_read_yaml_documents(path)):
        where = f"{path} (document {i})"

        def warn(message: str, where: str = where) -> None:
            warn_line(f"{where}: {message}")

        try:
            pods.append(pod_from_manifest(doc, validation=validation, warn=warn))
        except PodSpecError as exc:
            raise InputError(f"{path} (document {i}): {exc}") from exc
    return pods


def _table(manager: ResourceManager, results: list[dict[str, Any]]) -> Table:
    """One row per admitted container, one per rejected pod."""
    config = manager.config
    table = Table(title=f"admission on {manager.topology.name} ({config.topology_policy}/{config.topology_scope})")
    for col in ("pod", "container", "result", "NUMA hint", "exclusive CPUs", "memory", "devices"):
        table.add_column(col, overflow="fold")
    for r in results:
        if not r["admitted"]:
            failure = f"[red]{escape(r['reason'])}[/]: {escape(r['message'])}"
            table.add_row(escape(r["name"]), escape(r.get("container") or "-"), failure, "", "", "", "")
            continue
        for c in r["containers"]:
            table.add_row(escape(r["name"]), escape(c["name"]), "[green]admitted[/]", *_container_cells(c))
    return table


def _container_cells(c: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """NUMA hint, exclusive CPUs, memory blocks and devices of one admitted container."""
    hint = c["hint"]
    hint_text = "-" if hint is None else f"{hint['numa']}{'' if hint['preferred'] else ' (not preferred)'}"
    cpus = next((a["cpus"] for a in c["allocations"] if "cpus" in a), "shared")
    mem = "; ".join(
        f"{b['type']} {format_bytes(b['size'])} on NUMA {','.join(map(str, b['numa']))}"
        for a in c["allocations"]
        for b in a.get("memory", [])
    )
    devs = "; ".join(f"{k}: {','.join(v)}" for a in c["allocations"] for k, v in a.get("devices", {}).items())
    return hint_text, cpus, mem or "-", escape(devs or "-")


def _exit(rejected: int, exit_zero: bool) -> None:
    if rejected and not exit_zero:
        raise SystemExit(1)
