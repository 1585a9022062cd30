"""Generate the configuration-reference sections of ``docs/*.md`` from the code; ``--check`` for drift.

Each page holds sections between ``<!-- BEGIN GENERATED: <key> -->`` and ``<!-- END GENERATED: <key> -->``;
everything between the markers is replaced by what :data:`SECTIONS` renders for ``<key>``:

* ``cli:<command>``       the options of a ``numaplane`` command (its click definition: flags, default, help);
* ``schema:<name>``       the fields of a JSON / OpenAPI schema: the agent's ``NodeResourceConfig``
                          (``numaplane.policy.config_schema.CONFIG_SCHEMA``) and the ``spec`` of each
                          ``numaplane.io`` CRD as the operator renders it (``numaplane.operator.crds``).

``python scripts/gen_docs.py`` rewrites the pages; ``--check`` exits 1 naming the stale sections
(``tests/packaging/test_docs.py`` runs it, so CI fails when a flag or field changes without its doc).
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import click

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
MARKER = re.compile(r"<!-- BEGIN GENERATED: (?P<key>[^ ]+) -->\n(?P<body>.*?)<!-- END GENERATED: (?P=key) -->", re.S)


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _command(path: str) -> click.Command:
    from numaplane.cli import COMMANDS

    head, *rest = path.split()
    module, attr, _ = COMMANDS[head]
    cmd: Any = getattr(importlib.import_module(module), attr)
    for name in rest:
        cmd = cmd.commands[name]
    assert isinstance(cmd, click.Command)
    return cmd


def cli_table(path: str) -> str:
    """Markdown table of ``numaplane <path>``'s options."""
    cmd = _command(path)
    rows = ["| option | default | what |", "|---|---|---|"]
    for param in cmd.params:
        if not isinstance(param, click.Option) or param.hidden:
            continue
        flags = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
        unset = param.default is None or callable(param.default) or type(param.default).__name__ == "Sentinel"
        if unset or (param.is_flag and not param.secondary_opts):
            default = ""
        elif isinstance(param.default, (list, tuple)):
            default = ", ".join(f"`{d}`" for d in param.default)
        else:
            default = f"`{param.default}`"
        env = f" (env `{param.envvar}`)" if isinstance(param.envvar, str) else ""
        choices = ""
        if isinstance(param.type, click.Choice):
            choices = " One of " + ", ".join(f"`{c}`" for c in param.type.choices) + "."
        rows.append(f"| {flags} | {default} | {_cell((param.help or '') + choices + env)} |")
    return "\n".join(rows) + "\n"


def _type_of(node: Mapping[str, Any]) -> str:
    if "enum" in node:
        return " \\| ".join(f"`{v}`" for v in node["enum"])
    if "const" in node:
        return f"`{node['const']}`"
    kind = node.get("type", "")
    if isinstance(kind, list):
        return " or ".join(kind)
    if node.get("x-kubernetes-int-or-string"):
        return "integer or string"
    if kind == "array":
        return f"list of {_type_of(node.get('items') or {}) or 'object'}"
    if kind == "object" and isinstance(node.get("additionalProperties"), Mapping):
        return f"map of {_type_of(node['additionalProperties']) or 'object'}"
    return str(kind)


def _walk(node: Mapping[str, Any], prefix: str, required: frozenset[str]) -> Iterator[tuple[str, str, str, str]]:
    for name, child in (node.get("properties") or {}).items():
        path = f"{prefix}{name}"
        limits = []
        for key, label in (("minimum", "min"), ("maximum", "max"), ("maxItems", "max items"), ("pattern", "pattern")):
            if key in child:
                limits.append(f"{label} `{child[key]}`")
        if "default" in child:
            limits.append(f"default `{child['default']}`")
        note = "; ".join(limits)
        desc = child.get("description", "")
        yield (
            path,
            _type_of(child),
            ("required" if name in required else ""),
            _cell(desc + (f" ({note})" if note else "")),
        )
        target = child
        if child.get("type") == "array" and isinstance(child.get("items"), Mapping):
            target = child["items"]
            path += "[]"
        if target.get("properties"):
            yield from _walk(target, path + ".", frozenset(target.get("required") or ()))


def schema_table(schema: Mapping[str, Any]) -> str:
    rows = ["| field | type | | description |", "|---|---|---|---|"]
    for path, kind, req, desc in _walk(schema, "", frozenset(schema.get("required") or ())):
        rows.append(f"| `{path}` | {kind} | {req} | {desc} |")
    return "\n".join(rows) + "\n"


def _crd_spec(factory: str) -> Mapping[str, Any]:
    crds = importlib.import_module("numaplane.operator.crds")
    crd = getattr(crds, factory)()
    version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
    spec: Mapping[str, Any] = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return spec


def _config_schema() -> Mapping[str, Any]:
    from numaplane.policy.config_schema import CONFIG_SCHEMA

    return CONFIG_SCHEMA


SECTIONS: dict[str, Callable[[], str]] = {
    "cli:agent": lambda: cli_table("agent"),
    "cli:exporter": lambda: cli_table("exporter"),
    "cli:operator": lambda: cli_table("operator"),
    "cli:render": lambda: cli_table("render"),
    "cli:scheduler-extender": lambda: cli_table("scheduler extender"),
    "cli:scheduler-run": lambda: cli_table("scheduler run"),
    "cli:simulate": lambda: cli_table("simulate"),
    "cli:e2e": lambda: cli_table("e2e"),
    "schema:NodeResourceConfig": lambda: schema_table(_config_schema()),
    "schema:NUMAResourcesOperator": lambda: schema_table(_crd_spec("numa_resources_operator_crd")),
    "schema:NUMAResourcesScheduler": lambda: schema_table(_crd_spec("numa_resources_scheduler_crd")),
    "schema:NodeResourcePolicy": lambda: schema_table(_crd_spec("node_resource_policy_crd")),
}


def regenerate(text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        key = match.group("key")
        if key not in SECTIONS:
            raise KeyError(f"unknown generated section {key!r}")
        return f"<!-- BEGIN GENERATED: {key} -->\n{SECTIONS[key]()}<!-- END GENERATED: {key} -->"

    return MARKER.sub(replace, text)


def stale_pages(docs: Path = DOCS) -> list[str]:
    """Pages whose generated sections differ from what the code renders now."""
    return [p.name for p in sorted(docs.glob("*.md")) if regenerate(p.read_text()) != p.read_text()]


def main(argv: list[str]) -> int:
    if "--check" in argv:
        stale = stale_pages()
        if stale:
            print(f"docs out of date: {', '.join(stale)} (run: python scripts/gen_docs.py)", file=sys.stderr)
            return 1
        print("docs reference sections up to date")
        return 0
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text()
        new = regenerate(text)
        if new != text:
            page.write_text(new)
            print(f"updated {page.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
