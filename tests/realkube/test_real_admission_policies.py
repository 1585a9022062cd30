"""The node components' least privilege, enforced by the real kube-apiserver v1.36 (issue 25, item 13).

RBAC lets the exporter's ServiceAccount write every NodeResourceTopology, the agent's every pod status
of the node namespace and Events in every namespace; the rendered ValidatingAdmissionPolicies
(:mod:`numaplane.operator.admission`) narrow that to the node and the pod the token is bound to. Here the
install's RBAC and policies are applied to the private control plane, two kubelet-less Nodes ``a`` and
``b`` are registered, and pods of each ServiceAccount are placed on them (``spec.nodeName``, nothing
runs them) in the node namespace. Tokens come from the TokenRequest API bound to those pods, exactly as
the kubelet mounts them; the first test checks that the API server does put the pod and node into the
token's user extras (``ServiceAccountTokenPodNodeInfo``), since the policies stand on it.

The namespaces' Pod Security levels are proven here too (same control plane, same install): a privileged
pod is refused in the install namespace (``restricted``), while the rendered exporter and agent pods are
admitted in the node namespace and the operator's and scheduler's in the install namespace.
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
NODE_NS = "numaplane-vap-node"
USER_NS = "vap-user"
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
        "metadata": {"name": name, "namespace": NODE_NS},
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
    install = _render("--namespace", NS, "--node-namespace", NODE_NS)
    crd = [
        d for d in install if d["kind"] == "CustomResourceDefinition" and d["spec"]["group"] == "topology.node.k8s.io"
    ]
    _apply(cp, crd)
    waited = cp.kubectl("wait", "--for=condition=Established", f"crd/{crd[0]['metadata']['name']}", "--timeout=60s")
    assert waited.returncode == 0, waited.stderr
    stack = _render(
        "--namespace", NS, "--node-namespace", NODE_NS, "--from", str(REPO / "deploy/samples/"), "--no-install"
    )
    # the node components' RBAC, both namespaces, and every ServiceAccount (the pods below name them);
    # not the scheduler's or the operator's cluster bindings, which other modules' installs own
    rbac = [
        d
        for d in [*stack, *install]
        if d["kind"] in KINDS
        and (
            d["kind"] == "ServiceAccount"
            or d["metadata"]["labels"]["app.kubernetes.io/component"] in {"exporter", "agent", "namespace"}
        )
    ]
    policies = [d for d in install if d["kind"].startswith("ValidatingAdmissionPolicy")]
    assert len(policies) == 6
    user_ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": USER_NS}}
    _apply(cp, [user_ns, *rbac, *policies])
    for node in NODES:
        cp.register_node(node, {"cpu": "4", "memory": "8Gi", "pods": "110"})
        for sa in ("numaplane-exporter", "numaplane-agent"):
            name = f"{sa.removeprefix('numaplane-')}-{node}"
            try:
                cp.request("POST", f"/api/v1/namespaces/{NODE_NS}/pods", _pod(name, sa, node))
            except ApiStatus as exc:
                if exc.code != 409:
                    raise
    try:
        yield cp
    finally:
        for node in NODES:
            for kind in ("exporter", "agent"):
                with contextlib.suppress(ApiStatus):
                    cp.request("DELETE", f"/api/v1/namespaces/{NODE_NS}/pods/{kind}-{node}", {"gracePeriodSeconds": 0})
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
    token = cluster.service_account_token(NODE_NS, "numaplane-exporter", pod=f"exporter-{NODES[0]}")
    info = _whoami(cluster, token)
    pod = cluster.request("GET", f"/api/v1/namespaces/{NODE_NS}/pods/exporter-{NODES[0]}")
    assert info["username"] == f"system:serviceaccount:{NODE_NS}:numaplane-exporter"
    assert info["extra"][NODE_NAME_EXTRA] == [NODES[0]]
    assert info["extra"][POD_NAME_EXTRA] == [f"exporter-{NODES[0]}"]
    assert info["extra"][POD_UID_EXTRA] == [pod["metadata"]["uid"]]


def test_an_exporter_token_writes_its_own_nodes_nrt_only(cluster: ControlPlane) -> None:
    cp = cluster
    a, b = NODES
    token_a = cp.service_account_token(NODE_NS, "numaplane-exporter", pod=f"exporter-{a}")
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
    token_b = cp.service_account_token(NODE_NS, "numaplane-exporter", pod=f"exporter-{b}")
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
    unbound = cp.service_account_token(NODE_NS, "numaplane-exporter")
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
    token = cp.service_account_token(NODE_NS, "numaplane-agent", pod=f"agent-{a}")
    _policies_active(cp, cp.service_account_token(NODE_NS, "numaplane-exporter", pod=f"exporter-{a}"))
    condition = {
        "status": {
            "conditions": [
                {"type": "numaplane.io/PolicyApplied", "status": "True", "reason": "Applied", "message": "test"}
            ]
        }
    }
    patch = {"content_type": "application/strategic-merge-patch+json"}
    own = _as(cp, token, "PATCH", f"/api/v1/namespaces/{NODE_NS}/pods/agent-{a}/status", condition, **patch)
    assert any(c["type"] == "numaplane.io/PolicyApplied" for c in own["status"]["conditions"])
    # another agent's pod, and a pod of another ServiceAccount in the namespace: refused
    for other in (f"agent-{b}", f"exporter-{a}"):
        message = _refused(cp, token, "PATCH", f"/api/v1/namespaces/{NODE_NS}/pods/{other}/status", condition, **patch)
        assert f"numaplane-agent of pod agent-{a} may write only its own pod's status" in message, message
        got = cp.request("GET", f"/api/v1/namespaces/{NODE_NS}/pods/{other}")
        assert not any(c["type"] == "numaplane.io/PolicyApplied" for c in got["status"].get("conditions", []))
    # an unbound token of the agent's ServiceAccount: refused on its "own" pod too
    unbound = cp.service_account_token(NODE_NS, "numaplane-agent")
    message = _refused(cp, unbound, "PATCH", f"/api/v1/namespaces/{NODE_NS}/pods/agent-{a}/status", condition, **patch)
    assert "only with a token bound to its pod" in message, message


def _event(namespace: str, node: str, *, kind: str = "Pod", instance: str | None = None) -> dict[str, Any]:
    """A core/v1 Event as the agent's ``make_event`` writes it, about ``kind`` ``web`` of ``namespace``,
    reported from ``node`` (``source.host``; ``reportingInstance`` the same unless ``instance``)."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": "vap-", "namespace": namespace},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": kind,
            "name": "web",
            "namespace": namespace,
            "uid": "00000000-0000-0000-0000-000000000001",
        },
        "reason": "NumaplaneNotPinned",
        "message": json.dumps({"node": node}),
        "type": "Warning",
        "source": {"component": "numaplane-agent", "host": node},
        "reportingComponent": "numaplane-agent",
        "reportingInstance": node if instance is None else instance,
    }


def test_an_agent_token_creates_events_only_as_its_own_node(cluster: ControlPlane) -> None:
    """Issue 25 item 13, part 2: the agent's Events about pods of user namespaces are limited by the API
    server to the token's node, not only by RBAC (which allows create on events everywhere)."""
    cp = cluster
    a, b = NODES
    token = cp.service_account_token(NODE_NS, "numaplane-agent", pod=f"agent-{a}")
    _policies_active(cp, cp.service_account_token(NODE_NS, "numaplane-exporter", pod=f"exporter-{a}"))
    events = f"/api/v1/namespaces/{USER_NS}/events"
    # about a pod of a user namespace, naming its own node: created, as written
    created = _as(cp, token, "POST", events, _event(USER_NS, a))
    assert created["source"]["host"] == a and created["reportingInstance"] == a
    # its own pod in the node namespace (the take-over verdict), naming its node: created
    _as(cp, token, "POST", f"/api/v1/namespaces/{NODE_NS}/events", _event(NODE_NS, a))
    # naming node b: refused, naming both nodes
    message = _refused(cp, token, "POST", events, _event(USER_NS, b))
    assert f"numaplane-agent on node {a} may create Events only as that node" in message, message
    # source.host right but reportingInstance another node: refused
    _refused(cp, token, "POST", events, _event(USER_NS, a, instance=b))
    # about something else than a Pod: refused
    message = _refused(cp, token, "POST", events, _event(USER_NS, a, kind="ConfigMap"))
    assert "only about a v1 Pod" in message, message
    # a token of the agent's ServiceAccount bound to no pod carries no node: refused
    unbound = cp.service_account_token(NODE_NS, "numaplane-agent")
    message = _refused(cp, unbound, "POST", events, _event(USER_NS, a))
    assert "only with a token bound to a pod on a node" in message, message
    # nothing refused was written
    messages = [e["message"] for e in cp.request("GET", events)["items"] if e["reason"] == "NumaplaneNotPinned"]
    assert json.dumps({"node": b}) not in messages


def _pods_of(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """One Pod per rendered workload of ``kind``, as its controller would create it (on node a)."""
    out = []
    for d in docs:
        if d["kind"] == kind:
            template = d["spec"]["template"]
            meta = {"name": f"psa-{d['metadata']['name']}", "namespace": d["metadata"]["namespace"]}
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {**meta, "labels": template["metadata"]["labels"]},
                    "spec": {**template["spec"], "nodeName": NODES[0]},
                }
            )
    return out


def test_the_namespaces_enforce_their_pod_security_levels(cluster: ControlPlane) -> None:
    """Issue 25 item 13: a privileged pod is refused in the install namespace; the rendered node DaemonSets'
    pods are admitted in the node namespace, the operator's and scheduler's in the install namespace
    (server-side dry run: nothing is stored)."""
    cp = cluster
    privileged = _pod("psa-privileged", "numaplane-operator", NODES[0])
    privileged["metadata"]["namespace"] = NS
    privileged["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    with pytest.raises(ApiStatus) as caught:
        cp.request("POST", f"/api/v1/namespaces/{NS}/pods?dryRun=All", privileged)
    assert caught.value.code == 403, caught.value.body
    assert 'violates PodSecurity "restricted:latest"' in str(caught.value.body.get("message")), caught.value.body
    # the same pod is admitted in the node namespace (privileged there), as a dry run
    privileged["metadata"]["namespace"] = NODE_NS
    privileged["spec"]["serviceAccountName"] = "numaplane-agent"
    cp.request("POST", f"/api/v1/namespaces/{NODE_NS}/pods?dryRun=All", privileged)
    stack = _render(
        "--namespace", NS, "--node-namespace", NODE_NS, "--from", str(REPO / "deploy/samples/"), "--no-install"
    )
    install = _render("--namespace", NS, "--node-namespace", NODE_NS)
    node_pods = _pods_of(stack, "DaemonSet")
    install_pods = _pods_of([*stack, *install], "Deployment")
    assert {p["metadata"]["namespace"] for p in node_pods} == {NODE_NS} and len(node_pods) == 3
    assert {p["metadata"]["namespace"] for p in install_pods} == {NS} and len(install_pods) == 2
    for pod in [*node_pods, *install_pods]:
        where = pod["metadata"]["namespace"]
        answer = cp.request("POST", f"/api/v1/namespaces/{where}/pods?dryRun=All", pod)
        assert answer["metadata"]["name"] == pod["metadata"]["name"]
    # the node components' pods would be refused in the install namespace: why they live apart
    moved = {**node_pods[0], "metadata": {**node_pods[0]["metadata"], "namespace": NS}}
    with pytest.raises(ApiStatus) as caught:
        cp.request("POST", f"/api/v1/namespaces/{NS}/pods?dryRun=All", moved)
    assert caught.value.code == 403, caught.value.body
