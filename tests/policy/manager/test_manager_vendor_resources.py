"""ResourceManager: vendor plugins on resources whose built-in plugin the config switches off.

The example CPU plugin (``examples/plugins/cpu_static_plugin.py``) runs in process here; the agent's
tests run it out of process. With ``cpuManager.policy: none`` it manages ``cpu``: containers' exclusive
CPUs and the shared pool come from its allocations, exactly as from the built-in static plugin.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numaplane.policy.errors import PolicyConfigError, ReconfigureRejected
from numaplane.policy.manager import ResourceManager
from numaplane.resources.pod import Pod, parse_pod
from numaplane.topology.model import Topology, synthetic

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "plugins" / "cpu_static_plugin.py"
TOPOLOGY = synthetic(sockets=2, cores_per_numa=4, threads_per_core=2)  # node 0: 0-3,8-11; node 1: 4-7,12-15
TM = {"policy": "single-numa-node"}
BUILTIN = {"topologyManager": TM, "cpuManager": {"policy": "static", "reservedCPUs": "0"}}
OFF = {"topologyManager": TM, "cpuManager": {"policy": "none"}}


def _example() -> ModuleType:
    module = sys.modules.get("cpu_static_plugin")
    if module is None:
        spec = importlib.util.spec_from_file_location("cpu_static_plugin", EXAMPLE)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["cpu_static_plugin"] = module
        spec.loader.exec_module(module)
    return module


def _vendor(topology: Topology = TOPOLOGY) -> Any:
    return _example().StaticCPUPlugin(topology, {"topologyManager": TM}, own={"reservedCPUs": "0"})


def _pod(uid: str, cpu: str, *, guaranteed: bool = True) -> Pod:
    res: dict[str, Any] = {"requests": {"cpu": cpu, "memory": "64Mi"}}
    if guaranteed:
        res["limits"] = dict(res["requests"])
    return parse_pod({"metadata": {"name": uid, "uid": uid}, "spec": {"containers": [{"name": "c", "resources": res}]}})


class TestWhichBuiltinsCanBeSwitchedOff:
    def test_cpu_none_and_memory_none_manage_nothing_devices_always_manage_theirs(self) -> None:
        off = ResourceManager(TOPOLOGY, {**OFF, "memoryManager": {"policy": "None"}})
        assert off.active_resources(off.cpu) == frozenset() and off.active_resources(off.memory) == frozenset()
        on = ResourceManager(
            TOPOLOGY,
            {
                **BUILTIN,
                "memoryManager": {
                    "policy": "Static",
                    "reservedMemory": [{"numaNode": 0, "limits": {"memory": "100Mi"}}],
                },
            },
        )
        assert on.active_resources(on.cpu) == {"cpu"} and "memory" in on.active_resources(on.memory)
        assert on.active_resources(on.devices) == on.devices.resources

    def test_a_vendor_memory_plugin_fits_only_beside_the_memory_manager_none(self) -> None:
        off = ResourceManager(TOPOLOGY, {**OFF, "memoryManager": {"policy": "None"}})
        assert off.resource_conflicts("example.com/memory", frozenset({"memory"})) == []
        on = ResourceManager(
            TOPOLOGY,
            {
                **OFF,
                "memoryManager": {"policy": "Static", "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}]},
            },
        )
        assert on.resource_conflicts("example.com/memory", frozenset({"memory"})) == [
            "resources ['memory'] are managed by plugin 'memory'"
        ]


class TestRegistration:
    def test_refused_beside_the_active_builtin_cpu_plugin(self) -> None:
        manager = ResourceManager(TOPOLOGY, BUILTIN)
        with pytest.raises(PolicyConfigError, match=r"resources \['cpu'\] are managed by plugin 'cpu'"):
            manager.add_plugin(_vendor())
        assert [p.name for p in manager.plugins] == ["devices", "cpu", "memory"]

    def test_accepted_when_the_builtin_is_off_and_a_second_vendor_is_refused(self) -> None:
        manager = ResourceManager(TOPOLOGY, OFF)
        manager.add_plugin(_vendor())
        second = _example().StaticCPUPlugin(TOPOLOGY, OFF, name="other.example.com/cpu")
        with pytest.raises(PolicyConfigError, match=re.escape("managed by plugin 'example.numaplane.io/cpu-static'")):
            manager.add_plugin(second)

    def test_switching_the_builtin_back_on_is_refused_and_changes_nothing(self) -> None:
        manager = ResourceManager(TOPOLOGY, OFF)
        manager.add_plugin(_vendor())
        assert manager.check_config(BUILTIN) == [
            "cpu: the config switches the built-in cpu plugin on, but plugin "
            "'example.numaplane.io/cpu-static' manages ['cpu'] (unregister it first)"
        ]
        with pytest.raises(ReconfigureRejected):
            manager.reconfigure(BUILTIN)
        assert manager.config.cpu_policy == "none"
        assert manager.check_config({**OFF, "topologyManager": {"policy": "restricted"}}) == []


class TestViewsFromTheVendorsAllocations:
    def test_exclusive_cpus_leave_the_shared_pool_and_come_back(self) -> None:
        manager = ResourceManager(TOPOLOGY, OFF)
        manager.add_plugin(_vendor())
        assert manager.shared_pool().format() == "0-15"
        admission = manager.admit(_pod("g", "2"))
        assert admission.admitted and str(admission.containers[0].exclusive_cpus) == "1,9"
        assert str(manager.exclusive_cpus("g", "c")) == "1,9" and str(manager.cpuset_for("g", "c")) == "1,9"
        assert manager.shared_pool().format() == "0,2-8,10-15"
        assert {k: str(v) for k, v in manager.held_cpus().items()} == {("g", "c"): "1,9"}
        assert manager.admit(_pod("s", "500m", guaranteed=False)).admitted
        assert manager.exclusive_cpus("s", "c") is None and manager.cpuset_for("s", "c") == manager.shared_pool()
        manager.remove("g")
        assert manager.shared_pool().format() == "0-15" and manager.held_cpus() == {}

    @settings(max_examples=25, deadline=None)
    @given(
        ops=st.lists(st.tuples(st.booleans(), st.integers(0, 7), st.integers(1, 4)), min_size=1, max_size=20),
    )
    def test_the_vendor_plugin_decides_exactly_as_the_builtin_static_plugin(
        self, ops: list[tuple[bool, int, int]]
    ) -> None:
        builtin = ResourceManager(TOPOLOGY, BUILTIN)
        vendor = ResourceManager(TOPOLOGY, OFF)
        vendor.add_plugin(_vendor())
        for admit, slot, cpus in ops:
            uid = f"p{slot}"
            if admit:
                pod = _pod(uid, str(cpus))
                a, b = builtin.admit(pod), vendor.admit(pod)
                assert (a.admitted, a.reason) == (b.admitted, b.reason)
            else:
                assert builtin.remove(uid) == vendor.remove(uid)
            assert vendor.shared_pool() == builtin.shared_pool()
            for uid in builtin.pods:
                assert vendor.exclusive_cpus(uid, "c") == builtin.exclusive_cpus(uid, "c")
            assert vendor.held_cpus() == builtin.held_cpus()


class TestTheNRTCountsAVendorPluginsCPUs:
    """The simulator's incremental publisher and ``node_nrt`` report a vendor CPU plugin's CPUs alike: its
    ``allocatable()``/``available()`` rows stand for ``cpu`` in every zone (``_with_vendor_rows``)."""

    def test_publisher_equals_node_nrt_with_the_cpu_plugin_out_of_the_builtin(self) -> None:
        from numaplane.nrt.from_manager import NRTPublisher, node_nrt

        manager = ResourceManager(TOPOLOGY, OFF, extra_plugins=[_vendor()])
        publisher = NRTPublisher(manager, "n1")
        free_before = {z.name: z.resources for z in publisher.publish().zones}
        for uid, cpu in (("a", "2"), ("b", "3"), ("c", "1")):
            assert manager.admit(_pod(uid, cpu)).admitted
            assert publisher.publish() == node_nrt(manager, "n1")
        used = {z.name: {r.name: r.available.value() for r in z.resources} for z in publisher.publish().zones}
        before = {name: {r.name: r.available.value() for r in rows} for name, rows in free_before.items()}
        assert sum(before[z]["cpu"] - used[z]["cpu"] for z in used) == 6  # the vendor plugin's 6 CPUs
        manager.remove("b")
        assert publisher.publish() == node_nrt(manager, "n1")
