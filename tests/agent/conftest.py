"""Fixtures of the agent tests: short socket folders, the example out-of-process CPU plugin."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_helpers import start_example_cpu_plugin, stop_process


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A folder with a short path (unix socket paths must stay below 107 bytes)."""
    folder = Path(tempfile.mkdtemp(prefix="npa-", dir="/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


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
