"""DRA devices as a topology hint provider: parsing claims/slices, kubelet-exact hints, alignment."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from numaplane.policy.config import parse_config
from numaplane.policy.devices import DevicePolicy
from numaplane.policy.dra import (
    DRAError,
    DRAPlugin,
    PodClaims,
    device_hints,
    device_numa,
    resolve_pod_claims,
    slice_devices,
)
from numaplane.policy.manager import ResourceManager
from numaplane.resources.pod import Pod, parse_pod
from numaplane.topology.model import synthetic

DRIVER = "accel.example.com"


def _pod(uid: str = "u1", cpu: str = "2", claims: bool = True) -> Pod:
    container: dict[str, Any] = {
        "name": "c",
        "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}, "limits": {"cpu": cpu, "memory": "1Gi"}},
    }
    spec: dict[str, Any] = {"containers": [container]}
    if claims:
        container["resources"]["claims"] = [{"name": "accel"}]
        spec["resourceClaims"] = [{"name": "accel", "resourceClaimTemplateName": "one-accel"}]
    return parse_pod(
        {
            "metadata": {"name": "p", "namespace": "ns", "uid": uid},
            "spec": spec,
            "status": {"resourceClaimStatuses": [{"name": "accel", "resourceClaimName": "p-accel-x"}]},
        }
    )


def _claim(uid: str = "u1", device: str = "accel1") -> dict[str, Any]:
    return {
        "metadata": {"name": "p-accel-x", "namespace": "ns"},
        "status": {
            "allocation": {
                "devices": {"results": [{"request": "req", "driver": DRIVER, "pool": "n1", "device": device}]}
            },
            "reservedFor": [{"resource": "pods", "name": "p", "uid": uid}],
            "devices": [
                {"driver": DRIVER, "pool": "n1", "device": device, "cdiDeviceIDs": [f"{DRIVER}/accel={device}"]}
            ],
        },
    }


def _slice(numa: dict[str, int]) -> dict[str, Any]:
    return {
        "metadata": {"name": "n1-accel"},
        "spec": {
            "driver": DRIVER,
            "nodeName": "n1",
            "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": name, "attributes": {"resource.kubernetes.io/numaNode": {"int": n}}}
                for name, n in numa.items()
            ],
        },
    }


def _lookup(device: str, numa: dict[str, int]) -> Any:
    devices = slice_devices([_slice(numa)])

    def lookup(pod: Pod) -> PodClaims:
        return resolve_pod_claims(pod, {("ns", "p-accel-x"): _claim(pod.uid, device)}, devices)

    return lookup


TWO_NODES = synthetic(sockets=1, numa_per_socket=2, cores_per_numa=4, threads_per_core=1)


def _manager(policy: str, device: str, numa: dict[str, int], scope: str = "container") -> ResourceManager:
    config = {
        "topologyManager": {"policy": policy, "scope": scope},
        "cpuManager": {"policy": "static", "reservedCPUCount": 1},
    }
    return ResourceManager(TWO_NODES, config, extra_plugins=[DRAPlugin(TWO_NODES.numa_ids, _lookup(device, numa))])


# -- alignment ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("scope", ["container", "pod"])
@pytest.mark.parametrize("policy", ["best-effort", "restricted", "single-numa-node"])
def test_exclusive_cpus_follow_the_device_numa_node(policy: str, scope: str) -> None:
    """Without the provider the CPUs land on node 0 (the kubelet's choice); with it on the device's node 1."""
    rm = _manager(policy, "accel1", {"accel0": 0, "accel1": 1}, scope)
    admission = rm.admit(_pod())
    assert admission.admitted, admission
    (container,) = admission.containers
    cpus = container.exclusive_cpus
    assert cpus is not None and set(cpus) <= set(TWO_NODES.cpus_by_numa[1])
    assert container.hint is not None and container.hint.numa is not None and container.hint.numa.ids() == (1,)
    dra = next(a for a in container.allocations if a.plugin == "dra")
    assert dra.numa is not None and dra.numa.ids() == (1,)
    assert dra.extra["devices"][0]["device"] == "accel1"
    assert dra.extra["devices"][0]["cdiDevices"] == [f"{DRIVER}/accel=accel1"]
    plain = ResourceManager(TWO_NODES, rm.config).admit(_pod())
    plain_cpus = plain.containers[0].exclusive_cpus
    assert plain_cpus is not None and set(plain_cpus) <= set(TWO_NODES.cpus_by_numa[0])


def test_single_numa_node_refuses_a_device_and_cpus_that_cannot_share_a_zone() -> None:
    rm = _manager("single-numa-node", "accel1", {"accel1": 1})
    assert rm.admit(_pod("filler", cpu="4", claims=False)).admitted  # node 1's 4 CPUs all taken (0 reserved)
    refused = rm.admit(_pod("u1"))
    assert not refused.admitted and refused.reason == "TopologyAffinityError"
    assert "u1" not in rm.admissions and not rm.plugins[-1].allocations()
    assert rm.cpu.state.assignments.get("u1") is None


def test_best_effort_admits_unaligned_when_the_zone_is_full() -> None:
    rm = _manager("best-effort", "accel1", {"accel1": 1})
    assert rm.admit(_pod("filler", cpu="4", claims=False)).admitted
    admitted = rm.admit(_pod("u1"))
    assert admitted.admitted


def test_unresolved_claim_gives_no_hint_and_is_recorded() -> None:
    plugin = DRAPlugin(TWO_NODES.numa_ids, lambda pod: resolve_pod_claims(pod, {}, {}))
    config = {
        "topologyManager": {"policy": "single-numa-node"},
        "cpuManager": {"policy": "static", "reservedCPUCount": 1},
    }
    rm = ResourceManager(TWO_NODES, config, extra_plugins=[plugin])
    admission = rm.admit(_pod())
    assert admission.admitted
    dra = next(a for a in admission.containers[0].allocations if a.plugin == "dra")
    assert dra.extra["unresolved"] == ["claim 'accel': ResourceClaim ns/p-accel-x is not known"]


def test_snapshot_restores_the_recorded_devices() -> None:
    rm = _manager("single-numa-node", "accel1", {"accel1": 1})
    assert rm.admit(_pod()).admitted
    other = _manager("single-numa-node", "accel1", {"accel1": 1})
    other.restore(rm.snapshot())
    assert other.snapshot() == rm.snapshot()
    plugin = other.plugins[-1]
    assert isinstance(plugin, DRAPlugin)
    assert [d.device for d in plugin.claim_devices("u1", "c")] == ["accel1"]


def test_a_container_without_claims_is_not_asked() -> None:
    calls: list[str] = []

    def lookup(pod: Pod) -> PodClaims:
        calls.append(pod.uid)
        return PodClaims()

    rm = ResourceManager(TWO_NODES, {"cpuManager": {"policy": "static"}}, extra_plugins=[DRAPlugin((0, 1), lookup)])
    assert rm.admit(_pod(claims=False)).admitted
    assert calls == []


# -- NUMA sources --------------------------------------------------------------------------------------
def test_numa_sources_in_order() -> None:
    std = {"resource.kubernetes.io/numaNode": {"int": 1}, "numaNode": {"int": 0}}
    assert device_numa("gpu.amd.com", std, ["gpu.amd.com/numaNode"]) == (1,)
    assert device_numa("gpu.amd.com", {"numaNode": {"int": 0}}, ["gpu.amd.com/numaNode"]) == (0,)
    assert device_numa("gpu.amd.com", {"numaNode": {"int": 0}}) == ()
    pci = {"resource.kubernetes.io/pciBusID": {"string": "0000:3b:00.0"}}
    assert device_numa(DRIVER, pci, pci_numa={"0000:3b:00.0": 1}.get) == (1,)
    assert device_numa(DRIVER, pci, pci_numa=lambda _b: -1) == ()
    assert device_numa(DRIVER, {"resource.kubernetes.io/numaNode": {"int": -1}}) == ()


@pytest.mark.parametrize(
    ("attributes", "path"),
    [
        ({"resource.kubernetes.io/numaNode": {"string": "1"}}, "d.resource.kubernetes.io/numaNode"),
        ({"resource.kubernetes.io/numaNode": {"int": True}}, "d.resource.kubernetes.io/numaNode.int"),
        ({"resource.kubernetes.io/numaNode": {"int": 10**9}}, "d.resource.kubernetes.io/numaNode"),
        ({"resource.kubernetes.io/numaNode": 3}, "d.resource.kubernetes.io/numaNode"),
    ],
)
def test_bad_numa_attribute_is_an_error_naming_it(attributes: dict[str, Any], path: str) -> None:
    with pytest.raises(DRAError) as err:
        device_numa(DRIVER, attributes, path="d")
    assert err.value.path == path


def test_only_the_newest_pool_generation_counts() -> None:
    old, new = _slice({"accel0": 0}), _slice({"accel1": 1})
    new["spec"]["pool"]["generation"] = 2
    assert set(slice_devices([old, new])) == {(DRIVER, "n1", "accel1")}


def test_claim_not_reserved_for_the_pod_is_unresolved() -> None:
    claims = resolve_pod_claims(
        _pod("u1"), {("ns", "p-accel-x"): _claim("someone-else")}, slice_devices([_slice({"accel1": 1})])
    )
    assert claims.unresolved == {"accel": "ResourceClaim ns/p-accel-x is not reserved for the pod"}


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_resolution_never_crashes_on_arbitrary_claims(data: st.DataObject) -> None:
    leaf = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=5))
    junk = st.recursive(
        leaf,
        lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=3),
        max_leaves=12,
    )
    claim = _claim()
    path = data.draw(st.sampled_from(["status", "allocation", "results", "result"]))
    value = data.draw(junk)
    if path == "status":
        claim["status"] = value
    elif path == "allocation":
        claim["status"]["allocation"] = value
    elif path == "results":
        claim["status"]["allocation"]["devices"]["results"] = value
    else:
        claim["status"]["allocation"]["devices"]["results"][0] = value
    try:
        resolve_pod_claims(_pod(), {("ns", "p-accel-x"): claim}, slice_devices([_slice({"accel1": 1})]))
    except DRAError as exc:
        assert exc.path.startswith("ResourceClaim ns/p-accel-x")
    except (AttributeError, TypeError) as exc:  # pragma: no cover - the property's failure
        raise AssertionError(f"{type(exc).__name__}: {exc}") from exc


# -- hints are the kubelet device manager's for held devices -------------------------------------------
@settings(max_examples=300, deadline=None)
@given(
    nodes=st.integers(1, 4),
    devices=st.lists(st.lists(st.integers(0, 3), max_size=2), min_size=1, max_size=4),
)
def test_hints_equal_the_device_managers_for_the_same_devices(nodes: int, devices: list[list[int]]) -> None:
    numa_nodes = tuple(range(nodes))
    numas = [tuple(sorted({n for n in d if n < nodes})) for d in devices]
    assume(all(numas) or not any(numas))  # mixed: a deliberate departure, see the test below
    policy = DevicePolicy({"x/dev": [(f"d{i}", list(n) or None) for i, n in enumerate(numas)]}, numa_nodes)
    pod = parse_pod(
        {
            "metadata": {"name": "p", "uid": "p"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"x/dev": str(len(numas))}}}]},
        }
    )
    expected = policy.hints(pod, pod.containers[0])["x/dev"]
    assert device_hints(numa_nodes, numas) == expected


def test_a_device_without_numa_node_does_not_make_the_others_unsatisfiable() -> None:
    """Departure from the kubelet: its device manager counts only devices with topology towards a mask,
    so a container holding one device without and one with a NUMA node gets no hint at all (``[]``).
    DRA devices are fixed when numaplane admits, so the one without a node just does not restrict."""
    policy = DevicePolicy({"x/dev": [("d0", None), ("d1", [0])]}, (0, 1))
    pod = parse_pod(
        {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "resources": {"limits": {"x/dev": "2"}}}]}}
    )
    assert policy.hints(pod, pod.containers[0])["x/dev"] == []
    hints = device_hints((0, 1), [(), (0,)])
    assert hints is not None and [(h.numa.ids() if h.numa else None, h.preferred) for h in hints] == [
        ((0,), True),
        ((0, 1), False),
    ]


# -- the node config switches the provider -------------------------------------------------------------
def test_the_node_config_switches_the_provider_and_its_attributes() -> None:
    seen: list[tuple[str, ...]] = []
    devices = slice_devices([_slice({"accel1": 1})])

    def lookup(pod: Pod) -> PodClaims:
        seen.append(plugin.numa_attributes)
        return resolve_pod_claims(pod, {("ns", "p-accel-x"): _claim(pod.uid, "accel1")}, devices)

    base = {"topologyManager": {"policy": "single-numa-node"}, "cpuManager": {"reservedCPUCount": 1}}
    off = parse_config(base)
    plugin = DRAPlugin(TWO_NODES.numa_ids, lookup, config=off)
    rm = ResourceManager(TWO_NODES, off, extra_plugins=[plugin])
    first = rm.admit(_pod("u1"))
    cpus = first.containers[0].exclusive_cpus
    assert cpus is not None and set(cpus) <= set(TWO_NODES.cpus_by_numa[0])  # off: the kubelet's choice
    assert not seen and not plugin.allocations()
    rm.reconfigure({**base, "dra": {"enabled": True, "numaAttributes": ["gpu.amd.com/numaNode"]}})
    second = rm.admit(_pod("u2"))
    cpus = second.containers[0].exclusive_cpus
    assert cpus is not None and set(cpus) <= set(TWO_NODES.cpus_by_numa[1])
    assert seen and set(seen) == {("gpu.amd.com/numaNode",)}


def test_a_provider_that_cannot_work_refuses_a_config_enabling_it() -> None:
    plugin = DRAPlugin(TWO_NODES.numa_ids, lambda pod: PodClaims(), requires="no API access")
    rm = ResourceManager(TWO_NODES, {}, extra_plugins=[plugin])
    assert rm.check_config({"dra": {"enabled": True}}) == ["dra.enabled: no API access"]
    assert rm.check_config({"dra": {"enabled": False}}) == []
