"""``numaplane admit``: admit pods on one node with the resource manager, as a dry run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import yaml
from rich.table import Table

from numaplane.cli._output import console, emit_document
from numaplane.documents import load_yaml_all
from numaplane.policy.config import CONFIG_SCHEMA
from numaplane.policy.errors import PolicyConfigError
from numaplane.policy.manager import ResourceManager
from numaplane.resources.errors import PodSpecError
from numaplane.resources.pod import parse_pod
from numaplane.sim.cluster import load_topology
from numaplane.sim.errors import ClusterSpecError


def _read_yaml_documents(path: str) -> list[Any]:
    try:
        return load_yaml_all(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise click.ClickException(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise click.ClickException(f"{path}: not valid YAML/JSON: {exc}") from exc


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
def command(
    pods: tuple[str, ...], topology_spec: str, config_path: str | None, output: str, print_config_schema: bool
) -> None:
    """Admit POD files (YAML/JSON, several documents per file allowed) in order on one node.

    Shows, per pod and container, the merged NUMA hint and the exclusive CPUs, memory blocks and
    devices the kubelet-exact managers give, or the admission error (TopologyAffinityError,
    SMTAlignmentError, ...). Nothing is changed anywhere: a dry run for "what would the node do".

    Example: numaplane admit --config node.yaml pod-a.yaml pod-b.yaml
    """
    if print_config_schema:
        emit_document(CONFIG_SCHEMA, "json")
        return
    if not pods:
        raise click.UsageError("give at least one POD file")
    try:
        topology = load_topology(topology_spec)
    except ClusterSpecError as exc:
        raise click.ClickException(str(exc)) from exc
    config_doc = _read_yaml_documents(config_path)[0] if config_path else {"cpuManager": {"reservedCPUCount": 1}}
    try:
        manager = ResourceManager(topology, config_doc)
    except PolicyConfigError as exc:
        raise click.ClickException(f"{config_path or 'config'}: {exc}") from exc
    results = []
    for path in pods:
        for i, doc in enumerate(_read_yaml_documents(path)):
            try:
                pod = parse_pod(doc)
            except PodSpecError as exc:
                raise click.ClickException(f"{path} (document {i}): {exc}") from exc
            results.append(manager.admit(pod).to_dict() | {"name": pod.key})
    if output != "table":
        emit_document({"topology": topology.name, "admissions": results, "available": manager.available()}, output)
        return
    table = Table(
        title=f"admission on {topology.name} ({manager.config.topology_policy}/{manager.config.topology_scope})"
    )
    for col in ("pod", "container", "result", "NUMA hint", "exclusive CPUs", "memory", "devices"):
        table.add_column(col)
    for r in results:
        if not r["admitted"]:
            table.add_row(r["name"], r.get("container") or "-", f"[red]{r['reason']}[/]", "", r["message"], "", "")
            continue
        for c in r["containers"]:
            hint = c["hint"]
            cpus = next((a["cpus"] for a in c["allocations"] if "cpus" in a), "shared")
            mem = "; ".join(
                f"{b['type']} {b['size']} on {b['numa']}" for a in c["allocations"] for b in a.get("memory", [])
            )
            devs = "; ".join(f"{k}: {','.join(v)}" for a in c["allocations"] for k, v in a.get("devices", {}).items())
            hint_text = "-" if hint is None else f"{hint['numa']}{'' if hint['preferred'] else ' (not preferred)'}"
            table.add_row(r["name"], c["name"], "[green]admitted[/]", hint_text, cpus, mem or "-", devs or "-")
    console().print(table)
