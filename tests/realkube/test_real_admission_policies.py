"""The node components' least privilege, enforced by the real kube-apiserver v1.36 (issue 25, item 13).

RBAC lets the exporter's ServiceAccount write every NodeResourceTopology and the agent's every pod
status of the install namespace; the rendered ValidatingAdmissionPolicies
(:mod:`numaplane.operator.admission`) narrow that to the node and the pod the token is bound to. Here the
install's RBAC and policies are applied to the private control plane, two kubelet-less Nodes ``a`` and
``b`` are registered, and pods of each ServiceAccount are placed on them (``spec.nodeName``, nothing
runs them). Tokens come from the TokenRequest API bound to those pods, exactly as the kubelet mounts
them; the first test checks that the API server does put the pod and node into the token's user
extras (``ServiceAccountTokenPodNodeInfo``), since the policies stand on it.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from numaplane.operator.admission import NODE_NAME_EXTRA, POD_NAME_EXTRA, POD_UID_EXTRA
from numaplane_harness.kubecluster import ApiStatus, ControlPlane

pytestmark = pytest.mark.timeout(240)

REPO = Path(__file__).resolve().parents[2]
CLI = (sys.executable, "-c", "from numaplane.cli import main; main()")
NS = "numaplane-vap"
NODES = ("vap-node-a", "vap-node-b")
NRT_PATH = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"
KINDS = {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}


def _render(*args: str) -> list[dict[str, Any]]:
    out = subprocess.run([*CLI, "render", *args], capture_output=True, text=True, check=True, cwd=REPO).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def _apply(cp: ControlPlane, docs: list[dict[str, Any]]) -> None:
    got = cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=yaml.safe_dump_all(docs))
    assert got.returncode == 0, got.stderr


def _pod(name: str, service_account: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "nodeName": node,
            "serviceAccountName": service_account,
            "containers": [{"name": "main", "image": "localhost/busybox:1.35"}],
        },
    }


def _nrt(node: str) -> dict[str, Any]:
    return {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": node},
        "topologyPolicies": ["None"],
        "zones": [],
    }


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    cp = control_plane
    install = _render("--namespace", NS)
    crd = [
        d for d in install if d["kind"] == "CustomResourceDefinition" and d["spec"]["group"] == "topology.node.k8s.io"
    ]
    _apply(cp, crd)
    waited = cp.kubectl("wait", "--for=condition=Established", f"crd/{crd[0]['metadata']['name']}", "--timeout=60s")
    assert waited.returncode == 0, waited.stderr
    stack = _render(
        "--namespace", NS, "--from", str(REPO / "deploy/samples/numaresourcesoperator.yaml"), "--no-install"
    )
    rbac = [
        d
        for d in stack
        if d["kind"] in KINDS
        and d["metadata"]["labels"]["app.kubernetes.io/component"] in {"exporter", "agent", "namespace"}
    ]
    policies = [d for d in install if d["kind"].startswith("ValidatingAdmissionPolicy")]
    assert len(policies) == 4
    _apply(cp, [d for d in install if d["kind"] == "Namespace"] + rbac + policies)
    for node in NODES:
        cp.register_node(node, {"cpu": "4", "memory": "8Gi", "pods": "110"})
        for sa in ("numaplane-exporter", "numaplane-agent"):
            name = f"{sa.removeprefix('numaplane-')}-{node}"
            try:
                cp.request("POST", f"/api/v1/namespaces/{NS}/pods", _pod(name, sa, node))
            except ApiStatus as exc:
                if exc.code != 409:
                    raise
    try:
        yield cp
    finally:
        for node in NODES:
            for kind in ("exporter", "agent"):
                with contextlib.suppress(ApiStatus):
                    cp.request("DELETE", f"/api/v1/namespaces/{NS}/pods/{kind}-{node}", {"gracePeriodSeconds": 0})
            with contextlib.suppress(ApiStatus):
                cp.request("DELETE", f"{NRT_PATH}/{node}")
            cp.delete_node(node)


def _as(cp: ControlPlane, token: str, method: str, path: str, body: Any = None, **kw: Any) -> dict[str, Any]:
    return cp.request(method, path, body, token=token, **kw)


def _refused(cp: ControlPlane, token: str, method: str, path: str, body: Any = None, **kw: Any) -> str:
    """The API server's message refusing the request (fails when it is allowed)."""
    with pytest.raises(ApiStatus) as caught:
        _as(cp, token, method, path, body, **kw)
    assert caught.value.code == 403, caught.value.body
    return str(caught.value.body.get("message", ""))


def _whoami(cp: ControlPlane, token: str) -> dict[str, Any]:
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    answer = _as(cp, token, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", review)
    info: dict[str, Any] = answer["status"]["userInfo"]
    return info


def _policies_active(cp: ControlPlane, token: str) -> None:
    """Wait until the API server's admission has loaded the policies (a moment after their creation)."""

    def refused_once() -> bool:
        try:
            _as(cp, token, "POST", NRT_PATH, _nrt("vap-probe-node"))
        except ApiStatus as exc:
            return exc.code == 403
        cp.request("DELETE", f"{NRT_PATH}/vap-probe-node")
        return False

    cp.wait_for("the admission policies to be active", refused_once, timeout=60, interval=0.5)


def test_pod_bound_tokens_carry_the_pod_and_node(cluster: ControlPlane) -> None:
    token = cluster.service_account_token(NS, "numaplane-exporter", pod=f"exporter-{NODES[0]}")
    info = _whoami(cluster, token)
    pod = cluster.request("GET", f"/api/v1/namespaces/{NS}/pods/exporter-{NODES[0]}")
    assert info["username"] == f"system:serviceaccount:{NS}:numaplane-exporter"
    assert info["extra"][NODE_NAME_EXTRA] == [NODES[0]]
    assert info["extra"][POD_NAME_EXTRA] == [f"exporter-{NODES[0]}"]
    assert info["extra"][POD_UID_EXTRA] == [pod["metadata"]["uid"]]


def test_an_exporter_token_writes_its_own_nodes_nrt_only(cluster: ControlPlane) -> None:
    cp = cluster
    a, b = NODES
    token_a = cp.service_account_token(NS, "numaplane-exporter", pod=f"exporter-{a}")
    _policies_active(cp, token_a)
    for node in NODES:
        with contextlib.suppress(ApiStatus):
            cp.request("DELETE", f"{NRT_PATH}/{node}")
    # its own node: create, update (replace) and merge patch pass
    created = _as(cp, token_a, "POST", NRT_PATH, _nrt(a))
    _as(cp, token_a, "PUT", f"{NRT_PATH}/{a}", {**created, "topologyPolicies": ["SingleNUMANodeContainerLevel"]})
    _as(
        cp,
        token_a,
        "PATCH",
        f"{NRT_PATH}/{a}",
        {"attributes": [{"name": "topologyManagerPolicy", "value": "single-numa-node"}]},
        content_type="application/merge-patch+json",
    )
    # node b's: create refused, naming both nodes ...
    message = _refused(cp, token_a, "POST", NRT_PATH, _nrt(b))
    assert f"numaplane-exporter on node {a} may not write the NodeResourceTopology of {b}" in message, message
    # ... and once node b's exporter has published it, every write to it from node a is refused
    token_b = cp.service_account_token(NS, "numaplane-exporter", pod=f"exporter-{b}")
    theirs = _as(cp, token_b, "POST", NRT_PATH, _nrt(b))
    _refused(cp, token_a, "PUT", f"{NRT_PATH}/{b}", {**theirs, "zones": []})
    _refused(
        cp,
        token_a,
        "PATCH",
        f"{NRT_PATH}/{b}",
        {"topologyPolicies": ["None"]},
        content_type="application/merge-patch+json",
    )
    assert cp.request("GET", f"{NRT_PATH}/{b}")["metadata"]["resourceVersion"] == theirs["metadata"]["resourceVersion"]
    # a token of the same ServiceAccount bound to no pod carries no node: refused even for node a
    unbound = cp.service_account_token(NS, "numaplane-exporter")
    message = _refused(
        cp,
        unbound,
        "PATCH",
        f"{NRT_PATH}/{a}",
        {"topologyPolicies": ["None"]},
        content_type="application/merge-patch+json",
    )
    assert "only with a token bound to a pod" in message, message
    # reading is untouched
    assert {n["metadata"]["name"] for n in _as(cp, token_a, "GET", NRT_PATH)["items"]} >= {a, b}


def test_an_agent_token_writes_its_own_pods_status_only(cluster: ControlPlane) -> None:
    cp = cluster
    a, b = NODES
    token = cp.service_account_token(NS, "numaplane-agent", pod=f"agent-{a}")
    _policies_active(cp, cp.service_account_token(NS, "numaplane-exporter", pod=f"exporter-{a}"))
    condition = {
        "status": {
            "conditions": [
                {"type": "numaplane.io/PolicyApplied", "status": "True", "reason": "Applied", "message": "test"}
            ]
        }
    }
    patch = {"content_type": "application/strategic-merge-patch+json"}
    own = _as(cp, token, "PATCH", f"/api/v1/namespaces/{NS}/pods/agent-{a}/status", condition, **patch)
    assert any(c["type"] == "numaplane.io/PolicyApplied" for c in own["status"]["conditions"])
    # another agent's pod, and a pod of another ServiceAccount in the namespace: refused
    for other in (f"agent-{b}", f"exporter-{a}"):
        message = _refused(cp, token, "PATCH", f"/api/v1/namespaces/{NS}/pods/{other}/status", condition, **patch)
        assert f"numaplane-agent of pod agent-{a} may write only its own pod's status" in message, message
        got = cp.request("GET", f"/api/v1/namespaces/{NS}/pods/{other}")
        assert not any(c["type"] == "numaplane.io/PolicyApplied" for c in got["status"].get("conditions", []))
    # Events: about its own pod yes, about another pod no
    pod_a = cp.request("GET", f"/api/v1/namespaces/{NS}/pods/agent-{a}")
    pod_b = cp.request("GET", f"/api/v1/namespaces/{NS}/pods/agent-{b}")

    def event(pod: dict[str, Any]) -> dict[str, Any]:
        meta = pod["metadata"]
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": "vap-", "namespace": NS},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": meta["name"],
                "namespace": NS,
                "uid": meta["uid"],
            },
            "reason": "Test",
            "message": json.dumps({"pod": meta["name"]}),
            "type": "Normal",
        }

    _as(cp, token, "POST", f"/api/v1/namespaces/{NS}/events", event(pod_a))
    _refused(cp, token, "POST", f"/api/v1/namespaces/{NS}/events", event(pod_b))
    # an unbound token of the agent's ServiceAccount: refused on its "own" pod too
    unbound = cp.service_account_token(NS, "numaplane-agent")
    message = _refused(cp, unbound, "PATCH", f"/api/v1/namespaces/{NS}/pods/agent-{a}/status", condition, **patch)
    assert "only with a token bound to its pod" in message, message
