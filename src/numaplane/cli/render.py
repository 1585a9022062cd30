"""``numaplane render``: print every deployment manifest as YAML (for GitOps), or write ``deploy/``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from numaplane.cli._nodepaths import (
    checked_image,
    checked_namespace,
    install_settings,
    node_namespace_option,
    node_path_options,
)
from numaplane.cli._output import InputError
from numaplane.documents import DocumentError, parse_documents
from numaplane.operator.errors import SpecError
from numaplane.operator.layout import deploy_files
from numaplane.operator.render import Inputs, parse_resources, render_install, render_stack, sort_objects, to_yaml
from numaplane.operator.render_common import DEFAULT_IMAGE, DEFAULT_NAMESPACE
from numaplane.resources.meta import name_of, namespace_of

#: The files of a --from folder that are read (as ``kubectl apply -f DIR``: that folder only, not below).
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
#: kustomize's own file in a folder of manifests (deploy/samples/ has one): not a custom resource, skipped.
KUSTOMIZATION_FILES = frozenset({"kustomization.yaml", "kustomization.yml", "Kustomization"})


def _files(paths: tuple[Path, ...]) -> list[Path]:
    """Every --from file: a file as given, a folder's manifests in name order (an empty folder is an error)."""
    files: list[Path] = []
    for path in paths:
        if str(path) != "-" and path.is_dir():
            found = sorted(
                p
                for p in path.iterdir()
                if p.suffix.lower() in MANIFEST_SUFFIXES and p.is_file() and p.name not in KUSTOMIZATION_FILES
            )
            if not found:
                raise click.BadParameter(
                    f"{path}: no {', '.join(MANIFEST_SUFFIXES)} files in this folder", param_hint="--from"
                )
            files += found
        else:
            files.append(path)
    return files


def _load(paths: tuple[Path, ...]) -> tuple[list[dict[str, Any]], list[str]]:
    """The documents of every file and, for each, where it is (``<file> document <n>``)."""
    docs: list[dict[str, Any]] = []
    sources: list[str] = []
    for path in _files(paths):
        try:
            text = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise click.BadParameter(f"{path}: cannot read: {reason}", param_hint="--from") from exc
        try:
            loaded = parse_documents(text, path)
        except DocumentError as exc:
            raise click.BadParameter(str(exc), param_hint="--from") from exc
        for n, doc in enumerate(loaded):
            if not isinstance(doc, dict):
                raise click.BadParameter(f"{path}: every document must be a mapping", param_hint="--from")
            docs.append(doc)
            sources.append(f"{path} document {n}")
    return docs, sources


@click.command("render")
@click.option(
    "--from",
    "sources",
    multiple=True,
    type=click.Path(path_type=Path, allow_dash=True),
    help="Custom resource YAML (NUMAResourcesOperator, NUMAResourcesScheduler, NodeResourcePolicy), or a folder"
    " of them (its .yaml/.yml/.json files); repeatable.",
)
@click.option(
    "--image",
    default=DEFAULT_IMAGE,
    show_default=True,
    callback=checked_image,
    help="The numaplane image every component runs.",
)
@click.option(
    "--namespace", default=DEFAULT_NAMESPACE, show_default=True, callback=checked_namespace, help="Install namespace."
)
@node_namespace_option
@node_path_options
@click.option(
    "--install/--no-install",
    default=None,
    help="Include the operator install (CRDs, operator RBAC and Deployment). Default: only without --from.",
)
@click.option(
    "--output-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="Write the default install as a kustomize tree (deploy/ layout) instead of printing.",
)
def command(
    sources: tuple[Path, ...],
    image: str,
    namespace: str,
    node_namespace: str,
    install: bool | None,
    output_dir: Path | None,
    **paths: str,
) -> None:
    """Render every manifest (CRDs, RBAC, workloads) as multi-document YAML.

    Without --from: the default install (what deploy/ holds). With --from: every object the operator
    would create for those custom resources, ready to commit to a GitOps repository.

    \b
    Examples:
      numaplane render > install.yaml
      numaplane render --from deploy/samples/numaresourcesoperator.yaml
      numaplane render --from deploy/samples/
      numaplane render --output-dir deploy/
    """
    settings = install_settings(namespace, node_namespace, image, paths)
    if output_dir is not None:
        if sources:
            raise click.UsageError("--output-dir writes the default install; it takes no --from")
        for rel, text in deploy_files(settings).items():
            target = output_dir / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        click.echo(f"wrote {len(deploy_files(settings))} files under {output_dir}", err=True)
        return
    inputs = Inputs()
    if sources:
        try:
            inputs = parse_resources(*_load(sources))
        except SpecError as exc:
            raise InputError(f"invalid custom resource ({exc.reason}): {exc}") from exc
    objects = []
    if install if install is not None else not sources:
        objects += render_install(settings)
    if sources:
        objects += render_stack(inputs, settings)
    unique = {(o["kind"], namespace_of(o), name_of(o)): o for o in objects}
    sys.stdout.write(to_yaml(sort_objects(unique.values())))
