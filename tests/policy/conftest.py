"""The optional compiled build's test is collected only where the build can run (issue 26 item 13).

``test_policy_compiled.py`` needs mypyc (the ``dev`` extra) and a C compiler; the README's test command
(``pip install -e '.[test]'``, then ``pytest -q``) has neither on a fresh machine, and a skip there would
read as something missing. ``.ci/run`` runs that file on its own from the lint environment, which has
mypyc: there it is collected, and a missing mypyc makes that step fail (no test collected), not pass.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

COMPILED_TEST = "test_policy_compiled.py"
_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "build_compiled.py"


def compiled_build_unavailable() -> str | None:
    """Why ``scripts/build_compiled.py`` cannot build here (``None``: it can)."""
    spec = importlib.util.spec_from_file_location("build_compiled", _SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    why: str | None = module.available()
    return why


def pytest_ignore_collect(collection_path: Path) -> bool | None:
    if collection_path.name == COMPILED_TEST:
        return True if compiled_build_unavailable() is not None else None
    return None
