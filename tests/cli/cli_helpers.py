"""Run the real ``numaplane`` entry point in a subprocess (as a user would) and read its result."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

NUMAPLANE = str(Path(sys.executable).with_name("numaplane"))
REPO = Path(__file__).resolve().parents[2]


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    @property
    def error_line(self) -> str:
        """The one-line error; fails when stderr is not exactly one ``Error: ...`` line."""
        lines = self.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), self.stderr
        assert "Traceback" not in self.stderr
        return lines[0]


def numaplane(*args: str, cwd: Path | None = None, timeout: float = 120) -> Run:
    proc = subprocess.run(
        [NUMAPLANE, *args], capture_output=True, text=True, cwd=cwd or REPO, timeout=timeout, check=False
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)
