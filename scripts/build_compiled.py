"""Optional compiled build: mypyc-compile the node-admission policy code (issue 18).

The pure-Python modules stay the reference and the fallback. Nothing in the package needs the compiled
build, ``pip install -e .`` never runs it, and ``--clean`` restores the pure build. The compiled
extension modules sit next to their sources (``src/numaplane/policy/<module>.cpython-*.so``, plus
one shared library ``<hash>__mypyc.cpython-*.so``) are written into a complete copy of the package
in ``--out DIR``, used with ``PYTHONPATH=DIR``. Never in place under ``src/``: Python's import system
prefers an extension module to a source file of the same name, so an in-place build would keep
running stale code after its source is edited (``--status``/``--clean`` find and remove such files).

Why mypyc (and these modules): the policy code is mypy-strict, object-heavy scalar Python (CPU sets,
hint merging, NUMA masks), which mypyc compiles as it is; numba only speeds up numpy-style loops and
adds LLVM to the install, and cffi means a second implementation in C to keep exact. Not compiled:
``topology/cpuset.py`` (``cls.__new__(cls)`` with ``object.__setattr__`` is an internal mypyc error)
and the modules other issues own (``policy/manager.py``, ``policy/plugin.py``, ``policy/builtin.py``).

Needs mypy's ``mypyc`` (the ``dev`` extra) and a C compiler; about a minute on two cores.

Usage::

    python scripts/build_compiled.py --out DIR  # a complete compiled copy of the package in DIR
    PYTHONPATH=DIR numaplane simulate ...       # run it
    python scripts/build_compiled.py --status   # compiled files left under src/ (should be none)
    python scripts/build_compiled.py --clean    # remove them
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
MODULES = (
    "numaplane/policy/cpu.py",
    "numaplane/policy/cpu_assignment.py",
    "numaplane/policy/cpu_state.py",
    "numaplane/policy/hint_merge.py",
    "numaplane/policy/hints.py",
    "numaplane/policy/memory.py",
    "numaplane/policy/memory_state.py",
    "numaplane/policy/topology_manager.py",
)
SUFFIX = sysconfig.get_config_var("EXT_SUFFIX") or ".so"


def available() -> str | None:
    """``None`` when a build can run here, else why not."""
    if importlib.util.find_spec("mypyc") is None:
        return "mypyc is not installed (pip install -e '.[dev]')"
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        return f"no C compiler ({compiler})"
    return None


def compiled(root: Path) -> list[Path]:
    """The build's files under ``root`` (a ``src``-like folder)."""
    shims = [root / module.removesuffix(".py") for module in MODULES]
    found = [shim.with_name(shim.name + SUFFIX) for shim in shims]
    return [p for p in found if p.exists()] + sorted(root.glob(f"*__mypyc{SUFFIX}"))


def build(out: Path) -> list[Path]:
    """Compile ``MODULES`` from ``SRC`` in a scratch folder; write the extension files into ``out``
    as a complete copy of the package with them."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ignore = shutil.ignore_patterns("*.so", "*.pyd", "__pycache__")
        shutil.copytree(SRC / "numaplane", work / "numaplane", ignore=ignore)
        subprocess.run([sys.executable, "-m", "mypyc", *MODULES], cwd=work, check=True, stdout=subprocess.DEVNULL)
        shutil.copytree(work / "numaplane", out / "numaplane", ignore=shutil.ignore_patterns("__pycache__"))
        for path in compiled(work):
            target = out / path.relative_to(work)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    return compiled(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--out", type=Path, help="write a compiled copy of the package into this folder")
    group.add_argument("--status", action="store_true", help="list compiled files left under src/")
    group.add_argument("--clean", action="store_true", help="remove compiled files left under src/")
    args = parser.parse_args()
    if args.status or args.clean:
        files = compiled(SRC)
        for path in files:
            if args.clean:
                path.unlink()
            print(("removed " if args.clean else "") + str(path.relative_to(SRC)))
        if not files:
            print("pure-Python build (nothing compiled)")
        return 0
    why = available()
    if why is not None:
        print(f"error: cannot build: {why}", file=sys.stderr)
        return 1
    if args.out.resolve() == SRC.resolve():
        print("error: --out must not be src/ (an in-place build would shadow edited sources)", file=sys.stderr)
        return 2
    for path in build(args.out):
        print(f"built {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
