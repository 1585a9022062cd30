"""The read-only checks on plain objects, and through the fake API server: what each problem reports."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from numaplane.agent.takeover import CONDITION_TYPE, check, report_condition
from numaplane.e2e.checks import check_agent, check_daemon_sets, check_nrt, check_operator
from numaplane.e2e.report import Status
from numaplane.e2e.view import ClusterView, gather
from numaplane.kube.client import LightkubePort
from numaplane.kube.resources import CRD, DAEMON_SET, NODE_RESOURCE_TOPOLOGY, POD
from numaplane.kube.resources import NODE as NODE_RESOURCE
from numaplane.operator.api.numaresources import NUMAResourcesOperator
from numaplane.operator.controller import NODE_RESOURCE_POLICY, NUMA_RESOURCES_OPERATOR
from numaplane.testing.fakeapi import FakeApiServer
from numaplane.testing.fakeapi.crd import crd_for

NRO = {
    "apiVersion": "numaplane.io/v1",
    "kind": "NUMAResourcesOperator",
    "metadata": {"name": "numaresourcesoperator"},
    "spec": {"nodeGroups": [{"name": "w", "nodeSelector": {"matchLabels": {"pool": "w"}}}]},
    "status": {"conditions": [{"type": "Available", "status": "True", "reason": "Available"}]},
}
NODE = {
    "metadata": {"name": "n1", "uid": "u1", "labels": {"pool": "w"}},
    "status": {"capacity": {"cpu": "8", "memory": "16Gi"}, "allocatable": {"cpu": "6", "memory": "15Gi"}},
}


def _zone(n: int, cpu: tuple[int, int, int]) -> dict[str, Any]:
    return {
        "name": f"node-{n}",
        "type": "Node",
        "resources": [
            {"name": "cpu", "capacity": str(cpu[0]), "allocatable": str(cpu[1]), "available": str(cpu[2])},
            {"name": "memory", "capacity": "8Gi", "allocatable": "8Gi", "available": "8Gi"},
        ],
    }


NRT = {
    "metadata": {"name": "n1", "ownerReferences": [{"kind": "Node", "name": "n1", "uid": "u1"}]},
    "attributes": [
        {"name": "topologyManagerPolicy", "value": "single-numa-node"},
        {"name": "topologyManagerScope", "value": "container"},
    ],
    "zones": [_zone(0, (4, 3, 3)), _zone(1, (4, 3, 1))],
}
EXPORTER = {
    "metadata": {"name": "exp-1", "labels": {"app.kubernetes.io/component": "exporter"}},
    "spec": {"nodeName": "n1"},
    "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
}


def _view(**changes: Any) -> ClusterView:
    view = ClusterView(namespace="ns", nro=NRO, nro_model=NUMAResourcesOperator.from_dict(NRO))
    view.nodes = [copy.deepcopy(NODE)]
    view.nrts = {"n1": copy.deepcopy(NRT)}
    view.pods = [copy.deepcopy(EXPORTER)]
    for key, value in changes.items():
        setattr(view, key, value)
    return view


def test_a_consistent_nrt_passes() -> None:
    result = check_nrt(_view(), NODE)
    assert result.status is Status.PASS, result
    assert result.message == "2 zones, 8 CPUs, policy single-numa-node, exporter ready"


def test_each_inconsistency_is_named() -> None:
    nrt = copy.deepcopy(NRT)
    nrt["zones"] = [_zone(0, (4, 3, 3))]
    assert "adds up to 4, the Node's capacity is 8" in check_nrt(_view(nrts={"n1": nrt}), NODE).message
    nrt = copy.deepcopy(NRT)
    nrt["metadata"]["ownerReferences"][0]["uid"] = "old"
    assert "older Node" in check_nrt(_view(nrts={"n1": nrt}), NODE).message
    nrt = copy.deepcopy(NRT)
    nrt["attributes"] = nrt["attributes"][:1]
    assert "topologyManagerScope" in check_nrt(_view(nrts={"n1": nrt}), NODE).message
    nrt = copy.deepcopy(NRT)
    nrt["zones"] = [_zone(0, (4, 4, 4)), _zone(1, (4, 4, 4))]
    assert "exceeds the Node's allocatable" in check_nrt(_view(nrts={"n1": nrt}), NODE).message
    assert check_nrt(_view(nrts={}), NODE).message == "no NodeResourceTopology for this node"


def test_a_stale_exporter_fails_and_a_memory_difference_warns() -> None:
    unready = copy.deepcopy(EXPORTER)
    unready["status"]["conditions"][0]["status"] = "False"
    result = check_nrt(_view(pods=[unready]), NODE)
    assert result.status is Status.FAIL and result.message.startswith("stale: exporter pod exp-1 is not Ready")
    node = copy.deepcopy(NODE)
    node["status"]["capacity"]["memory"] = "64Gi"
    warned = check_nrt(_view(nodes=[node]), node)
    assert warned.status is Status.WARN and "memory" in warned.message


def test_operator_and_daemon_sets() -> None:
    assert check_operator(_view())[0].status is Status.FAIL  # no Deployment
    view = _view(deployments={"numaplane-operator": {"status": {"availableReplicas": 1}}})
    assert check_operator(view)[0].status is Status.PASS
    degraded = copy.deepcopy(NRO)
    degraded["status"]["conditions"] = [
        {"type": "Degraded", "status": "True", "reason": "InvalidSpec", "message": "spec.nodeGroups[0]: bad"}
    ]
    view.nro = degraded
    assert check_operator(view)[0].message.endswith("Degraded: InvalidSpec — spec.nodeGroups[0]: bad")
    ds = {"numaplane-exporter-w": {"status": {"desiredNumberScheduled": 2, "numberReady": 1}}}
    assert check_daemon_sets(_view(daemon_sets=ds))[0].message == "DaemonSet numaplane-exporter-w: 1 of 2 pods ready"
    ds = {"numaplane-exporter-w": {"status": {"desiredNumberScheduled": 0, "numberReady": 0}}}
    assert check_daemon_sets(_view(daemon_sets=ds))[0].status is Status.WARN
    done = {"desiredNumberScheduled": 2, "numberReady": 2, "updatedNumberScheduled": 2, "observedGeneration": 3}
    ds = {"numaplane-exporter-w": {"metadata": {"generation": 3}, "status": done}}
    assert check_daemon_sets(_view(daemon_sets=ds))[0].status is Status.PASS
    # every pod ready, but one of the previous template (the group just switched mode, say): not a PASS
    ds = {"numaplane-exporter-w": {"metadata": {"generation": 3}, "status": {**done, "updatedNumberScheduled": 1}}}
    rolling = check_daemon_sets(_view(daemon_sets=ds))[0]
    assert rolling.status is Status.FAIL
    assert rolling.message == (
        "DaemonSet numaplane-exporter-w: rolling out, 1 of 2 pods run the current template"
        " (re-run when the rollout is done)"
    )
    # the DaemonSet controller has not yet seen the new template at all
    ds = {"numaplane-exporter-w": {"metadata": {"generation": 4}, "status": done}}
    assert check_daemon_sets(_view(daemon_sets=ds))[0].status is Status.FAIL


def _without_memory(nrt: dict[str, Any], policy: str = "single-numa-node") -> dict[str, Any]:
    nrt = copy.deepcopy(nrt)
    for zone in nrt["zones"]:
        zone["resources"] = [r for r in zone["resources"] if r["name"] != "memory"]
    nrt["attributes"][0]["value"] = policy
    return nrt


def test_memory_manager_none_fails_where_the_numa_filter_checks_guaranteed_pods() -> None:
    """Issue 23 item 6: no zone reports memory → every Guaranteed pod asking memory is refused there."""
    result = check_nrt(_view(nrts={"n1": _without_memory(NRT)}), NODE)
    assert result.status is Status.FAIL, result
    assert result.message.startswith("no NUMA zone of this node reports memory: its memory manager policy is None")
    assert "refuses every Guaranteed pod that requests memory" in result.message
    assert any("kubelet's memoryManagerPolicy" in d for d in result.details)  # a kubelet-mode group
    # a policy the NUMA filter does not check lets those pods through: nothing to flag
    assert check_nrt(_view(nrts={"n1": _without_memory(NRT, "restricted")}), NODE).status is Status.PASS


AGENT_NRO = copy.deepcopy(NRO)
AGENT_NRO["spec"]["nodeGroups"][0]["enforcement"] = "agent"
AGENT_POD = {
    "metadata": {"name": "agent-1", "namespace": "ns", "labels": {"app.kubernetes.io/component": "agent"}},
    "spec": {"nodeName": "n1", "containers": [{"name": "agent", "image": "numaplane"}]},
    "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]},
}


async def _agent_cluster(server: FakeApiServer, nrt: dict[str, Any]) -> LightkubePort:
    """One agent-mode node: its NRT, its exporter pod (Ready), its agent pod (not Ready), its policy."""
    store = server.store
    for res in (NUMA_RESOURCES_OPERATOR, NODE_RESOURCE_POLICY, NODE_RESOURCE_TOPOLOGY):
        await store.create(CRD, crd_for(res))
    await store.create(NUMA_RESOURCES_OPERATOR, copy.deepcopy(AGENT_NRO))
    policy = {"topologyManager": {"policy": "single-numa-node"}, "cpuManager": {"policy": "static"}}
    await store.create(
        NODE_RESOURCE_POLICY,
        {"metadata": {"name": "w-policy"}, "spec": {"nodeGroup": "w", "config": policy}},
    )
    node = await store.create(NODE_RESOURCE, copy.deepcopy(NODE))
    await store.update_status(NODE_RESOURCE, {**node, "status": NODE["status"]})
    nrt = copy.deepcopy(nrt)
    nrt["metadata"]["ownerReferences"][0]["uid"] = node["metadata"]["uid"]
    await store.create(NODE_RESOURCE_TOPOLOGY, nrt)
    exporter = copy.deepcopy(EXPORTER)
    exporter["metadata"]["namespace"] = "ns"
    exporter["spec"]["containers"] = [{"name": "exporter", "image": "numaplane"}]
    for pod in (exporter, AGENT_POD):  # the kubelet's part: the pods' status
        created = await store.create(POD, copy.deepcopy(pod))
        await store.update_status(POD, {**created, "status": pod["status"]})
    return server.port_client()


async def test_a_refused_take_over_is_reported_with_the_conditions_reason(fake_apiserver: FakeApiServer) -> None:
    """Issue 23 item 6: the agent's own ``numaplane.io/TakeOver`` condition, not only "not Ready"."""
    port = await _agent_cluster(fake_apiserver, NRT)
    try:
        verdict = check({"cpuManagerPolicy": "static"}, "/var/lib/kubelet/config.yaml")
        await report_condition(port, "ns", "agent-1", verdict, datetime.now(UTC))  # what the agent writes
        view = await gather(port, "ns", None)
        result = await check_agent(port, view, view.nodes[0])
    finally:
        await port.close()
    assert result.status is Status.FAIL, result
    assert result.message.startswith("agent pod agent-1 refuses to take over the node (KubeletStaticPolicy): ")
    assert "the kubelet's CPU manager policy is 'static'" in result.message
    assert "/var/lib/kubelet/config.yaml" in result.message
    assert any("not Ready" in d for d in result.details)


async def test_an_unready_agent_without_a_verdict_says_so(fake_apiserver: FakeApiServer) -> None:
    port = await _agent_cluster(fake_apiserver, NRT)
    try:
        view = await gather(port, "ns", None)
        result = await check_agent(port, view, view.nodes[0])
    finally:
        await port.close()
    assert result.status is Status.FAIL and result.message == "agent pod agent-1 is phase Running, not Ready"
    assert any(CONDITION_TYPE in d for d in result.details)


async def test_memory_none_names_the_node_resource_policy(fake_apiserver: FakeApiServer) -> None:
    port = await _agent_cluster(fake_apiserver, _without_memory(NRT))
    try:
        view = await gather(port, "ns", None)
    finally:
        await port.close()
    assert set(view.policies) == {"w"}
    result = check_nrt(view, view.nodes[0])
    assert result.status is Status.FAIL
    assert "refuses every Guaranteed pod that requests memory" in result.message
    assert "NodeResourcePolicy w-policy: memoryManager.policy is 'None'" in result.details


async def test_node_components_are_read_from_the_node_namespace(fake_apiserver: FakeApiServer) -> None:
    """``--node-namespace``: the exporter and agent DaemonSets and pods live apart from the install namespace."""
    port = fake_apiserver.port_client()
    try:

        def daemon_set(namespace: str) -> dict[str, Any]:
            labels = {"app": namespace}
            return {
                "metadata": {"name": "numaplane-exporter-w", "namespace": namespace},
                "spec": {
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {"containers": [{"name": "exporter", "image": "numaplane"}]},
                    },
                },
            }

        for namespace in ("np", "np-node"):
            await port.create(DAEMON_SET, daemon_set(namespace))
            pod = copy.deepcopy(EXPORTER)
            pod["metadata"].update(name=f"pod-{namespace}", namespace=namespace)
            pod["spec"]["containers"] = [{"name": "exporter", "image": "numaplane"}]
            await port.create(POD, pod)
        view = await gather(port, "np", None, "np-node")
    finally:
        await port.close()
    assert view.node_namespace == "np-node"
    assert [d["metadata"]["namespace"] for d in view.daemon_sets.values()] == ["np-node"]
    assert {p["metadata"]["namespace"] for p in view.pods} == {"np", "np-node"}
    result = check_nrt(ClusterView("np", node_namespace="np-node"), {"metadata": {"name": "n1"}, "status": {}})
    assert result.status is Status.FAIL and any("kubectl -n np-node get pods" in d for d in result.details)
