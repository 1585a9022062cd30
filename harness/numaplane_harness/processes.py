"""Child processes of the test fixtures: stopping them politely, then firmly."""

from __future__ import annotations

import subprocess

__all__ = ["terminate_process"]


def terminate_process(process: subprocess.Popen[bytes], grace_seconds: float = 10.0) -> None:
    """SIGTERM ``process`` if it still runs, SIGKILL it after ``grace_seconds``; return once it is gone."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(grace_seconds)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
