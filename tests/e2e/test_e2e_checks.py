"""The read-only checks on plain objects (no cluster): what each NRT inconsistency reports."""

from __future__ import annotations

import copy
from typing import Any

from numaplane.e2e.checks import check_daemon_sets, check_nrt, check_operator
from numaplane.e2e.report import Status
from numaplane.e2e.view import ClusterView
from numaplane.operator.api.numaresources import NUMAResourcesOperator

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
