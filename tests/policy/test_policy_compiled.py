"""The optional mypyc build of the policy code (``scripts/build_compiled.py``) gives the pure build's results.

Both builds run the policy conformance files (reference and production paths) in fresh interpreters and
must print the same tallies, every case passing; the compiled run must really load the extensions.
Skipped where mypyc or a C compiler is missing (the build is optional); about a minute otherwise.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "build_compiled.py"
FILES = (
    "cpu-static",
    "cpu-static-oracle",
    "cpu-take",
    "cpu-take-oracle",
    "cpu-hints",
    "cpu-hints-oracle",
    "cpu-accumulator",
    "memory-static",
    "memory-static-oracle",
    "topology-merge",
    "topology-merge-oracle",
)


def _script() -> Any:
    spec = importlib.util.spec_from_file_location("build_compiled", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(pythonpath: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    done = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_compiled_policy_build_matches_the_pure_build(tmp_path: Path, shared_dir: Path) -> None:
    why = _script().available()
    if why is not None:
        pytest.skip(why)
    files = [str(shared_dir / "conformance" / f"{name}.jsonl") for name in FILES]
    assert all(Path(f).exists() for f in files)
    compiled, pure = tmp_path / "compiled", tmp_path / "pure"
    subprocess.run([sys.executable, str(SCRIPT), "--out", str(compiled)], check=True, capture_output=True)
    ignore = shutil.ignore_patterns("*.so", "*.pyd", "__pycache__")
    shutil.copytree(ROOT / "src" / "numaplane", pure / "numaplane", ignore=ignore)
    where = "import numaplane.policy.cpu as m, numaplane.policy.topology_manager as t; print(m.__file__, t.__file__)"
    assert all(p.endswith(".so") for p in _run(compiled, "-c", where).split())
    assert all(p.endswith(".py") for p in _run(pure, "-c", where).split())
    args = ["conformance", "--path", "both", "-o", "json", *files]
    cli = ("-c", f"import sys; from numaplane.cli import main; sys.argv[1:] = {args!r}; main()")
    results = {name: json.loads(_run(path, *cli)) for name, path in (("compiled", compiled), ("pure", pure))}
    assert results["compiled"] == results["pure"]
    assert results["pure"]["failed"] == 0
    assert results["pure"]["passed"] >= 1000
