"""``numaplane.io/memory-pinning``: each value does what the README says, never ignored silently (issue 14, item 3)."""

from __future__ import annotations

from typing import Any

import pytest

from numaplane.policy.manager import ResourceManager
from numaplane.resources.manifest import pod_from_manifest
from numaplane.sim.cluster import load_topology

STATIC = {
    "topologyManager": {"policy": "single-numa-node"},
    "cpuManager": {"reservedCPUCount": 2},
    "memoryManager": {
        "policy": "Static",
        "reservedMemory": [{"numaNode": n, "limits": {"memory": "1Gi"}} for n in (0, 1)],
    },
}


def _pod(name: str, pinning: str | None, *, guaranteed: bool = True) -> Any:
    resources: dict[str, Any] = {"limits": {"cpu": "4", "memory": "4Gi"}}
    if not guaranteed:
        resources = {"requests": {"cpu": "1", "memory": "1Gi"}}
    annotations = {} if pinning is None else {"numaplane.io/memory-pinning": pinning}
    return pod_from_manifest(
        {
            "kind": "Pod",
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"containers": [{"name": "c", "resources": resources}]},
        }
    )


def _memory_blocks(manager: ResourceManager, pod: Any) -> list[Any]:
    admission = manager.admit(pod)
    assert admission.admitted, admission
    return [b for c in admission.containers for a in c.allocations for b in a.memory]


@pytest.fixture
def manager() -> ResourceManager:
    return ResourceManager(load_topology("intel-xeon-gold6330-2s2n-112t-pci"), STATIC)


def test_default_pins_a_guaranteed_pod(manager: ResourceManager) -> None:
    assert _memory_blocks(manager, _pod("default", None))


def test_true_pins_a_guaranteed_pod_on_a_static_node(manager: ResourceManager) -> None:
    blocks = _memory_blocks(manager, _pod("pinned", "true"))
    assert sum(b.size_bytes for b in blocks if b.resource == "memory") == 4 << 30


def test_false_leaves_memory_unpinned(manager: ResourceManager) -> None:
    free_before = manager.available()
    assert _memory_blocks(manager, _pod("unpinned", "false")) == []
    assert {n: v["memory"] for n, v in manager.available().items()} == {n: v["memory"] for n, v in free_before.items()}


def test_true_is_refused_where_it_cannot_be_honoured(manager: ResourceManager) -> None:
    burstable = manager.admit(_pod("burstable", "true", guaranteed=False))
    assert not burstable.admitted and burstable.reason == "InvalidPreference" and "Guaranteed" in burstable.message
    no_policy = ResourceManager(
        load_topology("intel-xeon-gold6330-2s2n-112t-pci"), {"cpuManager": {"reservedCPUCount": 2}}
    )
    refused = no_policy.admit(_pod("nopolicy", "true"))
    assert not refused.admitted and refused.reason == "InvalidPreference" and "Static" in refused.message


def test_an_invalid_value_is_refused(manager: ResourceManager) -> None:
    refused = manager.admit(_pod("bad", "sometimes"))
    assert not refused.admitted and refused.reason == "InvalidPreference" and "memory-pinning" in refused.message
