"""Annotations never grant (issue 24 item 3): ``resources.numaplane.io/<container>`` is a claim the
pod spec must back; resources come from the pod spec (and the cgroup values the kubelet wrote from it).

Before the fix, ``{"example.com/gpu": 1}`` in a pod's own annotation granted ``gpu0`` to a Guaranteed
pod and ``gpu1`` to a BestEffort pod whose spec requested no device, at creation and again when a
restarted agent re-derived its state from the runtime (Synchronize).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from state_helpers import container, guaranteed, sandbox

from numaplane.agent.errors import AdmissionRejected
from numaplane.agent.state import NodeAgentState
from numaplane.nri.events import ContainerState
from numaplane.nri.proto import api_pb2
from numaplane.policy.manager import ResourceManager
from numaplane.resources.pod import Pod, parse_pod
from numaplane.topology.model import synthetic

TOPOLOGY = synthetic(sockets=2, cores_per_numa=4, threads_per_core=2)
GPU = "example.com/gpu"
CONFIG: dict[str, Any] = {
    "cpuManager": {"reservedCPUs": "0"},
    "devices": {GPU: [{"id": "gpu0", "numa": [0]}, {"id": "gpu1", "numa": [1]}]},
}
CLAIM = {"resources.numaplane.io/main": json.dumps({GPU: 1})}


class Pods:
    """A ``pod_lookup`` over a dict (the Pod informer's role)."""

    def __init__(self, *pods: Pod) -> None:
        self.by_uid = {p.uid: p for p in pods}

    def __call__(self, uid: str) -> Pod | None:
        return self.by_uid.get(uid)


def held_devices(node_state: NodeAgentState) -> dict[str, tuple[str, ...]]:
    """Every device the manager holds, by manager pod."""
    out: dict[str, tuple[str, ...]] = {}
    for uid, admission in node_state.manager.admissions.items():
        for c in admission.containers:
            for ids in c.devices.values():
                out[uid] = out.get(uid, ()) + ids
    return out


def api_pod(uid: str, name: str, *, gpus: int = 0, annotations: dict[str, str] | None = None) -> Pod:
    limits: dict[str, str] = {"cpu": "1", "memory": "64Mi"}
    if gpus:
        limits[GPU] = str(gpus)
    return parse_pod(
        {
            "metadata": {"name": name, "namespace": "default", "uid": uid, "annotations": annotations or {}},
            "spec": {
                "containers": [{"name": "main", "image": "x", "resources": {"requests": limits, "limits": limits}}]
            },
        }
    )


@pytest.mark.parametrize("qos", ["Guaranteed", "BestEffort"])
def test_without_the_pod_spec_an_annotation_grants_no_device(qos: str) -> None:
    node_state = NodeAgentState(ResourceManager(TOPOLOGY, CONFIG))
    pod = sandbox("forger", qos=qos, annotations=CLAIM)
    ctr = guaranteed(pod) if qos == "Guaranteed" else container(pod)
    with pytest.raises(AdmissionRejected) as exc:
        node_state.create(pod, ctr)
    assert exc.value.reason == "UnverifiedResources"
    assert "annotations never grant" in exc.value.message and GPU in exc.value.message
    assert "pod default/forger container main" in str(exc.value)  # the runtime's (and kubelet's) event text
    assert held_devices(node_state) == {} and node_state.records == {}
    assert node_state.check() == []


def test_an_annotation_the_spec_does_not_back_is_refused_with_the_spec_known() -> None:
    sb = sandbox("forger", annotations=CLAIM)
    lookup = Pods(api_pod(sb.uid, "forger", annotations=CLAIM))  # Guaranteed, no device in the spec
    node_state = NodeAgentState(ResourceManager(TOPOLOGY, CONFIG), pod_lookup=lookup)
    with pytest.raises(AdmissionRejected) as exc:
        node_state.create(sb, guaranteed(sb))
    assert exc.value.reason == "ResourceNotRequested"
    assert f"claims {GPU}=1" in exc.value.message and "does not request it" in exc.value.message
    assert held_devices(node_state) == {} and node_state.check() == []


def test_another_amount_than_the_spec_requests_is_refused() -> None:
    claim = {"resources.numaplane.io/main": json.dumps({GPU: 2})}
    sb = sandbox("more", annotations=claim)
    node_state = NodeAgentState(ResourceManager(TOPOLOGY, CONFIG), pod_lookup=Pods(api_pod(sb.uid, "more", gpus=1)))
    with pytest.raises(AdmissionRejected) as exc:
        node_state.create(sb, guaranteed(sb))
    assert exc.value.reason == "ResourceNotRequested" and "requests 1" in exc.value.message
    assert held_devices(node_state) == {}


def test_the_spec_grants_and_a_matching_annotation_is_accepted() -> None:
    sb = sandbox("real", annotations=CLAIM)
    plain = sandbox("plain")
    lookup = Pods(api_pod(sb.uid, "real", gpus=1, annotations=CLAIM), api_pod(plain.uid, "plain", gpus=1))
    node_state = NodeAgentState(ResourceManager(TOPOLOGY, CONFIG), pod_lookup=lookup)
    node_state.create(sb, guaranteed(sb))
    node_state.create(plain, guaranteed(plain))
    assert sorted(d for ids in held_devices(node_state).values() for d in ids) == ["gpu0", "gpu1"]
    assert node_state.check() == []


def test_a_restart_rederives_no_device_from_an_annotation() -> None:
    """Synchronize without a checkpoint (the state a restart re-derives from the runtime): the running
    forger gets no device; it waits (the claim may be checked once the Pod is known)."""
    node_state = NodeAgentState(ResourceManager(TOPOLOGY, CONFIG))
    be = sandbox("be", qos="BestEffort", annotations=CLAIM)
    gu = sandbox("gu", annotations=CLAIM)
    running = [
        container(be, state=api_pb2.CONTAINER_RUNNING, cpus="0-15"),
        guaranteed(gu, state=api_pb2.CONTAINER_RUNNING, cpus="0-15"),
    ]
    assert all(c.state is ContainerState.RUNNING for c in running)
    result = node_state.synchronize([be, gu], running)
    assert sorted(reason for _cid, reason, _msg in result.failed) == ["UnverifiedResources"] * 2
    assert held_devices(node_state) == {}
    assert set(node_state.waiting) == {c.id for c in running}
    assert node_state.check() == []
