"""The engine pauses the cyclic garbage collector only while it runs, and restores its state."""

from __future__ import annotations

import gc

import pytest

from numaplane.sim.cluster import DEFAULT_CLUSTER, build_templates, scale_cluster
from numaplane.sim.engine import run_scheduler
from numaplane.sim.spec import SchedulerSpec, SimConfig
from numaplane.sim.workload import WorkloadMix, generate_workload


@pytest.mark.parametrize("enabled", [True, False])
def test_gc_state_is_restored(enabled: bool) -> None:
    templates = build_templates(scale_cluster(DEFAULT_CLUSTER, 6), policy="single-numa-node", scope="container")
    arrivals = generate_workload(1, WorkloadMix(pods=30))
    seen: list[bool] = []
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        run_scheduler(
            SchedulerSpec.parse("numa:LeastAllocated"),
            templates,
            arrivals,
            SimConfig(samples=2),
            progress=lambda _: seen.append(gc.isenabled()),
        )
        assert gc.isenabled() == enabled
        assert seen and not any(seen)  # paused while the events ran
    finally:
        gc.enable() if was else gc.disable()
