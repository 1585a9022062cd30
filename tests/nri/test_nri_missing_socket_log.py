"""A missing NRI socket is logged once at warning, then at debug while it stays missing (issue 14, item 9)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from numaplane.nri.plugin import NRIPlugin
from numaplane_harness.nriexample import FixedCpusetHandler


async def test_missing_socket_warns_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    plugin = NRIPlugin(
        FixedCpusetHandler("1"),
        name="numaplane-test",
        idx="10",
        socket_path=str(tmp_path / "nri.sock"),
        backoff_initial_seconds=0.01,
        backoff_max_seconds=0.01,
    )
    caplog.set_level(logging.DEBUG, logger="numaplane.nri.plugin")
    task = asyncio.create_task(plugin.run())
    for _ in range(200):
        if sum("cannot connect" in r.getMessage() for r in caplog.records) >= 4:
            break
        await asyncio.sleep(0.01)
    await plugin.stop()
    await asyncio.wait_for(task, 5)
    attempts = [r for r in caplog.records if "cannot connect" in r.getMessage()]
    assert len(attempts) >= 4
    assert [r.levelno for r in attempts].count(logging.WARNING) == 1 and attempts[0].levelno == logging.WARNING
    assert all(r.levelno <= logging.DEBUG for r in caplog.records if "reconnecting" in r.getMessage())
