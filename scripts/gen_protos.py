#!/usr/bin/env python3
"""Regenerate the Python modules of every ``.proto`` file under ``src/numaplane/``.

Usage (from the repository root, with the project's venv)::

    .venv/bin/python scripts/gen_protos.py            # regenerate, write changed files
    .venv/bin/python scripts/gen_protos.py --check    # exit 1 if regenerating would change anything
    .venv/bin/python scripts/gen_protos.py -v         # list every file written / compared

For ``src/numaplane/<pkg path>/<name>.proto`` it writes, beside the ``.proto``:

* ``<name>_pb2.py``        messages (grpcio-tools' protoc, ``--python_out``)
* ``<name>_pb2.pyi``       typed stubs (mypy-protobuf, ``--mypy_out``)
* ``<name>_pb2_grpc.py`` and ``<name>_pb2_grpc.pyi``  gRPC stubs, only if the file declares a ``service``
  and does not contain the marker line ``// gen_protos: no-grpc`` (NRI's services run over ttrpc, not gRPC).

The import root is ``src/``: a ``.proto`` imports another as ``import "numaplane/<path>/<file>.proto";`` and the
generated code imports ``numaplane.<path>.<file>_pb2``, so a ``.proto``'s directory must be a Python package
(have an ``__init__.py``). The example DRA driver is a second import root (:data:`EXTRA_ROOTS`:
``examples/dra-accel-driver/``, package ``accel_driver``), generated the same way, with its own imports. Well-known types (``google/protobuf/*.proto``) come from grpcio-tools.

Every generated file gets a two-line header (``# ruff: noqa`` and ``# fmt: off``) so that linters and the
formatter leave it alone, and loses its per-line ``# noqa: <code>`` comments (ruff rejects mypy-protobuf's
flake8-pyi codes). ``--check`` also fails on generated files whose ``.proto`` no longer exists.
The output depends on the code generator versions, so they are pinned (``PINNED`` below, the ``codegen``
extra in pyproject.toml); the script refuses to run with others.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PINNED = {"grpcio-tools": "1.76.0", "mypy-protobuf": "5.1.0"}
HEADER = "# ruff: noqa\n# fmt: off\n"
NO_GRPC_MARKER = "// gen_protos: no-grpc"
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py", "_pb2_grpc.pyi")
#: Other import roots (relative to the repository) and the one package under each whose ``.proto`` files are
#: generated; used when ``--src`` is not given.
EXTRA_ROOTS = (("examples/dra-accel-driver", "accel_driver"),)
_SERVICE_RE = re.compile(r"^\s*service\s+\w+\s*\{", re.MULTILINE)
# Per-line noqa comments with codes (mypy-protobuf writes flake8-pyi codes ruff does not know, which ruff
# flags even under a file-level noqa); the file-level header covers them.
_LINE_NOQA_RE = re.compile(r"[ \t]+# noqa(?::[ \t]*[A-Z]+[0-9]+(?:[ \t]*,[ \t]*[A-Z]+[0-9]+)*)?[ \t]*$", re.MULTILINE)


def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


def check_versions() -> None:
    for dist, want in PINNED.items():
        try:
            have = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            sys.exit(f"gen_protos: {dist}=={want} is not installed (pip install -e '.[codegen]')")
        if have != want:
            sys.exit(f"gen_protos: {dist} {have} is installed but the output is pinned to {want}")


def plugin_path(name: str) -> str:
    """The protoc plugin executable beside this Python (the venv's bin/), else on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        sys.exit(f"gen_protos: protoc plugin {name} not found (pip install mypy-protobuf)")
    return found


def wants_grpc(proto: Path) -> bool:
    text = proto.read_text(encoding="utf-8")
    return bool(_SERVICE_RE.search(text)) and NO_GRPC_MARKER not in text


def run_protoc(src: Path, protos: list[Path], out: Path, grpc: bool) -> None:
    import grpc_tools  # type: ignore[import-untyped]  # the pinned generator, imported only here so that --help works without it

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    args = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        f"--proto_path={src}",
        f"--proto_path={well_known}",
        f"--plugin=protoc-gen-mypy={plugin_path('protoc-gen-mypy')}",
        f"--python_out={out}",
        f"--mypy_out={out}",
    ]
    if grpc:
        args += [
            f"--plugin=protoc-gen-mypy_grpc={plugin_path('protoc-gen-mypy_grpc')}",
            f"--grpc_python_out={out}",
            f"--mypy_grpc_out={out}",
        ]
    args += [str(p.relative_to(src)) for p in protos]
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"gen_protos: protoc failed:\n{proc.stderr}")


def generate(src: Path, protos: list[Path]) -> dict[Path, str]:
    """Generate into a temp dir; return {path relative to src: text with header}."""
    with tempfile.TemporaryDirectory(prefix="gen_protos.") as tmp:
        out = Path(tmp)
        plain = [p for p in protos if not wants_grpc(p)]
        grpc = [p for p in protos if wants_grpc(p)]
        if plain:
            run_protoc(src, plain, out, grpc=False)
        if grpc:
            run_protoc(src, grpc, out, grpc=True)
        result: dict[Path, str] = {}
        for path in sorted(out.rglob("*")):
            if path.is_file() and path.name.endswith(GENERATED_SUFFIXES):
                text = _LINE_NOQA_RE.sub("", path.read_text(encoding="utf-8"))
                result[path.relative_to(out)] = HEADER + text
        return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if anything would change")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--src", type=Path, default=repo_root() / "src", help="import root (default: src/)")
    ns = parser.parse_args(argv)
    check_versions()

    roots = [(ns.src.resolve(), "numaplane")]
    if ns.src.resolve() == (repo_root() / "src").resolve():
        roots += [((repo_root() / rel).resolve(), package) for rel, package in EXTRA_ROOTS]
    changed: list[Path] = []
    stale: list[Path] = []
    total_protos = total_wanted = 0
    for src, package in roots:
        protos = sorted((src / package).rglob("*.proto"))
        for proto in protos:
            if not (proto.parent / "__init__.py").exists():
                sys.exit(f"gen_protos: {proto.parent} has no __init__.py; its generated modules could not be imported")
        wanted = generate(src, protos) if protos else {}
        total_protos += len(protos)
        total_wanted += len(wanted)
        shown = repo_root().resolve() if src.is_relative_to(repo_root().resolve()) else src.parent
        for rel, text in wanted.items():
            target = src / rel
            if target.exists() and target.read_text(encoding="utf-8") == text:
                if ns.verbose:
                    print(f"unchanged {target.relative_to(shown)}")
                continue
            changed.append(target)
            if not ns.check:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
            print(f"{'differs' if ns.check else 'wrote'} {target.relative_to(shown)}")
        for path in sorted((src / package).rglob("*")):
            if path.is_file() and path.name.endswith(GENERATED_SUFFIXES) and path.relative_to(src) not in wanted:
                stale.append(path)
                print(f"stale (no .proto generates it) {path.relative_to(shown)}")

    if ns.check and (changed or stale):
        print(f"gen_protos --check: {len(changed)} out of date, {len(stale)} stale; run scripts/gen_protos.py")
        return 1
    if not ns.check and stale:
        return 1
    print(f"gen_protos: {total_protos} .proto files, {total_wanted} generated files, {len(changed)} changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
