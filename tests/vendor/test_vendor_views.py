"""A vendor plugin's resources reach every view a built-in plugin's reach, through the plugin protocol.

The NRT zones (slow path and incremental publisher) and the PodResources answers are built from
``allocatable()`` / ``available()`` / ``allocations()`` of every plugin, so an in-process plugin and
an out-of-process one (same protocol, through the gRPC adapter) show up the same way.
"""

from __future__ import annotations

from typing import Any

from accelerator_plugin import RESOURCE, AcceleratorPlugin

from numaplane.nrt.from_manager import NRTPublisher, allocation_state, node_nrt
from numaplane.policy.manager import ResourceManager
from numaplane.resources.pod import parse_pod
from numaplane.topology.model import synthetic

CONFIG = {"topologyManager": {"policy": "single-numa-node"}, "cpuManager": {"reservedCPUCount": 2}}


def _topology() -> Any:
    return synthetic(sockets=2, numa_per_socket=1, cores_per_numa=4, threads_per_core=2)


def _pod(uid: str, accelerators: int, cpus: int = 2) -> Any:
    res = {"cpu": str(cpus), "memory": "1Gi", RESOURCE: str(accelerators)}
    spec = {"containers": [{"name": "main", "resources": {"requests": res, "limits": res}}]}
    return parse_pod({"metadata": {"name": uid, "uid": uid, "namespace": "ml"}, "spec": spec})


def _manager() -> ResourceManager:
    topo = _topology()
    return ResourceManager(topo, CONFIG, extra_plugins=[AcceleratorPlugin(topo, {}, per_numa=2)])


def _rows(nrt: Any) -> dict[str, dict[str, tuple[int, int]]]:
    return {
        z.name: {r.name: (r.allocatable.value(), r.available.value()) for r in z.resources if r.name == RESOURCE}
        for z in nrt.zones
    }


def test_hints_are_merged_and_the_allocation_is_numa_aligned() -> None:
    manager = _manager()
    admission = manager.admit(_pod("p1", 2))
    assert admission.admitted, admission.message
    (container,) = admission.containers
    ids = container.devices[RESOURCE]
    numa = {int(i[3]) for i in ids}
    assert len(numa) == 1
    assert container.hint is not None and container.hint.numa is not None
    assert set(container.hint.numa.ids()) == numa
    assert container.exclusive_cpus is not None
    cpus = set(container.exclusive_cpus)
    assert {c.numa for c in manager.topology.cpus if c.cpu in cpus} == numa
    # a third accelerator on the same node does not exist: single-numa-node rejects 3
    assert not manager.admit(_pod("p2", 3)).admitted


def test_vendor_resource_is_in_the_nrt_zones() -> None:
    manager = _manager()
    before = _rows(node_nrt(manager, "n1"))
    assert before == {"node-0": {RESOURCE: (2, 2)}, "node-1": {RESOURCE: (2, 2)}}
    assert manager.admit(_pod("p1", 1)).admitted
    after = _rows(node_nrt(manager, "n1"))
    assert sorted(v[RESOURCE][1] for v in after.values()) == [1, 2]


def test_incremental_publisher_equals_node_nrt_with_a_vendor_plugin() -> None:
    manager = _manager()
    publisher = NRTPublisher(manager, "n1")
    for uid, n in (("a", 1), ("b", 2), ("c", 1)):
        manager.admit(_pod(uid, n))
        assert publisher.publish() == node_nrt(manager, "n1")
    manager.remove("b")
    assert publisher.publish() == node_nrt(manager, "n1")


def test_vendor_devices_are_in_the_podresources_answers() -> None:
    manager = _manager()
    assert manager.admit(_pod("p1", 2)).admitted
    allocatable, listed = allocation_state(manager, vendor_devices=True).to_podresources()  # the agent's view
    (pod,) = [p for p in listed if p.name == "p1"]
    (container,) = pod.containers
    accelerators = [d for d in container.devices if d.resource_name == RESOURCE]  # one entry per device
    assert len(accelerators) == 2
    assert len({d.numa_nodes for d in accelerators}) == 1 and len(accelerators[0].numa_nodes) == 1
    # GetAllocatableResources lists every accelerator by id with its NUMA node (the plugin's inventory)
    ids = {d.device_ids[0]: d.numa_nodes for d in allocatable.devices if d.resource_name == RESOURCE}
    assert ids == {f"acc{n}-{i}": (n,) for n in manager.topology.numa_ids for i in range(2)}
