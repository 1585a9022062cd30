"""Hand-checked simulator scenarios with exact expected outcomes."""

from __future__ import annotations

from typing import Any

import pytest

from numaplane.policy.manager import ResourceManager
from numaplane.sim.cluster import build_templates
from numaplane.sim.engine import run_scheduler
from numaplane.sim.spec import SchedulerSpec, SimConfig
from numaplane.sim.workload import parse_workload
from numaplane.topology.model import synthetic

# two NUMA nodes of 4 single-thread cores each: 8 CPUs per machine
SMALL = synthetic(sockets=1, numa_per_socket=2, cores_per_numa=4, threads_per_core=1, name="small-2n-8c")


def _templates(count: int, policy: str = "single-numa-node") -> list[Any]:
    return build_templates(
        [("small", count)],
        policy=policy,
        scope="container",
        hugepages_1g_per_numa=0,
        reserved_cpus=0,
        topology_loader=lambda _: SMALL,
    )


def _pods(*cpus_at: tuple[float, int]) -> list[Any]:
    entries = []
    for i, (t, cpus) in enumerate(cpus_at):
        res = {"cpu": str(cpus), "memory": "1Gi"}
        entries.append(
            {
                "name": f"p{i}",
                "arrival": t,
                "spec": {"containers": [{"name": "c", "resources": {"requests": res, "limits": res}}]},
            }
        )
    return parse_workload({"kind": "Workload", "pods": entries})


# the first staggered NRT refresh of the only node happens at refresh_period / 10 = 10 s: run 8 s
NO_RECREATE = SimConfig(max_recreates=0, duration_s=8, refresh_period_s=100.0)


def test_default_scheduler_causes_exactly_one_topology_affinity_error_numa_aware_none() -> None:
    # p0..p3 (3 CPUs each) fill one NUMA zone per pod on two nodes, leaving 1 free CPU per zone;
    # p4 (2 CPUs) fits each node by total CPUs (2 free) but no single NUMA zone.
    arrivals = _pods((0, 3), (1, 3), (2, 3), (3, 3), (4, 2))
    config = SimConfig(max_recreates=0, duration_s=60)
    default = run_scheduler(SchedulerSpec("default"), _templates(2), arrivals, config)
    assert default.rejections == {"TopologyAffinityError": 1}
    assert (default.placed, default.failed, default.pending) == (4, 1, 0)
    numa = run_scheduler(SchedulerSpec("numa", True, "LeastAllocated", "overreserve"), _templates(2), arrivals, config)
    assert numa.rejections == {}
    assert (numa.placed, numa.failed, numa.pending) == (4, 0, 1)


def test_stale_nrt_without_over_reserve_causes_a_rejection_that_over_reserve_prevents() -> None:
    # One node; NRTs are published at t=0 only (no refresh within the run). p0 and p1 take 3 CPUs on
    # NUMA 0 and 1; p2 (2 CPUs) fits the node by total and fits the stale NRT (4 free per zone).
    arrivals = _pods((0, 3), (1, 3), (2, 2))
    passthrough = run_scheduler(
        SchedulerSpec("pt", True, "LeastAllocated", "passthrough"), _templates(1), arrivals, NO_RECREATE
    )
    assert passthrough.rejections == {"TopologyAffinityError": 1}
    assert (passthrough.placed, passthrough.failed) == (2, 1)
    overreserve = run_scheduler(
        SchedulerSpec("or", True, "LeastAllocated", "overreserve"), _templates(1), arrivals, NO_RECREATE
    )
    assert overreserve.rejections == {}
    assert overreserve.failed == 0
    # over-reserve charges every zone: p1 waits (zones look like 1 free CPU each) until a fresh NRT
    # would be published; with no refresh in the run it stays pending, and so does p2.
    assert overreserve.placed == 1
    assert overreserve.pending == 2


def test_rejected_pods_are_recreated_until_the_limit() -> None:
    arrivals = _pods((0, 3), (1, 3), (2, 2))
    config = SimConfig(max_recreates=2, duration_s=60, refresh_period_s=100.0, recreate_delay_s=1.0)
    result = run_scheduler(SchedulerSpec("default"), _templates(1), arrivals, config)
    assert result.rejections == {"TopologyAffinityError": 3}
    assert result.failed == 1


def test_runs_are_deterministic() -> None:
    arrivals = _pods(*[(i * 0.5, 1 + i % 3) for i in range(30)])
    spec = SchedulerSpec("numa", True, "MostAllocated", "overreserve")
    a = run_scheduler(spec, _templates(3), arrivals, SimConfig(duration_s=60))
    b = run_scheduler(spec, _templates(3), arrivals, SimConfig(duration_s=60))
    assert a.admissions == b.admissions
    assert a.to_dict() | {"wallSeconds": 0} == b.to_dict() | {"wallSeconds": 0}


def test_every_simulated_admission_equals_a_direct_resource_manager_admit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before each admission the engine makes, a twin manager restored from the same snapshot
    admits the same pod directly; both answers must be identical."""
    original = ResourceManager.admit
    compared = 0

    def checked(self: ResourceManager, pod: Any) -> Any:
        nonlocal compared
        twin = ResourceManager(self.topology, self.config)
        twin.restore(self.snapshot())
        expected = original(twin, pod)
        got = original(self, pod)
        assert got.to_dict() == expected.to_dict()
        assert self.snapshot() == twin.snapshot()
        compared += 1
        return got

    monkeypatch.setattr(ResourceManager, "admit", checked)
    arrivals = _pods(*[(i * 0.7, 1 + (i * 7) % 4) for i in range(40)])
    for spec in (SchedulerSpec("default"), SchedulerSpec("numa", True, "LeastNUMANodes", "overreserve")):
        run_scheduler(spec, _templates(3, "best-effort"), arrivals, SimConfig(duration_s=40))
    assert compared >= 20


def test_percentage_of_nodes_to_score_rotates_the_search_like_kube_scheduler() -> None:
    # 200 identical empty nodes: kube-scheduler's adaptive setting looks for max(200 * 48 // 100, 100)
    # = 100 feasible nodes. Cycle 1 searches from node 0, takes nodes 0..99 and stops at node 100
    # (one feasible node too many): next start 100. All scores tie, so p0 goes to the first node
    # found (0) and p1, searched from node 100, to node 100. Scoring every node instead, p1 goes to
    # the emptiest node in node order: node 1.
    arrivals = _pods((0, 2), (1, 2))
    spec = SchedulerSpec("numa", True, "LeastAllocated", "overreserve")
    templates = _templates(200)
    names = [t.name for t in templates]
    for percentage, nodes in ((0, [names[0], names[100]]), (100, [names[0], names[1]])):
        config = SimConfig(max_recreates=0, duration_s=8, percentage_of_nodes_to_score=percentage)
        result = run_scheduler(spec, templates, arrivals, config)
        assert [node for _, node, admitted, _ in result.admissions if admitted] == nodes, percentage
        default = run_scheduler(SchedulerSpec("default"), templates, arrivals, config)
        assert [node for _, node, admitted, _ in default.admissions if admitted] == nodes, percentage


def test_parse_workload_names_entry_and_field_of_a_negative_quantity() -> None:
    from numaplane.sim.errors import WorkloadError

    spec = {"containers": [{"name": "c"}], "overhead": {"memory": "-64Mi"}}
    with pytest.raises(WorkloadError) as info:
        parse_workload({"pods": [{"name": "p", "spec": spec}]}, "w.yaml")
    assert (info.value.source, info.value.entry, info.value.field) == ("w.yaml", 0, "spec.overhead.memory")
    assert (
        str(info.value) == "w.yaml: pods[0].spec.overhead.memory: quantity '-64Mi' must be greater than or equal to 0"
    )
