"""Allocations keyed by pod uid + container name, kept across a container's restart whatever the agent
knows of the Pod, released when the container is removed or its sandbox stops (issue 24 item 4).

Before the fix a one-at-a-time container (no ``--watch-pods``, or the informer lagging at the pod's
first container) gave its CPUs back at StopContainer: a pod bound meanwhile took them and the
restarted container got other CPUs, or was refused with ``TopologyAffinityError``.
"""

from __future__ import annotations

from typing import Any

import pytest
from state_helpers import guaranteed, sandbox

from numaplane.agent.errors import AdmissionRejected
from numaplane.agent.state import NodeAgentState
from numaplane.nri.proto import api_pb2
from numaplane.policy.manager import ResourceManager
from numaplane.resources.pod import Pod, parse_pod
from numaplane.topology.model import synthetic

# 2 NUMA nodes x 4 cores x 2 threads; CPU 0 reserved: node 0 has 7 allocatable CPUs, node 1 has 8
TOPOLOGY = synthetic(sockets=2, cores_per_numa=4, threads_per_core=2)
CONFIG: dict[str, Any] = {"topologyManager": {"policy": "single-numa-node"}, "cpuManager": {"reservedCPUs": "0"}}


class LaggingInformer:
    """A ``pod_lookup`` that knows a pod only once it was :meth:`add`-ed (the informer's lag)."""

    def __init__(self) -> None:
        self.pods: dict[str, Pod] = {}

    def add(self, uid: str, name: str, cpus: int) -> None:
        q = {"cpu": str(cpus), "memory": "64Mi"}
        self.pods[uid] = parse_pod(
            {
                "metadata": {"name": name, "namespace": "default", "uid": uid},
                "spec": {"containers": [{"name": "main", "image": "x", "resources": {"requests": q, "limits": q}}]},
            }
        )

    def __call__(self, uid: str) -> Pod | None:
        return self.pods.get(uid)


@pytest.mark.parametrize("knows", ["no-pod-informer", "informer-lag"])
def test_a_restarted_container_keeps_its_cpus_while_other_pods_are_bound(knows: str) -> None:
    informer = LaggingInformer()
    node_state = NodeAgentState(
        ResourceManager(TOPOLOGY, CONFIG), pod_lookup=informer if knows != "no-pod-informer" else None
    )
    crash = sandbox("crash")
    first = node_state.create(crash, guaranteed(crash, n=7))  # node 0, all of it
    assert first.exclusive and len(first.cpus) == 7
    assert node_state.stop("ctr-crash-main") == []  # it crashed: StopContainer, the pool does not grow
    if knows == "informer-lag":
        informer.add(crash.uid, "crash", 7)  # the informer catches up before the restart
    # a pod bound meanwhile goes to node 1: node 0 still belongs to the crashed container
    other = sandbox("other")
    assert not node_state.create(other, guaranteed(other, n=4)).cpus & first.cpus
    # the kubelet restarts the container: same pod uid and name, a new container id
    again = node_state.create(crash, guaranteed(crash, n=7, cid="ctr-crash-main-1"))
    assert again.cpus == first.cpus and again.exclusive
    assert "ctr-crash-main" not in node_state.records and node_state.check() == []
    # a pod that needs more than node 1's 4 free CPUs is refused: node 0 is the restarted container's
    late = sandbox("late")
    with pytest.raises(AdmissionRejected) as exc:
        node_state.create(late, guaranteed(late, n=5))
    assert exc.value.reason == "TopologyAffinityError"


def test_removing_the_container_releases_its_allocation() -> None:
    node_state = NodeAgentState(ResourceManager(TOPOLOGY, CONFIG))
    a = sandbox("a")
    node_state.create(a, guaranteed(a, n=4))
    node_state.stop("ctr-a-main")
    assert set(node_state.manager.pods) == {"uid-a/main"}
    node_state.remove_container("ctr-a-main", "uid-a", "main", "sb-a")
    assert node_state.manager.pods == {} and node_state.records == {} and node_state.check() == []


def test_the_sandbox_stop_releases_a_stopped_containers_allocation() -> None:
    node_state = NodeAgentState(ResourceManager(TOPOLOGY, CONFIG))
    a = sandbox("a")
    node_state.create(a, guaranteed(a, n=4))
    node_state.stop("ctr-a-main")
    node_state.remove_pod("sb-a", "uid-a")
    assert node_state.manager.pods == {} and node_state.records == {} and node_state.check() == []


def test_a_stopped_container_keeps_its_allocation_through_a_restart_of_the_agent() -> None:
    """Checkpoint + Synchronize: a stopped container the runtime still lists keeps its CPUs; the
    restarted container inherits them; a container the runtime no longer lists (removed) is released."""
    node_state = NodeAgentState(ResourceManager(TOPOLOGY, CONFIG))
    a, b = sandbox("a"), sandbox("b")
    first = node_state.create(a, guaranteed(a, n=4))
    node_state.create(b, guaranteed(b, n=4))
    node_state.stop("ctr-a-main")
    node_state.stop("ctr-b-main")
    restarted = NodeAgentState(ResourceManager(TOPOLOGY, CONFIG))
    restarted.restore(node_state.snapshot())
    assert restarted.records["ctr-a-main"].stopped
    listed = [guaranteed(a, n=4, state=api_pb2.CONTAINER_STOPPED)]  # b's container was removed meanwhile
    result = restarted.synchronize([a, b], listed)
    assert result.dropped == ("ctr-b-main",) and set(restarted.manager.pods) == {"uid-a/main"}
    again = restarted.create(a, guaranteed(a, n=4, cid="ctr-a-main-1"))
    assert again.cpus == first.cpus and restarted.check() == []
