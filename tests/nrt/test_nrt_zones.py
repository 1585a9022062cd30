"""Per-zone computation: exporter rules beyond the conformance cases, the state entry point."""

from __future__ import annotations

from typing import Any

from numaplane.nrt.model import Attribute, Zone
from numaplane.nrt.podresources import (
    AllocatableResources,
    ContainerDevices,
    ContainerMemory,
    ContainerResources,
    PodResources,
)
from numaplane.nrt.state import ContainerAllocation, DeviceAssignment, MemoryBlock, NodeAllocationState
from numaplane.nrt.zones import MachineView, NUMANodeView, ZoneConfig, compute_zones, zones_from_dicts, zones_from_state
from numaplane.topology.cpuset import CPUSet
from numaplane.topology.model import synthetic

GI = 1 << 30


def _machine() -> MachineView:
    return MachineView(
        (
            NUMANodeView(0, CPUSet.parse("0-3"), {0: 10, 1: 21}, 64 * GI, {"hugepages-1Gi": 4 * GI}),
            NUMANodeView(1, CPUSet.parse("4-7"), {0: 21, 1: 10}, 64 * GI, {"hugepages-1Gi": 4 * GI}),
        )
    )


def _rows(zones: tuple[Zone, ...]) -> dict[str, dict[str, tuple[int, int, int]]]:
    return {
        z.name: {r.name: (r.capacity.value(), r.allocatable.value(), r.available.value()) for r in z.resources}
        for z in zones
    }


def _static_allocatable(cpus: str = "1-7") -> AllocatableResources:
    return AllocatableResources(
        cpu_ids=tuple(CPUSet.parse(cpus).sorted()),
        memory=(
            ContainerMemory("memory", 60 * GI, (0,)),
            ContainerMemory("memory", 62 * GI, (1,)),
            ContainerMemory("hugepages-1Gi", 4 * GI, (0,)),
            ContainerMemory("hugepages-1Gi", 4 * GI, (1,)),
        ),
    )


def test_memory_with_static_policy() -> None:
    pod = PodResources(
        "gu",
        "ns",
        (
            ContainerResources(
                "c",
                cpu_ids=(1, 2),
                memory=(ContainerMemory("memory", 2 * GI, (0,)), ContainerMemory("hugepages-1Gi", GI, (0,))),
            ),
        ),
    )
    rows = _rows(compute_zones("n", _machine(), _static_allocatable(), [pod]))
    assert rows["node-0"] == {
        "cpu": (4, 3, 1),
        "memory": (64 * GI, 60 * GI, 58 * GI),
        "hugepages-1Gi": (4 * GI, 4 * GI, 3 * GI),
    }
    assert rows["node-1"] == {
        "cpu": (4, 4, 4),
        "memory": (64 * GI, 62 * GI, 62 * GI),
        "hugepages-1Gi": (4 * GI, 4 * GI, 4 * GI),
    }


def test_memory_policy_none_has_no_memory_rows() -> None:
    rows = _rows(compute_zones("n", _machine(), AllocatableResources(cpu_ids=tuple(range(8))), []))
    assert rows == {"node-0": {"cpu": (4, 4, 4)}, "node-1": {"cpu": (4, 4, 4)}}


def test_spanning_block_charged_like_the_kubelet() -> None:
    # 70 GiB over nodes {0,1}: node 0 takes what it has free (60), node 1 the remaining 10.
    pod = PodResources("big", "ns", (ContainerResources("c", memory=(ContainerMemory("memory", 70 * GI, (1, 0)),)),))
    rows = _rows(compute_zones("n", _machine(), _static_allocatable(), [pod]))
    assert rows["node-0"]["memory"] == (64 * GI, 60 * GI, 0)
    assert rows["node-1"]["memory"] == (64 * GI, 62 * GI, 52 * GI)
    # a second block of the same group: node 0 is full, so node 1 pays
    pod2 = PodResources("big2", "ns", (ContainerResources("c", memory=(ContainerMemory("memory", 5 * GI, (0, 1)),)),))
    rows = _rows(compute_zones("n", _machine(), _static_allocatable(), [pod, pod2]))
    assert rows["node-1"]["memory"][2] == 47 * GI
    # overflow beyond the group lands on the last node and clamps at 0
    pod3 = PodResources("huge", "ns", (ContainerResources("c", memory=(ContainerMemory("memory", 500 * GI, (0, 1)),)),))
    rows = _rows(compute_zones("n", _machine(), _static_allocatable(), [pod3]))
    assert rows["node-0"]["memory"][2] == 0 and rows["node-1"]["memory"][2] == 0


def test_reserved_node_and_excludes() -> None:
    allocatable = AllocatableResources(
        cpu_ids=(4, 5, 6, 7),
        devices=(ContainerDevices("vendor/nic", ("a", "b"), (1,)), ContainerDevices("vendor/gpu", ("g",), ())),
    )
    rows = _rows(compute_zones("n", _machine(), allocatable, []))
    assert rows["node-0"] == {"cpu": (4, 0, 0)}  # every CPU reserved: the single fallback row
    assert rows["node-1"] == {"cpu": (4, 4, 4), "vendor/nic": (2, 2, 2)}  # no-topology gpu is in no zone
    by_node = ZoneConfig(resource_exclude={"n": ["vendor/nic"], "other": ["cpu"]})
    assert _rows(compute_zones("n", _machine(), allocatable, [], by_node))["node-1"] == {"cpu": (4, 4, 4)}
    assert _rows(compute_zones("m", _machine(), allocatable, [], by_node))["node-1"] == {
        "cpu": (4, 4, 4),
        "vendor/nic": (2, 2, 2),
    }


def test_devices_on_several_nodes_count_on_each() -> None:
    allocatable = AllocatableResources(cpu_ids=tuple(range(8)), devices=(ContainerDevices("v/x", ("d0",), (0, 1)),))
    pod = PodResources("p", "ns", (ContainerResources("c", devices=(ContainerDevices("v/x", ("d0",), (0, 1)),)),))
    rows = _rows(compute_zones("n", _machine(), allocatable, [pod]))
    assert rows["node-0"]["v/x"] == (1, 1, 0) and rows["node-1"]["v/x"] == (1, 1, 0)


def test_cpu_accounting_rules() -> None:
    allocatable = AllocatableResources(cpu_ids=tuple(range(1, 8)))
    pods = [
        PodResources(
            "a",
            "ns",
            (ContainerResources("c1", cpu_ids=(4, 5)), ContainerResources("c2", cpu_ids=(5,))),
            cpu_ids=(4, 5),
        ),
        PodResources("b", "other", (ContainerResources("c", cpu_ids=(6,)),)),
        PodResources("c", "ns", (ContainerResources("c", cpu_ids=(0,)),)),  # reserved CPU: never counted
    ]
    assert _rows(compute_zones("n", _machine(), allocatable, pods))["node-1"]["cpu"] == (4, 4, 1)
    assert _rows(compute_zones("n", _machine(), allocatable, pods, ZoneConfig(namespace="ns")))["node-1"]["cpu"] == (
        4,
        4,
        2,
    )
    shared = ZoneConfig(shared_pool_cpus=CPUSet.parse("5-7"))
    assert _rows(compute_zones("n", _machine(), allocatable, pods, shared))["node-1"]["cpu"] == (4, 4, 3)


def test_costs_attributes_and_capacity_fixups() -> None:
    allocatable = AllocatableResources(cpu_ids=tuple(range(8)), memory=(ContainerMemory("memory", 80 * GI, (0,)),))
    machine = MachineView((NUMANodeView(0, CPUSet.parse("0-3"), {1: 21, 0: 10}), NUMANodeView(1, CPUSet.parse("4-7"))))
    config = ZoneConfig(zone_attributes={0: [Attribute("k", "v")]})
    zones = compute_zones("n", machine, allocatable, [], config)
    assert zones[0].to_dict()["costs"] == [{"name": "node-0", "value": 10}, {"name": "node-1", "value": 21}]
    assert zones[0].attributes == (Attribute("k", "v"),) and "costs" not in zones[1].to_dict()
    assert _rows(zones)["node-0"]["memory"] == (80 * GI, 80 * GI, 80 * GI)  # unknown capacity → allocatable


def test_machine_from_topology() -> None:
    topo = synthetic(sockets=2, cores_per_numa=2, threads_per_core=2, hugepages_1g_per_numa=2)
    view = MachineView.from_topology(topo)
    assert [n.id for n in view.numa_nodes] == [0, 1]
    assert sum(len(n.cpus) for n in view.numa_nodes) == topo.num_cpus == 8
    assert view.numa_nodes[0].memory_bytes == 64 * GI
    assert view.numa_nodes[0].hugepages_bytes == {"hugepages-1Gi": 2 * GI}


def test_state_entry_point_equals_podresources() -> None:
    state = NodeAllocationState(
        allocatable_cpus=CPUSet.parse("1-7"),
        allocatable_memory=(MemoryBlock("memory", 60 * GI, (0,)), MemoryBlock("memory", 62 * GI, (1,))),
        allocatable_devices=(DeviceAssignment("v/nic", ("n0", "n1"), (0,)),),
        containers=(
            ContainerAllocation(
                "ns",
                "p",
                "a",
                CPUSet.parse("1-2"),
                (MemoryBlock("memory", GI, (0,)),),
                (DeviceAssignment("v/nic", ("n0",), (0,)),),
            ),
            ContainerAllocation("ns", "q", "a", CPUSet.parse("4")),
            ContainerAllocation("ns", "p", "b", CPUSet()),
        ),
    )
    allocatable, pods = state.to_podresources()
    assert [p.name for p in pods] == ["p", "q"] and [c.name for c in pods[0].containers] == ["a", "b"]
    zones = zones_from_state("n", _machine(), state)
    assert zones == compute_zones("n", _machine(), allocatable, pods)
    assert _rows(zones)["node-0"] == {"cpu": (4, 3, 1), "memory": (64 * GI, 60 * GI, 59 * GI), "v/nic": (2, 2, 1)}


def test_json_inputs_in_both_spellings() -> None:
    machine: dict[str, Any] = {"numa_nodes": [{"id": 0, "cpus": "0-1", "distances": {"0": 10}}]}
    snake = zones_from_dicts(
        "n",
        machine,
        {"cpu_ids": [1]},
        {"pod_resources": [{"name": "p", "namespace": "ns", "containers": [{"name": "c", "cpu_ids": [1]}]}]},
    )
    camel = zones_from_dicts(
        "n",
        machine,
        {"cpuIds": ["1"]},
        {"podResources": [{"name": "p", "namespace": "ns", "containers": [{"name": "c", "cpuIds": ["1"]}]}]},
    )
    assert snake == camel
    assert _rows(snake) == {"node-0": {"cpu": (2, 1, 0)}}
