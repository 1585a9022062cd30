"""The install options shared by ``numaplane operator`` and ``numaplane render``: node host paths,
``--node-namespace``, and the checks of ``--namespace``, ``--node-namespace`` and ``--image`` (a bad value
is a usage error, never an invalid manifest)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import click

from numaplane.operator.render_common import (
    DEFAULT_NODE_NAMESPACE,
    NODE_PATH_OPTIONS,
    Settings,
    image_problem,
    namespace_problem,
)

F = TypeVar("F", bound=Callable[..., Any])


def node_path_options(func: F) -> F:
    """Add one option per :data:`NODE_PATH_OPTIONS` entry (default: the usual path)."""
    default = Settings()
    for name, flag, help_text in reversed(NODE_PATH_OPTIONS):
        func = click.option(flag, name, default=getattr(default, name), show_default=True, help=help_text)(func)
    return func


def with_node_paths(settings: Settings, options: Mapping[str, Any]) -> Settings:
    """``settings`` with the node paths of a command's keyword arguments."""
    paths: dict[str, Any] = {name: str(options[name]) for name, _, _ in NODE_PATH_OPTIONS}
    return dataclasses.replace(settings, **paths)


NODE_NAMESPACE_HELP = (
    "Namespace of the node components (exporter and agent DaemonSets, running as root): Pod Security"
    " 'privileged' there, 'restricted' in --namespace. Must differ from --namespace."
)


def node_namespace_option(func: F) -> F:
    """Add ``--node-namespace`` (checked as a namespace name)."""
    return click.option(
        "--node-namespace",
        default=DEFAULT_NODE_NAMESPACE,
        show_default=True,
        callback=checked_namespace,
        help=NODE_NAMESPACE_HELP,
    )(func)


def install_settings(namespace: str, node_namespace: str, image: str, options: Mapping[str, Any]) -> Settings:
    """The settings of a command's options; a usage error when the two namespaces are the same (the node
    namespace must allow privileged pods, the install namespace must not)."""
    if namespace == node_namespace:
        raise click.UsageError(
            f"--node-namespace must differ from --namespace (both {namespace!r}): the node components run as root"
            " in a namespace of their own"
        )
    return with_node_paths(Settings(namespace=namespace, node_namespace=node_namespace, image=image), options)


def checked_namespace(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """Click callback: ``value`` is a namespace name (a DNS-1123 label), else a usage error."""
    problem = namespace_problem(value)
    if problem:
        raise click.BadParameter(problem, ctx, param)
    return value


def checked_image(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """Click callback: ``value`` is a container image reference, else a usage error."""
    problem = image_problem(value)
    if problem:
        raise click.BadParameter(problem, ctx, param)
    return value
