"""The agent's PodResources socket read by our exporter-side computation gives the expected NRT."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_helpers import container, sandbox
from test_agent_nri import TOPOLOGY, create, options, running_agent

from numaplane.grpcapi.errors import PodNotFound
from numaplane.grpcapi.podresources.client import PodResourcesClient
from numaplane.nrt.from_manager import allocation_state
from numaplane.nrt.zones import MachineView, compute_zones, zones_from_state
from numaplane_harness.nrifake import FakeRuntime

pytestmark = pytest.mark.timeout(60)

GI = 1 << 30
CONFIG = {
    "topologyManager": {"policy": "single-numa-node"},
    "cpuManager": {"reservedCPUs": "0"},
    "memoryManager": {"policy": "Static", "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}]},
}


def rows(zones: tuple[object, ...]) -> dict[str, dict[str, tuple[int, int, int]]]:
    out: dict[str, dict[str, tuple[int, int, int]]] = {}
    for zone in zones:
        out[zone.name] = {  # type: ignore[attr-defined]
            r.name: (r.capacity.value(), r.allocatable.value(), r.available.value())
            for r in zone.resources  # type: ignore[attr-defined]
        }
    return out


async def test_exporter_reading_the_agent_socket_computes_the_expected_zones(short_tmp: Path) -> None:
    (short_tmp / "config.json").write_text(json.dumps(CONFIG))
    socket = short_tmp / "podres.sock"
    runtime = FakeRuntime()
    await runtime.listen(str(short_tmp / "nri.sock"))
    try:
        async with running_agent(options(short_tmp, podresources_socket=str(socket))) as agent:
            await runtime.wait_session(1)
            await agent.wait_ready()
            a = sandbox("a", namespace="prod")
            await create(runtime, a, container(a, cpu_milli=2000, cpu_limit_milli=2000, memory=1 * GI))
            await create(runtime, a, container(a, "sidecar", cpu_milli=250, cpu_limit_milli=250, memory=GI // 4))
            b = sandbox("b", namespace="prod")
            await create(runtime, b, container(b, cpu_milli=4000, cpu_limit_milli=4000, memory=2 * GI))
            c = sandbox("c", namespace="dev")
            await create(runtime, c, container(c, cpu_milli=3000, cpu_limit_milli=3000, memory=1 * GI))
            be = sandbox("be", qos="BestEffort", namespace="dev")
            await create(runtime, be, container(be))
            async with PodResourcesClient(str(socket), timeout_seconds=5) as client:
                pods = await client.list()
                allocatable = await client.get_allocatable_resources()
                got_b = await client.get("prod", "b")
                with pytest.raises(PodNotFound):
                    await client.get("prod", "nope")
            assert [(p.namespace, p.name, [c.name for c in p.containers]) for p in pods] == [
                ("prod", "a", ["main", "sidecar"]),
                ("prod", "b", ["main"]),
                ("dev", "c", ["main"]),
                ("dev", "be", ["main"]),
            ]
            assert got_b.containers[0].cpu_ids == (2, 3, 10, 11)
            assert allocatable.cpu_ids == tuple(range(1, 16))
            machine = MachineView.from_topology(TOPOLOGY)
            zones = compute_zones("node-a", machine, allocatable, pods)
            # node 0: 7 allocatable CPUs (0 reserved) minus a (2) and b (4); memory 64Gi - 1Gi reserved,
            # minus a's 1Gi + 0.25Gi (Guaranteed sidecar pins memory too) and b's 2Gi;
            # node 1: c's 3 CPUs and 1Gi.
            assert rows(zones) == {
                "node-0": {"cpu": (8, 7, 1), "memory": (64 * GI, 63 * GI, 63 * GI - 3 * GI - GI // 4)},
                "node-1": {"cpu": (8, 8, 5), "memory": (64 * GI, 64 * GI, 63 * GI)},
            }
            # the same as computing the zones straight from the manager's state
            assert agent.state is not None
            assert zones == zones_from_state("node-a", machine, allocation_state(agent.state.manager))
    finally:
        await runtime.close()
