"""One run of the suite: connect, gather, run the checks, clean up, return a :class:`Report`."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from numaplane.e2e.checks import read_only_checks
from numaplane.e2e.errors import SetupError
from numaplane.e2e.report import CheckResult, Report, Status
from numaplane.e2e.serial import SerialOptions, serial_checks
from numaplane.e2e.view import gather
from numaplane.kube.client import LightkubePort
from numaplane.kube.errors import KubeError
from numaplane.operator.render_common import DEFAULT_NAMESPACE, DEFAULT_NODE_NAMESPACE

__all__ = ["RunOptions", "run_suite"]


@dataclass(frozen=True, slots=True)
class RunOptions:
    namespace: str = DEFAULT_NAMESPACE
    node_namespace: str = DEFAULT_NODE_NAMESPACE
    node_selector: str | None = None
    serial: bool = False
    serial_options: SerialOptions = field(default_factory=SerialOptions)
    cluster: str = ""


async def run_suite(port: LightkubePort, opts: RunOptions) -> Report:
    """Run the checks; raises :class:`SetupError` only when the cluster cannot be read at all."""
    started = time.monotonic()
    try:
        view = await gather(port, opts.namespace, opts.node_selector, opts.node_namespace)
    except KubeError as exc:
        raise SetupError(f"cannot read the cluster: {exc}") from exc
    results = await read_only_checks(port, view)
    problems: list[str] = []
    if opts.serial:
        if any(r.status is Status.FAIL for r in results):
            results.append(CheckResult("serial", Status.SKIP, "not run: a read-only check failed"))
        else:
            more, problems = await serial_checks(port, view, opts.serial_options)
            results += more
    return Report(
        tuple(results),
        time.monotonic() - started,
        cluster=opts.cluster,
        serial=opts.serial,
        cleanup_problems=tuple(problems),
    )
