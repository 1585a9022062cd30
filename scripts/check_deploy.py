#!/usr/bin/env python3
"""Fail when deploy/ differs from what ``numaplane render --output-dir`` produces.

Runs the real CLI into a temporary folder and compares file by file (bytes), plus: every file
listed by the layout exists and no stray YAML sits in the rendered folders. ``--write`` regenerates instead.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEPLOY = REPO / "deploy"
FOLDERS = ("", "crd", "rbac", "operator", "admission", "samples")


def _render(target: Path) -> None:
    cmd = [sys.executable, "-c", "from numaplane.cli import main; main()", "render", "--output-dir", str(target)]
    subprocess.run(cmd, check=True, cwd=REPO)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="regenerate deploy/ instead of checking")
    args = parser.parse_args()
    if args.write:
        _render(DEPLOY)
        return 0
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp)
        _render(fresh)
        expected = {p.relative_to(fresh).as_posix() for p in fresh.rglob("*.yaml")}
        for rel in sorted(expected):
            have = DEPLOY / rel
            if not have.is_file():
                problems.append(f"missing: deploy/{rel}")
            elif have.read_text() != (fresh / rel).read_text():
                problems.append(f"differs from render: deploy/{rel}")
    for folder in FOLDERS:
        for path in sorted((DEPLOY / folder).glob("*.yaml")):
            rel = path.relative_to(DEPLOY).as_posix()
            if rel not in expected:
                problems.append(f"stray file not produced by render: deploy/{rel}")
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print("deploy/ is stale: run `python scripts/check_deploy.py --write`", file=sys.stderr)
        return 1
    print(f"deploy/ matches numaplane render ({len(expected)} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
