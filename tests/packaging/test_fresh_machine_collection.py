"""The README's test command shows no skip for the optional compiled build on a fresh machine (issue 26
item 13): ``tests/policy/test_policy_compiled.py`` is collected only where mypyc and a C compiler are
(``.ci/run`` runs it on its own from the lint environment, which has them)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _unavailable() -> str | None:
    """What ``tests/policy/conftest.py`` decides on (why the build cannot run here, or ``None``)."""
    spec = importlib.util.spec_from_file_location("policy_conftest", REPO / "tests" / "policy" / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    why: str | None = module.compiled_build_unavailable()
    return why


def test_the_compiled_build_test_is_collected_only_where_it_can_run() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests/policy"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    collected = "test_policy_compiled.py::" in done.stdout
    assert collected == (_unavailable() is None), done.stdout[-500:]
    assert "skipped" not in done.stdout.splitlines()[-1]
