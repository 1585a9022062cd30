"""A node whose zones carry no memory (memory manager policy None) is said so: metric and warning."""

from __future__ import annotations

import dataclasses

from exp_helpers import ALLOCATABLE, eventually, pod
from structlog.testing import capture_logs

from numaplane.exporter.daemon import Exporter
from numaplane.exporter.options import ExporterOptions
from numaplane.grpcapi.podresources.server import PodResourcesServer, StaticProvider


async def test_zones_without_memory_are_reported(
    podres_server: PodResourcesServer, provider: StaticProvider, base_options: ExporterOptions
) -> None:
    options = dataclasses.replace(base_options, publish=False, period_seconds=0.05)
    exporter = Exporter(options)
    gauge = exporter.metrics.zone_memory_reported
    with capture_logs() as logs:
        await exporter.start()
        try:
            await eventually(lambda: exporter.last_result is not None)
            await eventually(lambda: gauge._value.get() == 1)
            # the kubelet's memory manager switched to None: GetAllocatableResources lists no memory
            provider.update(dataclasses.replace(ALLOCATABLE, memory=()), [pod("gu", cpus=(1, 2))])
            await eventually(lambda: gauge._value.get() == 0)
        finally:
            await exporter.close()
    warnings = [e for e in logs if e["event"] == "zones_without_memory"]
    assert len(warnings) == 1 and warnings[0]["log_level"] == "warning"
    assert "Static" in warnings[0]["fix"]
