"""Fixtures of the agent tests: short socket folders, the example out-of-process CPU plugin."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_CPU_PLUGIN = REPO / "examples" / "plugins" / "cpu_static_plugin.py"


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A folder with a short path (unix socket paths must stay below 107 bytes)."""
    folder = Path(tempfile.mkdtemp(prefix="npa-", dir="/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def wait_for_socket(path: Path, process: subprocess.Popen[bytes] | None = None, timeout_seconds: float = 15) -> None:
    deadline = time.monotonic() + timeout_seconds
    while not path.is_socket():
        if process is not None and process.poll() is not None:
            out = process.stdout.read().decode(errors="replace") if process.stdout else ""
            raise AssertionError(f"plugin process exited with {process.returncode}: {out}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not appear in {timeout_seconds} s")
        time.sleep(0.02)


def start_example_cpu_plugin(socket_path: Path, *extra: str) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, str(EXAMPLE_CPU_PLUGIN), "--socket", str(socket_path), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    wait_for_socket(socket_path, process)
    return process


def stop_process(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
    if process.stdout is not None:
        process.stdout.close()


@pytest.fixture(scope="module")
def example_cpu_plugin_socket() -> Iterator[Path]:
    """The example CPU plugin serving (not registered) on a socket; yields the socket path."""
    folder = Path(tempfile.mkdtemp(prefix="npa-", dir="/tmp"))
    sock = folder / "cpu.sock"
    process = start_example_cpu_plugin(sock, "--no-register")
    try:
        yield sock
    finally:
        stop_process(process)
        shutil.rmtree(folder, ignore_errors=True)
