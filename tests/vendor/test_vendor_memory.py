"""A vendor plugin managing ``memory`` beside the memory manager ``None``, through the agent's state
machine: a container's pinned memory nodes (``cpuset.mems``) come from its admission's allocations,
whichever plugin gave them."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from numaplane.agent.state import NodeAgentState
from numaplane.policy.config import NodeResourceConfig
from numaplane.policy.hints import NUMAMask, TopologyHint
from numaplane.policy.manager import ResourceManager
from numaplane.policy.plugin import Hints, MemoryBlock, PluginAllocation
from numaplane.resources.pod import Container, Pod
from numaplane.topology.cpuset import CPUSet
from numaplane.topology.model import synthetic

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agent"))
from state_helpers import container, guaranteed, sandbox

TOPOLOGY = synthetic(sockets=2, cores_per_numa=4, threads_per_core=2)  # node 0: 0-3,8-11; node 1: 4-7,12-15
CONFIG = {
    "topologyManager": {"policy": "single-numa-node"},
    "cpuManager": {"policy": "static", "reservedCPUs": "0"},
    "memoryManager": {"policy": "None"},
}


class NodeMemory:
    """Pins a container's requested memory to the NUMA node of its merged hint (no hints of its own)."""

    name = "example.com/memory"
    resources = frozenset({"memory"})

    def __init__(self) -> None:
        self.held: dict[tuple[str, str], PluginAllocation] = {}

    def hints(self, pod: Pod, container: Container) -> Hints | None:
        return None

    def pod_hints(self, pod: Pod) -> Hints | None:
        return None

    def allocate(self, pod: Pod, container: Container, hint: TopologyHint) -> PluginAllocation:
        nodes = tuple(hint.numa.ids()) if hint.numa is not None else (0,)
        requested = container.requests.get("memory")
        size = 0 if requested is None else requested.value()
        allocation = PluginAllocation(
            self.name, memory=(MemoryBlock(nodes, "memory", size),), numa=NUMAMask.from_ids(nodes)
        )
        self.held[(pod.uid, container.name)] = allocation
        return allocation

    def release(self, pod_uid: str, container_name: str) -> None:
        self.held.pop((pod_uid, container_name), None)

    def allocations(self) -> Mapping[tuple[str, str], PluginAllocation]:
        return dict(self.held)

    def allocatable(self) -> Mapping[int, Mapping[str, int]]:
        return {n: {"memory": 1 << 34} for n in (0, 1)}

    def available(self) -> Mapping[int, Mapping[str, int]]:
        return self.allocatable()

    def check_config(self, config: NodeResourceConfig) -> list[str]:
        return []

    def reconfigure(self, config: NodeResourceConfig) -> None:
        pass

    def snapshot(self) -> dict[str, Any]:
        return {}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        pass


def test_the_vendor_plugins_memory_nodes_are_the_containers_mems() -> None:
    manager = ResourceManager(TOPOLOGY, CONFIG)
    plugin = NodeMemory()
    manager.add_plugin(plugin)
    node_state = NodeAgentState(manager)
    g = sandbox("g")
    decision = node_state.create(g, guaranteed(g, n=2))
    assert str(decision.cpus) == "1,9" and decision.mems == CPUSet([0])
    assert plugin.held[("uid-g/main", "main")].memory[0].size_bytes == 64 << 20
    # a shared container's memory is not pinned
    b = sandbox("b", qos="BestEffort")
    assert node_state.create(b, container(b)).mems is None
    assert node_state.check() == []
