"""Each daemon imports only what it uses: no matplotlib, rich or numpy in daemons that do not need them.

A fresh interpreter imports a daemon's entry path — ``numaplane.cli``, the command's module, and the
modules its command function imports when it runs — and reports ``sys.modules``.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

_COMMON = ("numaplane.cli", "numaplane.observability.logs", "numaplane.kube.client", "numaplane.kube.errors")
ENTRY_PATHS: dict[str, tuple[str, ...]] = {
    "agent": ("numaplane.cli.agent", "numaplane.agent.daemon", "numaplane.agent.errors"),
    "exporter": ("numaplane.cli.exporter", "numaplane.exporter.daemon", "numaplane.exporter.options"),
    "operator": (
        "numaplane.cli.operator",
        "numaplane.operator.controller",
        "numaplane.operator.rbac",
        "numaplane.operator.render_common",
        "numaplane.kube.leader",
        "numaplane.observability.http",
    ),
    "scheduler extender": ("numaplane.cli.scheduler", "numaplane.scheduler.service", "numaplane.scheduler.config"),
    "scheduler run": ("numaplane.cli.scheduler", "numaplane.scheduler.service", "numaplane.kube.leader"),
}
NEEDS_NUMPY = {"scheduler extender", "scheduler run"}  # the vectorised placement pipeline
_PROBE = (
    "import importlib, json, sys\n"
    "for name in sys.argv[1:]:\n"
    "    importlib.import_module(name)\n"
    "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
)


@pytest.mark.parametrize("daemon", sorted(ENTRY_PATHS))
def test_daemon_entry_path_imports_only_what_it_uses(daemon: str) -> None:
    modules = [*_COMMON, *ENTRY_PATHS[daemon]]
    out = subprocess.run([sys.executable, "-c", _PROBE, *modules], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    forbidden = {"matplotlib", "rich", "PIL"} | (set() if daemon in NEEDS_NUMPY else {"numpy"})
    assert not loaded & forbidden, f"{daemon} imports {sorted(loaded & forbidden)}"
