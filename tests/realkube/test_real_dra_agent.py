"""The agent aligns exclusive CPUs with DRA devices: real kube-apiserver v1.36.2 + real containerd 1.7 (issue 28).

What is real: the kube-apiserver (``resource.k8s.io/v1`` ResourceSlice, ResourceClaim with its status
written through the status subresource, Pods), the agent's informers and lightkube client on it, the
private containerd 1.7 with NRI calling the agent at CreateContainer through CRI, and the containers'
cgroups. What is not: there is no kubelet and no DRA driver on this path — the claim is allocated and
reserved by the test (as kube-scheduler's allocator would write it) and the containers are created
through CRI as a kubelet would after NodePrepareResources; the machine has one NUMA node, so the agent
is given a topology file of the same two CPUs as two NUMA nodes and the devices carry fake
``resource.kubernetes.io/numaNode`` attributes.

Checked: without the claim the kubelet's choice for one exclusive CPU is CPU 0 (node 0); with the
claimed device on node 1 the container's ``cpuset.cpus`` is CPU 1, the agent's allocation records the
device, and its PodResources answer lists the CPU and the claim in ``dynamic_resources``; under
``single-numa-node`` a second pod whose device is on node 1, whose CPUs are taken, fails CreateContainer
with ``TopologyAffinityError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from numaplane.agent.daemon import Agent, AgentOptions
from numaplane.grpcapi.podresources.client import PodResourcesClient
from numaplane.kube.client import LightkubePort
from numaplane.kube.resources import POD, RESOURCE_CLAIM, RESOURCE_SLICE
from numaplane.topology.model import synthetic
from numaplane_harness.containerd import BUSYBOX_IMAGE, ContainerdInstance, cpuset_of_container, make_containerd_fixture
from numaplane_harness.cri import CRIError
from numaplane_harness.kubecluster import ControlPlane

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agent"))
from dra_helpers import allocation_status, claim, pod_with_claim, resource_slice

pytestmark = pytest.mark.timeout(240)

dra_containerd = make_containerd_fixture("dra_containerd")

NODE = "dra-node"
NAMESPACE = "default"
#: the machine's two CPUs as two NUMA nodes (cpu 0 on node 0, cpu 1 on node 1); memory policy None
TOPOLOGY = synthetic(sockets=2, cores_per_numa=1, threads_per_core=1, memory_per_numa_bytes=1 << 30)
CONFIG = {
    "topologyManager": {"policy": "single-numa-node"},
    "cpuManager": {"reservedCPUCount": 0},
    "dra": {"enabled": True},
}


class Runner:
    """Sandboxes and containers through CRI with the API pods' uids (blocking: run in threads)."""

    def __init__(self, containerd: ContainerdInstance) -> None:
        self.containerd = containerd
        self.cri = containerd.cri()
        self.sandboxes: list[str] = []

    def run(self, name: str, uid: str) -> tuple[str | None, str, str]:
        """``(container id or None, cgroup parent, CRI error)`` of a Guaranteed 1-CPU container ``main``."""
        parent = f"{self.containerd.cgroup_root}/kubepods/pod{uid}"
        logs = self.containerd.workdir / "pod-logs" / uid
        logs.mkdir(parents=True, exist_ok=True)
        config = self.cri.pod_config(name, uid, namespace=NAMESPACE, cgroup_parent=parent, log_directory=str(logs))
        pod_id = self.cri.run_pod_sandbox(config)
        self.sandboxes.append(pod_id)
        ctr = self.cri.container_config(
            "main",
            BUSYBOX_IMAGE,
            ["sleep", "3600"],
            cpu_shares=1024,
            cpu_quota=100000,
            cpu_period=100000,
            memory_limit_in_bytes=64 << 20,
        )
        try:
            cid = self.cri.create_container(pod_id, ctr, config)
            self.cri.start_container(cid)
        except CRIError as exc:
            return None, parent, exc.details
        return cid, parent, ""

    def close(self) -> None:
        for pod_id in self.sandboxes:
            with contextlib.suppress(CRIError):
                self.cri.stop_pod_sandbox(pod_id)
            with contextlib.suppress(CRIError):
                self.cri.remove_pod_sandbox(pod_id)
        self.cri.close()


@pytest.fixture
def runner(dra_containerd: ContainerdInstance) -> Iterator[Runner]:
    r = Runner(dra_containerd)
    try:
        yield r
    finally:
        r.close()


async def _allocated(kube: LightkubePort, name: str, device: str) -> dict[str, Any]:
    pod = await kube.create(POD, pod_with_claim(name, NODE, f"{name}-accel", cpu="1", image=BUSYBOX_IMAGE))
    created = await kube.create(RESOURCE_CLAIM, claim(f"{name}-accel"))
    stored = await kube.update_status(RESOURCE_CLAIM, {**created, "status": allocation_status(NODE, device, pod)})
    assert stored["status"]["allocation"]["devices"]["results"][0]["device"] == device  # the real API kept it
    return pod


async def test_cpus_follow_the_claimed_device_and_unalignable_is_refused(
    control_plane: ControlPlane, dra_containerd: ContainerdInstance, runner: Runner, short_tmp: Path
) -> None:
    kube = LightkubePort.from_kubeconfig(control_plane.admin_kubeconfig)
    names = ("dra-a", "dra-b")
    try:
        await kube.create(RESOURCE_SLICE, resource_slice(NODE, {"accel0": 0, "accel1": 1, "accel2": 1}))
        pod_a = await _allocated(kube, "dra-a", "accel1")
        pod_b = await _allocated(kube, "dra-b", "accel2")
        (short_tmp / "config.json").write_text(json.dumps(CONFIG))
        socket = short_tmp / "pr.sock"
        agent = Agent(
            AgentOptions(
                nri_socket=dra_containerd.nri_socket,
                state_dir=short_tmp / "state",
                config_file=short_tmp / "config.json",
                node_name=NODE,
                podresources_socket=str(socket),
                nri_backoff_initial_seconds=0.1,
            ),
            topology=TOPOLOGY,
            kube=kube,
        )
        await agent.start()
        try:
            await agent.wait_ready(20)
            assert agent.claims is not None and agent.claims.started
            await asyncio.wait_for(agent.claims.wait_for_sync(), 20)
            cid, parent, error = await asyncio.to_thread(runner.run, "dra-a", pod_a["metadata"]["uid"])
            assert cid is not None, error
            cpus, _mems = cpuset_of_container(parent, cid)
            assert cpus == "1"  # the device's node; without the claim: CPU 0 (test_agent_dra covers the contrast)
            assert agent.state is not None and agent.state.check() == []
            (container,) = agent.state.manager.admissions[pod_a["metadata"]["uid"]].containers
            (dra,) = [a for a in container.allocations if a.plugin == "dra"]
            assert [(d["device"], d["numa"]) for d in dra.extra["devices"]] == [("accel1", [1])]
            async with PodResourcesClient(str(socket), timeout_seconds=5) as client:
                listed = {p.name: p for p in await client.list()}
            (main,) = listed["dra-a"].containers
            assert list(main.cpu_ids) == [1]
            assert [(d.claim_name, [r.device_name for r in d.claim_resources]) for d in main.dynamic_resources] == [
                ("dra-a-accel", ["accel1"])
            ]
            # the second pod's device is on node 1 too, whose only CPU is taken: refused at CreateContainer
            cid_b, _parent, error_b = await asyncio.to_thread(runner.run, "dra-b", pod_b["metadata"]["uid"])
            assert cid_b is None and "TopologyAffinityError" in error_b, error_b
        finally:
            await agent.stop()
    finally:
        for name in names:
            with contextlib.suppress(Exception):
                await kube.delete(POD, name, namespace=NAMESPACE)
            with contextlib.suppress(Exception):
                await kube.delete(RESOURCE_CLAIM, f"{name}-accel", namespace=NAMESPACE)
        with contextlib.suppress(Exception):
            await kube.delete(RESOURCE_SLICE, f"{NODE}-accel")
        await kube.close()
