"""NRI protobuf ↔ the agent's own values (``nri/translate.py``): what the agent reads is copied
exactly, an unset wrapped scalar is ``None`` (never 0), and decisions go back as the runtime expects."""

from __future__ import annotations

import pytest

from numaplane.nri.events import CgroupResources, ContainerState, CpusetUpdate, RuntimeContainer, Sandbox
from numaplane.nri.proto import api_pb2
from numaplane.nri.translate import container_from_pb, container_update_pb, sandbox_from_pb
from numaplane.topology.cpuset import CPUSet


def test_a_sandbox_keeps_ids_names_annotations_and_cgroup_parent() -> None:
    pb = api_pb2.PodSandbox(id="sb-1", name="web", uid="uid-1", namespace="prod")
    pb.annotations["numaplane.io/cpu-strategy"] = "spread"
    pb.linux.cgroup_parent = "/kubepods/burstable/poduid-1"
    sandbox = sandbox_from_pb(pb)
    assert sandbox == Sandbox(
        id="sb-1",
        uid="uid-1",
        name="web",
        namespace="prod",
        annotations={"numaplane.io/cpu-strategy": "spread"},
        cgroup_parent="/kubepods/burstable/poduid-1",
    )
    pb.annotations["later"] = "x"  # the value is a copy: later changes to the message do not leak in
    assert "later" not in sandbox.annotations


def test_a_container_keeps_its_resources_and_unset_ones_are_none() -> None:
    pb = api_pb2.Container(id="c1", pod_sandbox_id="sb-1", name="main", state=api_pb2.CONTAINER_RUNNING)
    cpu = pb.linux.resources.cpu
    cpu.shares.value, cpu.quota.value, cpu.period.value = 2048, 200000, 100000
    cpu.cpus, cpu.mems = "2-3", "0"
    pb.linux.resources.memory.limit.value = 64 << 20
    pb.linux.resources.hugepage_limits.append(api_pb2.HugepageLimit(page_size="2MB", limit=4 << 20))
    assert container_from_pb(pb) == RuntimeContainer(
        id="c1",
        pod_sandbox_id="sb-1",
        name="main",
        state=ContainerState.RUNNING,
        resources=CgroupResources(
            cpu_shares=2048,
            cpu_quota=200000,
            cpu_period=100000,
            memory_limit=64 << 20,
            cpus="2-3",
            mems="0",
            hugepage_limits=(("2MB", 4 << 20),),
        ),
    )
    bare = container_from_pb(api_pb2.Container(id="c2", pod_sandbox_id="sb-1", name="side"))
    assert bare.resources == CgroupResources() and bare.state is ContainerState.UNKNOWN
    only_shares = api_pb2.Container(id="c3")
    only_shares.linux.resources.cpu.shares.value = 2
    assert container_from_pb(only_shares).resources == CgroupResources(cpu_shares=2)


@pytest.mark.parametrize(
    ("number", "state", "live"),
    [
        (0, ContainerState.UNKNOWN, True),
        (1, ContainerState.CREATED, True),
        (2, ContainerState.PAUSED, True),
        (3, ContainerState.RUNNING, True),
        (4, ContainerState.STOPPED, False),
        (9, ContainerState.UNKNOWN, True),
    ],
)
def test_container_states_keep_nri_numbers_and_a_new_number_reads_unknown(
    number: int, state: ContainerState, live: bool
) -> None:
    pb = api_pb2.Container(id="c", state=api_pb2.ContainerState.ValueType(number))
    assert container_from_pb(pb).state is state and state.live is live


def test_an_update_sets_cpus_and_mems_only_when_given_and_tolerates_a_gone_container() -> None:
    pinned = container_update_pb(CpusetUpdate("c1", CPUSet.parse("1,9"), CPUSet.parse("0")))
    assert (pinned.container_id, pinned.ignore_failure) == ("c1", True)
    assert (pinned.linux.resources.cpu.cpus, pinned.linux.resources.cpu.mems) == ("1,9", "0")
    shared = container_update_pb(CpusetUpdate("c2", CPUSet.parse("0-7")))
    assert shared.linux.resources.cpu.cpus == "0-7" and shared.linux.resources.cpu.mems == ""
