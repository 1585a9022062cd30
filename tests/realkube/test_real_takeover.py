"""The agent's take-over refusal reaches a real kube-apiserver under the agent's rendered RBAC (issue 16 part 7).

``numaplane agent`` runs with the args of the DaemonSet ``numaplane render --from`` prints for an
agent-mode node group, the kubelet configuration flag pointed at a file with the static CPU and
Memory Managers on, and the bound token of its rendered ServiceAccount (never admin). It must refuse
(exit 1) and leave both the ``numaplane.io/TakeOver`` condition on its (stand-in) pod and a
``Warning`` Event about that pod — which only the rendered RBAC's ``events: create`` permits. The pod is
on a (kubelet-less) registered node, so its token names that node as the admission policies require
when they are installed (the Event must name the token's node, issue 25 item 13).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from node_helpers import CLI, REPO, render

from numaplane.agent.takeover import CONDITION_TYPE
from numaplane_harness.kubecluster import ControlPlane

pytestmark = pytest.mark.timeout(300)

CUSTOM_RESOURCES = """
apiVersion: numaplane.io/v1
kind: NUMAResourcesOperator
metadata: {name: numaresourcesoperator}
spec:
  nodeGroups:
  - name: takeover
    nodeSelector: {matchLabels: {numaplane.io/node-group: takeover}}
    enforcement: agent
"""
STATIC = {
    "apiVersion": "kubelet.config.k8s.io/v1beta1",
    "kind": "KubeletConfiguration",
    "cpuManagerPolicy": "static",
    "memoryManagerPolicy": "Static",
}
POD_NAME = "numaplane-agent-standin"
NODE = "takeover-n1"


def _apply(cp: ControlPlane, docs: list[dict[str, object]]) -> None:
    got = cp.kubectl(
        "apply", "--server-side", "--force-conflicts", "--field-manager=numaplane-test", "-f", "-",
        stdin=yaml.safe_dump_all(docs),
    )  # fmt: skip
    assert got.returncode == 0, got.stderr


def test_refusal_posts_an_event_under_the_agents_rbac(control_plane: ControlPlane, tmp_path: Path) -> None:
    cp = control_plane
    (tmp_path / "cr.yaml").write_text(CUSTOM_RESOURCES)
    docs = render("--from", str(tmp_path / "cr.yaml"))
    kinds = ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
    _apply(cp, sorted((d for d in docs if d["kind"] in kinds), key=lambda d: kinds.index(d["kind"])))
    # the agent's namespace: where its ServiceAccount is (the node namespace)
    namespace = next(
        d["metadata"]["namespace"]
        for d in docs
        if d["kind"] == "ServiceAccount" and d["metadata"]["name"] == "numaplane-agent"
    )
    cp.register_node(NODE, {"cpu": "4", "memory": "8Gi", "pods": "110"})
    try:
        _refuse_and_report(cp, tmp_path, docs, namespace)
    finally:
        cp.delete_node(NODE)


def _refuse_and_report(cp: ControlPlane, tmp_path: Path, docs: list[dict[str, Any]], namespace: str) -> None:
    [daemonset] = [d for d in docs if d["kind"] == "DaemonSet" and d["metadata"]["name"].startswith("numaplane-agent")]
    [container] = daemonset["spec"]["template"]["spec"]["containers"]
    mounted = {m["mountPath"]: m for m in container["volumeMounts"]}
    flag = next(a for a in container["args"] if a.startswith("--kubelet-config="))
    assert mounted[flag.partition("=")[2]]["readOnly"], "the kubelet configuration is mounted read-only"

    pod = cp.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/pods",
        {
            "metadata": {"name": POD_NAME},
            "spec": {
                "nodeName": NODE,
                "serviceAccountName": "numaplane-agent",
                "containers": [{"name": "agent", "image": "numaplane"}],
            },
        },
    )
    kubelet_config = tmp_path / "kubelet.yaml"
    kubelet_config.write_text(yaml.safe_dump(STATIC))
    # bound to its pod, as the kubelet mounts it (the install's admission policy, issue 25 item 13)
    kubeconfig = cp.service_account_kubeconfig(namespace, "numaplane-agent", pod=POD_NAME)
    args = [
        "agent",
        *(a for a in container["args"][1:] if a.startswith(("--watch-pods", "--log-"))),
        f"--kubelet-config={kubelet_config}",
        f"--state-dir={tmp_path / 'state'}",
        f"--kubeconfig={kubeconfig}",
        f"--pod-name={POD_NAME}",
        f"--pod-namespace={namespace}",
        f"--node-name={NODE}",
    ]
    assert "--watch-pods" in args
    done = subprocess.run([*CLI, *args], check=False, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "refusing to enforce" in done.stderr
    assert "takeover_condition_not_written" not in done.stdout + done.stderr

    written = cp.request("GET", f"/api/v1/namespaces/{namespace}/pods/{POD_NAME}")
    (condition,) = [c for c in written["status"]["conditions"] if c["type"] == CONDITION_TYPE]
    assert (condition["status"], condition["reason"]) == ("False", "KubeletStaticPolicy")
    events = cp.request("GET", f"/api/v1/namespaces/{namespace}/events")["items"]
    [event] = [e for e in events if e["involvedObject"].get("name") == POD_NAME]
    assert (event["type"], event["reason"]) == ("Warning", "KubeletStaticPolicy")
    assert event["involvedObject"]["uid"] == pod["metadata"]["uid"]
    assert "cpuManagerPolicy" in event["message"] and "memoryManagerPolicy" in event["message"]
    assert event["source"]["host"] == NODE and event["reportingInstance"] == NODE
    # on events the agent's ClusterRole grants only create (the Events on the pods of containers that
    # wait for CPUs, agent/waitreport.py): nothing that reads, changes or deletes another's events
    cluster_role = next(d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "numaplane-agent")
    event_rules = [rule for rule in cluster_role["rules"] if "events" in rule.get("resources", [])]
    assert [(r["apiGroups"], r["resources"], r["verbs"]) for r in event_rules] == [([""], ["events"], ["create"])]
