"""The example accelerator plugin out of process, end to end through the plugin API v1.

Hints merged by the topology manager, allocation with the environment the agent injects, the
resource in the NRT zones and the PodResources answer, and the scheduler's NUMA filter on that NRT.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from accelerator_plugin import ENV_DEVICES, NAME, RESOURCE

from numaplane.grpcapi.pluginapi.adapter import GrpcResourcePlugin
from numaplane.grpcapi.pluginapi.asking import admit, flush
from numaplane.nrt.from_manager import allocation_state, node_nrt
from numaplane.placement.explain.filter import filter as numa_filter
from numaplane.placement.model.result import Fit, Reject
from numaplane.policy.config import parse_config
from numaplane.policy.manager import ResourceManager
from numaplane.resources.pod import parse_pod
from numaplane.topology.model import synthetic

CONFIG = {
    "topologyManager": {"policy": "single-numa-node"},
    "cpuManager": {"reservedCPUCount": 2},
    "memoryManager": {"policy": "Static", "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}]},
}


def _pod(uid: str, accelerators: int) -> Any:
    res = {"cpu": "2", "memory": "1Gi", RESOURCE: str(accelerators)}
    spec = {"containers": [{"name": "main", "resources": {"requests": res, "limits": res}}]}
    return parse_pod({"metadata": {"name": uid, "uid": uid, "namespace": "ml"}, "spec": spec})


async def test_remote_accelerator_plugin_end_to_end(accelerator_socket: Path) -> None:
    topo = synthetic(sockets=2, numa_per_socket=1, cores_per_numa=4, threads_per_core=2)
    config = parse_config(CONFIG)
    remote = GrpcResourcePlugin(
        NAME, {RESOURCE}, str(accelerator_socket), topology=topo, config=config, timeout_seconds=5
    )
    await asyncio.to_thread(remote.connect)
    try:
        manager = ResourceManager(topo, config, extra_plugins=[remote])
        await flush(manager)  # the plugin's amounts, which the manager's views read from the cache
        admission = await admit(manager, _pod("p1", 2))
        assert admission.admitted, admission.message
        (container,) = admission.containers
        vendor = next(a for a in container.allocations if a.plugin == NAME)
        ids = vendor.devices[RESOURCE]
        assert vendor.extra["env"][ENV_DEVICES] == ",".join(ids)
        assert container.hint is not None and vendor.numa is not None
        assert vendor.numa.ids() == container.hint.numa.ids() if container.hint.numa else False

        nrt = node_nrt(manager, "n1")
        rows = {z.name: r.available.value() for z in nrt.zones for r in z.resources if r.name == RESOURCE}
        assert sorted(rows.values()) == [0, 2]

        _, listed = allocation_state(manager, vendor_devices=True).to_podresources()
        held = [d.device_ids[0] for p in listed for c in p.containers for d in c.devices if d.resource_name == RESOURCE]
        assert sorted(held) == sorted(ids)

        node = {
            "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "14", "memory": "64Gi", RESOURCE: "4", "pods": "110"}},
        }
        assert isinstance(numa_filter(_pod("p2", 2), nrt.to_dict(), node), Fit)
        assert isinstance(numa_filter(_pod("p3", 3), nrt.to_dict(), node), Reject)

        manager.remove("p1")
        await flush(manager)  # the release and the plugin's new amounts
        rows = {
            z.name: r.available.value()
            for z in node_nrt(manager, "n1").zones
            for r in z.resources
            if r.name == RESOURCE
        }
        assert sorted(rows.values()) == [2, 2]
    finally:
        await remote.aclose()
