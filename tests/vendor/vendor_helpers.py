"""Helpers of the vendor plugin tests: start the example accelerator plugin as its own process."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from numaplane_harness.containerd import terminate_process

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "plugins"


def start_accelerator_plugin(socket_path: Path, *extra: str) -> subprocess.Popen[bytes]:
    """The example accelerator plugin serving (not registered) on ``socket_path``."""
    process = subprocess.Popen(
        [
            sys.executable,
            str(EXAMPLES / "accelerator_plugin.py"),
            "--socket",
            str(socket_path),
            "--no-register",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 20
    while not socket_path.is_socket():
        if process.poll() is not None:
            out = process.stdout.read().decode(errors="replace") if process.stdout else ""
            raise AssertionError(f"plugin exited with {process.returncode}: {out}")
        if time.monotonic() > deadline:
            terminate_process(process)
            raise AssertionError(f"{socket_path} did not appear")
        time.sleep(0.02)
    return process
