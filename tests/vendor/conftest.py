"""The example vendor plugin (``examples/plugins/accelerator_plugin.py``) is imported from its file."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from numaplane.testing.containerd import terminate_process

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "plugins"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))


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


@pytest.fixture
def accelerator_socket() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="npv-", dir="/tmp"))
    sock = folder / "acc.sock"
    process = start_accelerator_plugin(sock)
    try:
        yield sock
    finally:
        terminate_process(process)
        if process.stdout is not None:
            process.stdout.close()
        shutil.rmtree(folder, ignore_errors=True)
