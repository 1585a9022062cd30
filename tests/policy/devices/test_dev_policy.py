"""Device manager: hints like the kubelet's generateDeviceTopologyHints, NUMA-aligned allocation
(lowest ids first), init-container reuse, errors, bookkeeping properties, snapshots."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numaplane.policy.devices import Device, DeviceError, DevicePolicy, device_sort_key
from numaplane.policy.hints import NUMAMask, TopologyHint, iterate_masks
from numaplane.policy.topology_manager import TopologyManager
from numaplane.resources.pod import Pod, parse_pod

GPU = "nvidia.com/gpu"


def pod(uid: str, containers: Sequence[tuple[str, int, str]], resource: str = GPU) -> Pod:
    """containers: (name, device count, kind in app|init|sidecar)."""
    inits: list[dict[str, Any]] = []
    apps: list[dict[str, Any]] = []
    for name, count, kind in containers:
        doc: dict[str, Any] = {"name": name, "resources": {"limits": {resource: str(count)}}}
        if kind == "sidecar":
            doc["restartPolicy"] = "Always"
        (apps if kind == "app" else inits).append(doc)
    return parse_pod({"metadata": {"name": uid, "uid": uid}, "spec": {"initContainers": inits, "containers": apps}})


def h(ids: list[int], preferred: bool) -> TopologyHint:
    return TopologyHint(NUMAMask.from_ids(ids), preferred)


def two_per_node() -> DevicePolicy:
    return DevicePolicy({GPU: [(f"gpu{i}", [i // 2]) for i in range(8)]}, [0, 1, 2, 3])


def reference_hints(
    devices: dict[str, Device], nodes: list[int], available: set[str], reusable: set[str], request: int
) -> list[TopologyHint]:
    """Literal transcription of the kubelet's generateDeviceTopologyHints."""
    min_size = len(nodes)
    found: list[NUMAMask] = []
    for mask in iterate_masks(nodes):
        in_mask = sum(1 for d in devices.values() if mask.any_set(NUMAMask.from_ids(d.numa or ())))
        if in_mask >= request and mask.count() < min_size:
            min_size = mask.count()
        matching = 0
        skip = False
        for d in reusable:
            dev = devices.get(d, Device(d))
            if dev.numa is None:
                continue
            if not mask.any_set(NUMAMask.from_ids(dev.numa)):
                skip = True
                break
            matching += 1
        if skip:
            continue
        matching += sum(1 for d in available if mask.any_set(NUMAMask.from_ids(devices[d].numa or ())))
        if matching >= request:
            found.append(mask)
    return [TopologyHint(m, m.count() == min_size) for m in found]


@st.composite
def inventories(draw: st.DrawFn) -> tuple[list[int], list[Device]]:
    nodes = sorted(draw(st.sets(st.sampled_from([0, 1, 2, 3, 70, 250]), min_size=1, max_size=4)))
    devices = []
    for i in range(draw(st.integers(1, 8))):
        numa = draw(
            st.one_of(st.none(), st.lists(st.sampled_from(nodes), max_size=2).map(lambda x: tuple(sorted(set(x)))))
        )
        devices.append(Device(f"dev{i}", numa, draw(st.booleans()) or draw(st.booleans())))
    return nodes, devices


@settings(max_examples=300, deadline=None)
@given(inventories(), st.integers(1, 5), st.data())
def test_hints_equal_the_kubelet_transcription(
    inv: tuple[list[int], list[Device]], request: int, data: st.DataObject
) -> None:
    nodes, devices = inv
    policy = DevicePolicy({GPU: devices}, nodes)
    by_id = {d.id: d for d in devices}
    healthy = sorted(d.id for d in devices if d.healthy)
    available = set(data.draw(st.lists(st.sampled_from(healthy), unique=True))) if healthy else set()
    reusable = set(data.draw(st.lists(st.sampled_from([*by_id, "ghost"]), unique=True, max_size=3)))
    assert policy._generate(GPU, available, reusable, request) == reference_hints(
        by_id, nodes, available, reusable, request
    )


def test_hint_kinds_none_empty_and_regenerated() -> None:
    policy = DevicePolicy({GPU: [("g0", [0]), ("g1", [1])], "vendor/nic": [("n0", None)]}, [0, 1])
    p = parse_pod(
        {
            "metadata": {"name": "p", "uid": "p"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {GPU: "1", "vendor/nic": "1", "cpu": "2"}}}]},
        }
    )
    c = p.containers[0]
    assert policy.hints(p, c) == {GPU: [h([0], True), h([1], True), h([0, 1], False)], "vendor/nic": None}
    too_many = pod("q", [("c", 3, "app")])
    assert policy.hints(too_many, too_many.containers[0]) == {GPU: []}
    other = pod("r", [("c", 1, "app")], "example.com/other")  # not a device-plugin resource
    assert policy.hints(other, other.containers[0]) == {}
    policy.allocate(p, c, h([1], True))
    assert policy.container_devices("p", "c") == {GPU: ("g1",), "vendor/nic": ("n0",)}
    assert policy.hints(p, c)[GPU] == [h([1], True), h([0, 1], False)]  # regenerated from the held device


def test_allocation_follows_the_hint_and_takes_lowest_ids_first() -> None:
    policy = two_per_node()
    a = pod("a", [("c", 1, "app")])
    assert policy.allocate(a, a.containers[0], h([2], True)) == {GPU: ("gpu4",)}
    b = pod("b", [("c", 3, "app")])  # only 2 on node 3: take both, then the lowest elsewhere
    assert policy.allocate(b, b.containers[0], h([3], False)) == {GPU: ("gpu0", "gpu6", "gpu7")}
    c = pod("c", [("c", 2, "app")])
    assert policy.allocate(c, c.containers[0], TopologyHint(None, True)) == {GPU: ("gpu1", "gpu2")}
    assert policy.available(GPU) == {"gpu3", "gpu5"}
    policy.remove_pod("b")
    assert policy.available(GPU) == {"gpu0", "gpu3", "gpu5", "gpu6", "gpu7"}


def test_natural_device_order() -> None:
    assert sorted(["gpu10", "gpu2", "gpu1"], key=device_sort_key) == ["gpu1", "gpu2", "gpu10"]


def test_plugin_preferred_allocation_is_honoured_inside_the_aligned_set() -> None:
    seen: list[tuple[Sequence[str], Sequence[str], int]] = []

    def prefer(available: Sequence[str], must: Sequence[str], size: int) -> list[str]:
        seen.append((available, must, size))
        return list(available[-size:])

    policy = DevicePolicy({GPU: [(f"gpu{i}", [0]) for i in range(4)]}, [0], preferred={GPU: prefer})
    p = pod("p", [("c", 2, "app")])
    assert policy.allocate(p, p.containers[0], h([0], True)) == {GPU: ("gpu2", "gpu3")}
    assert seen == [(["gpu0", "gpu1", "gpu2", "gpu3"], [], 2)]


def test_init_container_devices_are_reused_but_not_a_sidecars() -> None:
    policy = two_per_node()
    # as upstream, the sidecar takes one of the init container's devices first, and keeps it
    p = pod("p", [("init", 2, "init"), ("side", 1, "sidecar"), ("app", 1, "app")])
    tm = TopologyManager("single-numa-node", "container", {}, [0, 1, 2, 3])
    result = tm.admit(p, [policy])
    assert result.admitted
    held = {c.name: policy.container_devices("p", c.name)[GPU] for c in p.all_containers()}
    assert held == {"init": ("gpu0", "gpu1"), "side": ("gpu0",), "app": ("gpu1",)}
    assert policy.allocated(GPU) == {"gpu0", "gpu1"}
    q = pod("q", [("init", 2, "init"), ("side", 1, "sidecar"), ("app", 2, "app")])
    result = tm.admit(q, [policy])  # the app would need 2 on one node but only 1 reusable + 1 free is there
    assert (result.admitted, result.container) == (False, "app")


def test_errors_use_the_kubelet_texts_and_change_nothing() -> None:
    policy = DevicePolicy({GPU: [Device("g0", (0,), healthy=False)]}, [0])
    p = pod("p", [("c", 1, "app")])
    with pytest.raises(DeviceError, match=f"^no healthy devices present; cannot allocate unhealthy devices {GPU}$"):
        policy.allocate(p, p.containers[0], TopologyHint(None, False))
    policy.update_devices(GPU, [Device("g0", (0,)), Device("g1", (0,))])
    q = pod("q", [("c", 3, "app")])
    with pytest.raises(
        DeviceError, match=f"^requested number of devices unavailable for {GPU}. Requested: 3, Available: 2$"
    ):
        policy.allocate(q, q.containers[0], TopologyHint(None, False))
    assert policy.allocated(GPU) == set()
    snapshot = policy.to_dict()
    snapshot["podDevices"] = {"old": {"c": {"gone.example/fpga": ["f0"]}}}
    policy.restore(snapshot)
    r = pod("r", [("c", 1, "app")], "gone.example/fpga")
    with pytest.raises(DeviceError, match=r"^cannot allocate unregistered device gone\.example/fpga$"):
        policy.allocate(r, r.containers[0], TopologyHint(None, False))


def test_pod_hints_use_pod_level_limits() -> None:
    policy = two_per_node()
    p = pod("p", [("i1", 3, "init"), ("s", 1, "sidecar"), ("a", 1, "app"), ("b", 1, "app")])
    assert policy.pod_requests(p) == {GPU: 3}
    hints = policy.pod_hints(p)[GPU]
    assert hints is not None and [x for x in hints if x.preferred] == [
        h(ids, True) for ids in ([0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3])
    ]


@settings(max_examples=60, deadline=None)
@given(
    st.randoms(use_true_random=False),
    st.sampled_from(["best-effort", "restricted", "single-numa-node"]),
    st.sampled_from(["container", "pod"]),
)
def test_devices_are_never_shared_between_pods_and_snapshots_round_trip(
    rnd: random.Random, policy_name: str, scope: str
) -> None:
    nodes = [0, 1, 2, 3]
    devices = DevicePolicy(
        {GPU: [(f"gpu{i}", rnd.choice([None, [i % 4], [i % 4, (i + 1) % 4]])) for i in range(8)]}, nodes
    )
    tm = TopologyManager(policy_name, scope, {}, nodes)
    live: list[Pod] = []
    for k in range(rnd.randint(1, 8)):
        containers = [(f"i{j}", rnd.randint(0, 3), rnd.choice(["init", "sidecar"])) for j in range(rnd.randint(0, 2))]
        containers += [(f"c{j}", rnd.randint(0, 3), "app") for j in range(rnd.randint(1, 2))]
        p = pod(f"p{k}", containers)
        result = tm.admit(p, [devices])
        if result.admitted:
            live.append(p)
            for c in p.all_containers():
                want = int(c.limits[GPU].value())
                assert len(devices.container_devices(p.uid, c.name).get(GPU, ())) == want
        else:
            devices.remove_pod(p.uid)
            tm.remove_pod(p.uid)
        if live and rnd.random() < 0.3:
            gone = live.pop(rnd.randrange(len(live)))
            devices.remove_pod(gone.uid)
        owners: dict[str, str] = {}
        for q in live:
            for c in q.all_containers():
                for d in devices.container_devices(q.uid, c.name).get(GPU, ()):
                    assert owners.setdefault(d, q.uid) == q.uid
        assert devices.allocated(GPU) == set(owners)
        copy = DevicePolicy({}, nodes)
        copy.restore(devices.to_dict())
        assert copy.to_dict() == devices.to_dict()
        assert copy.allocated(GPU) == devices.allocated(GPU)
        for k2 in range(k + 1):  # holds() is the snapshot's "has a podDevices entry"
            uid = pod(f"p{k2}", []).uid
            assert devices.holds(uid) == bool(devices.to_dict()["podDevices"].get(uid))
