"""The README's install commands are enough: every third-party module the tests (and the test
fixtures in ``numaplane.testing`` and the harness in ``harness/``) import is declared in the base dependencies or the ``test``
extra, and ``.ci/run`` runs the tests in an environment installed exactly as the README says."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# modules run as ``python -m MODULE`` by test fixtures (not visible as imports)
RUN_AS_MODULE = {"grpc_tools"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_names(reqs: list[str]) -> set[str]:
    return {_norm(re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0]) for r in reqs}


def _imported_top_modules(paths: list[Path]) -> set[str]:
    names: set[str] = set()
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return names


def test_test_extra_covers_every_test_time_import() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = _requirement_names(project["dependencies"] + project["optional-dependencies"]["test"])
    files = [p for folder in ("tests", "harness", "src/numaplane/testing") for p in (ROOT / folder).rglob("*.py")]
    # the repository's own modules: test helpers, and the examples the tests put on sys.path
    local = {p.stem for folder in ("tests", "examples") for p in (ROOT / folder).rglob("*.py")}
    local |= {p.parent.name for p in (ROOT / "examples").rglob("__init__.py")}  # example packages (accel_driver)
    local |= {
        "numaplane",
        "numaplane_harness",
        "tests",
    }
    modules = (_imported_top_modules(files) | RUN_AS_MODULE) - set(sys.stdlib_module_names) - local
    dists = packages_distributions()
    missing = sorted(m for m in modules if not {_norm(d) for d in dists.get(m, [m])} & declared)
    assert not missing, f"imported by the tests but not in the base dependencies or the test extra: {missing}"


def test_dev_extra_has_the_stubs_mypy_needs() -> None:
    dev = _requirement_names(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]
    )
    assert {"types-protobuf", "types-pyyaml", "grpc-stubs", "mypy"} <= dev


def test_ci_runs_the_tests_in_an_environment_installed_exactly_as_the_readme_says() -> None:
    readme = (ROOT / "README.md").read_text()
    command = re.search(r"```sh\n(python3 -m venv \.venv && [^\n]*pytest[^\n]*)\n```", readme)
    assert command, "the README's test command"
    install = re.search(r"pip install -q -e '([^']+)'", command.group(1))
    assert install and install.group(1) == ".[test]"
    ci = (ROOT / ".ci/run").read_text()
    assert re.search(r"^\"\$PY\" -m venv \.venv && \.venv/bin/pip install -q -e '\.\[test\]'", ci, re.M), ci
    assert not re.search(r"\.venv/bin/pip install", ci.replace(".venv/bin/pip install -q -e '.[test]'", "")), (
        "nothing else may be installed into the test environment"
    )
    assert ".venv/bin/python -m pytest -q" in ci


def test_readme_says_the_containerd_tests_need_root_and_network_and_how_to_skip_them() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("Run the tests") : readme.index("`bash .ci/run`")]
    assert "root" in section and "network" in section
    assert '-m "not containerd"' in section
    assert "containerd:" in (ROOT / "pyproject.toml").read_text()  # the marker is registered
