"""The example vendor plugin (``examples/plugins/accelerator_plugin.py``) is imported from its file."""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from vendor_helpers import start_accelerator_plugin

from numaplane_harness.containerd import terminate_process

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "plugins"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))


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
