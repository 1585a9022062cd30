"""The CPU policy served out of process passes every ``cpu-static`` conformance case, through the gRPC adapter.

The example plugin (``examples/plugins/cpu_static_plugin.py``) runs as its own process; each case is
replayed through :class:`GrpcResourcePlugin` — Configure with the case's topology and reservation,
Restore of the case's state, then the ops (``start`` = Restore with validation, ``allocate`` /
``remove`` = Allocate / Release, ``pod_guaranteed_cpus`` = GetExclusiveAmounts) — with the same
expectations as the in-process runner (``numaplane.conformance.kinds.cpu_static``).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from numaplane.conformance.outcome import CaseContext
from numaplane.grpcapi.pluginapi.adapter import GrpcResourcePlugin
from numaplane.grpcapi.pluginapi.asking import admit, flush
from numaplane.nrt.from_manager import allocation_state
from numaplane.policy.config import NodeResourceConfig, parse_config
from numaplane.policy.errors import AdmissionError, PolicyConfigError, StateError
from numaplane.policy.hints import TopologyHint
from numaplane.policy.manager import ResourceManager
from numaplane.resources.pod import Pod, parse_pod
from numaplane.topology.cpuset import CPUSet
from numaplane.topology.model import synthetic


def _cases(shared: Path) -> list[dict[str, Any]]:
    path = shared / "conformance" / "cpu-static.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _config_doc(case: dict[str, Any]) -> dict[str, Any]:
    reserved = case.get("reserved") or {}
    cpu: dict[str, Any] = {"policy": "static", "reservedCPUCount": int(reserved.get("count", 0))}
    if "cpus" in reserved:
        cpu["reservedCPUs"] = str(reserved["cpus"])
    cpu["options"] = dict(case.get("options") or {})
    return {"cpuManager": cpu}


def _state_doc(state: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = {"policyName": "static", "defaultCpuSet": str(state.get("default", ""))}
    if state.get("assignments"):
        doc["entries"] = state["assignments"]
    return doc


def _state(plugin: GrpcResourcePlugin) -> dict[str, Any]:
    plugin.refresh_state()  # the plugin's state now (snapshot() answers from the cache)
    return plugin.snapshot()


def _assigned(plugin: GrpcResourcePlugin, pod: str, container: str) -> str | None:
    found = (_state(plugin).get("entries") or {}).get(pod, {}).get(container)
    return None if found is None else str(found)


def _default(plugin: GrpcResourcePlugin) -> CPUSet:
    return CPUSet.parse(str(_state(plugin).get("defaultCpuSet", "")))


def run_case(plugin: GrpcResourcePlugin, case: dict[str, Any], ctx: CaseContext) -> tuple[bool, Any, Any, str]:
    """``(passed, expected, got, where)`` for one case."""
    plugin.topology = ctx.topology(str(case["topology"]))
    plugin.config_doc = _config_doc(case)
    try:
        plugin.connect()
    except PolicyConfigError as exc:
        expected = (case.get("expect_new") or {}).get("error")
        return expected == str(exc), expected, {"error": str(exc)}, "expect_new"
    if "expect_new" in case:
        return False, case["expect_new"], "constructed", "expect_new"
    plugin.restore_now(_state_doc(case.get("state") or {}))
    pods = {uid: parse_pod(doc) for uid, doc in (case.get("pods") or {}).items()}
    for i, op in enumerate(case.get("ops") or []):
        ok, expected, got = _op(plugin, pods, op)
        if not ok:
            return False, expected, got, f"ops[{i}]"
    return True, None, None, ""


def _op(plugin: GrpcResourcePlugin, pods: dict[str, Pod], op: dict[str, Any]) -> tuple[bool, Any, Any]:
    kind = op["op"]
    expect = op.get("expect") or {}
    if kind == "start":
        try:
            after = plugin.restore_validated(_state(plugin))
        except StateError as exc:
            got: Any = {"error": str(exc)}
            return expect == got, expect, got
        got = {"default": str(after.get("defaultCpuSet", ""))}
        if "default" in expect:
            return CPUSet.parse(expect["default"]) == CPUSet.parse(got["default"]), expect, got
        return expect == got, expect, got
    if kind == "pod_guaranteed_cpus":
        n = plugin.exclusive_amounts(pods[op["pod"]])["cpu"]
        return n == expect.get("cpus"), expect, {"cpus": n}
    if kind == "remove":
        plugin.release_now(str(op["pod"]), str(op["container"]))
        if _assigned(plugin, str(op["pod"]), str(op["container"])) is not None:
            return False, "no assignment", "assignment kept"
        ok, exp, got = True, None, None
    elif kind == "allocate":
        ok, exp, got = _allocate(plugin, pods[op["pod"]], op)
    else:
        return False, "a known op", kind
    if ok and "expect_default" in op and CPUSet.parse(op["expect_default"]) != _default(plugin):
        return False, op["expect_default"], _default(plugin).format()
    return ok, exp, got


def _allocate(plugin: GrpcResourcePlugin, pod: Pod, op: dict[str, Any]) -> tuple[bool, Any, Any]:
    expect = op.get("expect") or {}
    name = str(op["container"])
    container = pod.container(name)
    assert container is not None
    before = _assigned(plugin, pod.uid, name)
    try:
        allocation = plugin.allocate(pod, container, TopologyHint.from_dict(op.get("hint")))
    except AdmissionError as exc:
        got: dict[str, Any] = {"error": str(exc)}
        if exc.reason == "SMTAlignmentError":
            got["error_type"] = exc.reason
        if _assigned(plugin, pod.uid, name) != before:
            return False, "no new assignment after an error", _assigned(plugin, pod.uid, name)
        return got == expect, expect, got
    assigned = _assigned(plugin, pod.uid, name)
    if "shared" in expect:
        return allocation.cpus is None and assigned is None, expect, {"cpus": assigned}
    ok = (
        "cpus" in expect
        and assigned is not None
        and allocation.cpus is not None
        and CPUSet.parse(assigned) == allocation.cpus == CPUSet.parse(expect["cpus"])
    )
    return ok, expect, {"cpus": assigned}


def test_cpu_static_cases_pass_through_the_grpc_adapter(shared_dir: Path, example_cpu_plugin_socket: Path) -> None:
    cases = _cases(shared_dir)
    ctx = CaseContext(shared_dir / "conformance" / "cpu-static.jsonl", [shared_dir / "conformance"])
    plugin = GrpcResourcePlugin(
        "example.numaplane.io/cpu-static",
        {"cpu"},
        str(example_cpu_plugin_socket),
        topology=synthetic(),
        config=NodeResourceConfig(),
        timeout_seconds=5.0,
    )
    failures = []
    try:
        for case in cases:
            passed, expected, got, where = run_case(plugin, case, ctx)
            if not passed:
                failures.append((case["id"], where, expected, got))
    finally:
        plugin.close()
    assert len(cases) >= 50
    assert failures == []


def test_an_unreachable_plugin_refuses_only_its_resources(short_tmp: Path) -> None:
    plugin = GrpcResourcePlugin(
        "example.numaplane.io/cpu-static",
        {"cpu"},
        str(short_tmp / "nobody.sock"),
        topology=synthetic(),
        config=NodeResourceConfig(),
    )
    pod = parse_pod(
        {
            "metadata": {"uid": "u1", "name": "p"},
            "spec": {
                "containers": [
                    {"name": "gu", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}},
                    {"name": "other", "resources": {"limits": {"example.com/widget": "1"}}},
                ]
            },
        }
    )
    gu, other = pod.containers
    assert plugin.hints(pod, gu) is None
    with pytest.raises(AdmissionError) as info:
        plugin.allocate(pod, gu, TopologyHint(None, True))
    assert info.value.reason == "PluginUnavailable"
    assert "example.numaplane.io/cpu-static" in info.value.message and "cpu" in info.value.message
    assert plugin.allocate(pod, other, TopologyHint(None, True)).cpus is None
    plugin.release("u1", "gu")
    assert plugin.pending_releases == [("u1", "gu")]
    plugin.close()


async def test_a_remote_cpu_plugins_allocations_reach_the_views(example_cpu_plugin_socket: Path) -> None:
    """The CPUs an out-of-process CPU plugin gives are in the NRT inputs and PodResources answers
    (built from its protocol answers, cached by the driver), and so are the CPUs it may give."""
    topology = synthetic()
    tm = {"policy": "single-numa-node"}
    config = parse_config({"topologyManager": tm, "cpuManager": {"policy": "none"}})
    plugin = GrpcResourcePlugin(
        "example.numaplane.io/cpu-static", {"cpu"}, str(example_cpu_plugin_socket), topology=topology, config=config
    )
    plugin.config_doc = {"topologyManager": tm, "cpuManager": {"policy": "static", "reservedCPUCount": 2}}
    await asyncio.to_thread(plugin.connect)
    try:
        manager = ResourceManager(topology, config, extra_plugins=[plugin])
        await flush(manager)
        guaranteed = {"cpu": "2", "memory": "1Gi"}
        pod = parse_pod(
            {
                "metadata": {"uid": "u1", "name": "p", "namespace": "ns"},
                "spec": {"containers": [{"name": "c", "resources": {"requests": guaranteed, "limits": guaranteed}}]},
            }
        )
        admission = await admit(manager, pod)
        assert admission.admitted and admission.containers[0].exclusive_cpus is not None
        state = allocation_state(manager, vendor_devices=True)
        (held,) = state.containers
        assert held.exclusive_cpus == admission.containers[0].exclusive_cpus
        assert state.allocatable_cpus == plugin.inventory().cpus and state.allocatable_cpus.size() == 14
        _, listed = state.to_podresources()
        assert [(p.name, c.name, c.cpu_ids) for p in listed for c in p.containers] == [
            ("p", "c", tuple(held.exclusive_cpus))
        ]
    finally:
        await plugin.aclose()
