"""The exporter reads one injected clock (issue 29): batches, probes, the heartbeat and the lock note."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from exp_helpers import NODE

from numaplane.exporter.daemon import Exporter
from numaplane.exporter.events import Trigger
from numaplane.exporter.nodelock import NodeLock
from numaplane.exporter.options import ExporterOptions
from numaplane.grpcapi.podresources.server import PodResourcesServer
from numaplane.kube.clock import FakeClock, format_time


async def test_a_cycle_and_the_probes_read_the_exporters_clock(
    podres_server: PodResourcesServer, base_options: ExporterOptions
) -> None:
    clock = FakeClock()
    exporter = Exporter(dataclasses.replace(base_options, publish=False), clock=clock)
    exporter.gate.post(Trigger.INITIAL)
    clock.advance(2.0)
    batch = await exporter.gate.next()
    assert batch.first_at == 0.0  # stamped by the clock when posted
    await exporter.cycle(batch)
    assert exporter.status.last_success_at == 2.0
    clock.advance(7.5)
    assert exporter.readiness()[1]["seconds_since_success"] == 7.5
    assert exporter.metrics.scan_seconds._sum.get() == 0.0  # the scan took no time on the (still) clock


def test_the_lock_note_is_stamped_by_the_clock(tmp_path: Path) -> None:
    clock = FakeClock()
    clock.advance(90.0)
    lock = NodeLock(tmp_path / "exporter.lock", node=NODE, clock=clock)
    assert lock.try_acquire()
    try:
        assert f"since={format_time(clock.now())}" in lock.holder()
    finally:
        lock.release()
