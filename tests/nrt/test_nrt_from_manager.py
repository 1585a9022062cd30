"""The NRT a node running a ResourceManager publishes: slow exact path vs the incremental publisher."""

from __future__ import annotations

from typing import Any

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numaplane.nrt.crd import validation_schema
from numaplane.nrt.from_manager import NRTPublisher, node_nrt
from numaplane.policy.manager import ResourceManager
from numaplane.resources.pod import parse_pod
from numaplane.topology.model import synthetic


def _pod(uid: str, cpu: int, mem_gi: int, hp: int, nic: int, guaranteed: bool, name: str | None = None) -> Any:
    res: dict[str, str] = {"cpu": str(cpu), "memory": f"{mem_gi}Gi"}
    if hp:
        res["hugepages-1Gi"] = f"{hp}Gi"
    if nic:
        res["example.com/nic"] = str(nic)
    resources: dict[str, Any] = {"requests": dict(res)}
    if guaranteed:
        resources["limits"] = dict(res)
    return parse_pod(
        {"metadata": {"name": name or uid, "uid": uid}, "spec": {"containers": [{"name": "c", "resources": resources}]}}
    )


streams = st.lists(
    st.tuples(
        st.sampled_from(["admit", "admit", "remove", "restore", "rename"]),
        st.integers(1, 6),
        st.integers(1, 40),
        st.integers(0, 2),
        st.integers(0, 1),
        st.booleans(),
    ),
    max_size=30,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=streams, policy=st.sampled_from(["best-effort", "single-numa-node", "none"]))
def test_publisher_equals_node_nrt(stream: Any, policy: str) -> None:
    topo = synthetic(
        sockets=2,
        numa_per_socket=2,
        cores_per_numa=4,
        threads_per_core=2,
        memory_per_numa_bytes=32 << 30,
        hugepages_1g_per_numa=2,
    )
    config = {
        "topologyManager": {"policy": policy},
        "cpuManager": {"reservedCPUCount": 2},
        "memoryManager": {"policy": "Static", "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}]},
        "devices": {"example.com/nic": [{"id": f"nic{i}", "numa": [i % 4]} for i in range(6)]},
    }
    rm = ResourceManager(topo, config)
    publisher = NRTPublisher(rm, "n1")
    live: list[str] = []
    schema = validation_schema("v1alpha2")
    for i, (op, cpu, mem, hp, nic, gu) in enumerate(stream):
        if op == "remove" and live:
            rm.remove(live.pop(0))
        elif op == "restore":  # same pods, new objects (and a new pods dict)
            rm.restore(rm.snapshot())
        elif op == "rename" and live:  # a uid leaves and comes back under another name between publishes
            uid = live.pop(0)
            rm.remove(uid)
            if rm.admit(_pod(uid, 1, 1, 0, 0, False, name=f"renamed-{i}")).admitted:
                live.append(uid)
        elif rm.admit(_pod(f"p{i}", cpu, mem, hp, nic, gu)).admitted:
            live.append(f"p{i}")
        fast = publisher.publish()
        slow = node_nrt(rm, "n1")
        assert fast.to_dict() == slow.to_dict() and fast == slow
        jsonschema.validate(fast.to_dict(), schema)


def test_publisher_rebuilds_only_the_zones_whose_use_changed() -> None:
    topo = synthetic(sockets=2, numa_per_socket=2, cores_per_numa=4, threads_per_core=2)
    rm = ResourceManager(
        topo, {"topologyManager": {"policy": "single-numa-node"}, "cpuManager": {"reservedCPUCount": 2}}
    )
    publisher = NRTPublisher(rm, "n1")
    before = publisher.publish().zones
    assert rm.admit(_pod("p1", 2, 1, 0, 0, True)).admitted
    after = publisher.publish().zones
    changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a is not b]
    assert len(changed) == 1  # a single-numa-node pod changes one zone; the others are the same objects
    row = after[changed[0]].resource("cpu")
    assert row is not None and row.allocatable.value() - row.available.value() == 2
    assert after == node_nrt(rm, "n1").zones
    rm.remove("p1")
    assert publisher.publish().zones == before
