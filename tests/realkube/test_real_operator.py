"""The operator on a real kube-apiserver, out of cluster, with exactly the RBAC ``numaplane render`` grants it.

The operator runs as a subprocess (the real CLI) authenticated by a bound token of its own
ServiceAccount — never as admin — so a verb missing from the rendered ClusterRole or Role fails here.
Nodes are registered without a kubelet; the real controller-manager's DaemonSet controller creates the
operands' pods and the real kube-scheduler binds them. The tests in this module run in order, as one
user flow: install, reconcile the samples, change the policy live, survive an API server restart,
leave a shared CRD to its other owner, delete.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from numaplane_harness.containerd import terminate_process
from numaplane_harness.kubecluster import ApiStatus, ControlPlane, free_port

pytestmark = pytest.mark.timeout(300)

REPO = Path(__file__).resolve().parents[2]
CLI = (sys.executable, "-c", "from numaplane.cli import main; main()")
NS = "numaplane-op-e2e"
NODE_NS = "numaplane-op-e2e-node"
IMAGE = "localhost/numaplane:e2e"
GROUPS = {"op-w1": "worker", "op-w2": "worker", "op-l1": "latency", "op-p1": None}
NRO = "/apis/numaplane.io/v1/numaresourcesoperators/numaresourcesoperator"
NRP = "/apis/numaplane.io/v1/noderesourcepolicies/latency"
NRS = "/apis/numaplane.io/v1/numaresourcesschedulers/numaresourcesscheduler"
DAEMON_SETS = f"/apis/apps/v1/namespaces/{NODE_NS}/daemonsets"
NRT_CRD = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/noderesourcetopologies.topology.node.k8s.io"


def _render(*args: str) -> list[dict[str, Any]]:
    out = subprocess.run([*CLI, "render", *args], capture_output=True, text=True, check=True, cwd=REPO).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def _apply_docs(cp: ControlPlane, docs: list[dict[str, Any]]) -> None:
    crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    rest = [d for d in docs if d["kind"] != "CustomResourceDefinition"]
    for part in (crds, rest):
        got = cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=yaml.safe_dump_all(part))
        assert got.returncode == 0, got.stderr
        for crd in crds if part is crds else []:
            cp.kubectl("wait", "--for=condition=Established", f"crd/{crd['metadata']['name']}", "--timeout=60s")


class OperatorProcess:
    """``numaplane operator`` as a subprocess with its metrics port; stderr kept in a file."""

    def __init__(self, cp: ControlPlane, kubeconfig: Path, log: Path) -> None:
        self.metrics_port = free_port()
        self.log = log
        with open(log, "ab") as out:
            self.process = subprocess.Popen(
                [
                    *CLI,
                    "operator",
                    "--kubeconfig",
                    str(kubeconfig),
                    "--namespace",
                    NS,
                    "--node-namespace",
                    NODE_NS,
                    "--image",
                    IMAGE,
                    "--metrics-address",
                    f"127.0.0.1:{self.metrics_port}",
                    "--health-address",
                    f"127.0.0.1:{free_port()}",
                ],
                stderr=out,
                stdout=out,
            )

    def metric(self, name: str, labels: str = "") -> float:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
        total = 0.0
        for line in text.splitlines():
            if line.split("{", 1)[0].split(" ", 1)[0] == name and labels in line:
                total += float(line.rsplit(" ", 1)[1])
        return total

    def lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines()


@pytest.fixture(scope="module")
def installed(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    cp = control_plane
    _apply_docs(cp, _render("--namespace", NS, "--node-namespace", NODE_NS, "--image", IMAGE))
    for name, group in GROUPS.items():
        cp.register_node(
            name,
            {"cpu": "8", "memory": "16Gi", "pods": "110"},
            labels={"numaplane.io/node-group": group} if group else {},
        )
    # the operator's own ServiceAccount, exactly as rendered: no admin anywhere below
    kubeconfig = cp.service_account_kubeconfig(NS, "numaplane-operator")
    operator = OperatorProcess(cp, kubeconfig, tmp_path_factory.mktemp("operator") / "operator.log")
    try:
        cp.wait_for("operator metrics", lambda: operator.metric("numaplane_operator_reconcile_total") >= 0, timeout=30)
        yield operator
    finally:
        terminate_process(operator.process)
        for path in (NRO, NRS, NRP):
            with contextlib.suppress(ApiStatus):
                cp.request("DELETE", path)
        for name in GROUPS:
            cp.delete_node(name)
        for namespace in (NS, NODE_NS):
            with contextlib.suppress(ApiStatus):
                cp.request("DELETE", f"/api/v1/namespaces/{namespace}")


_FORBIDDEN = re.compile(r"forbidden|\b403\b", re.IGNORECASE)


def _says_forbidden(line: str) -> bool:
    """True when a log line reports an authorization refusal.

    The operator logs JSON; only the message fields are searched, so a timestamp whose
    microseconds happen to contain "403" is not mistaken for an HTTP 403.
    """
    try:
        record = json.loads(line)
    except ValueError:
        return bool(_FORBIDDEN.search(line))
    if not isinstance(record, dict):
        return bool(_FORBIDDEN.search(line))
    text = " ".join(str(value) for key, value in record.items() if key != "timestamp")
    return bool(_FORBIDDEN.search(text))


def _condition(obj: dict[str, Any], kind: str) -> str | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond["type"] == kind:
            return str(cond["status"])
    return None


def _daemon_sets(cp: ControlPlane) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in cp.request("GET", DAEMON_SETS)["items"]}


def _configmap(cp: ControlPlane) -> dict[str, Any]:
    cm = cp.request("GET", f"/api/v1/namespaces/{NODE_NS}/configmaps/numaplane-policy-latency")
    return yaml.safe_load(next(iter(cm["data"].values())))


def test_operator_reconciles_the_samples_under_its_own_rbac(
    control_plane: ControlPlane, installed: OperatorProcess
) -> None:
    cp = control_plane
    started = time.monotonic()
    got = cp.kubectl("apply", "--server-side", "-k", str(REPO / "deploy" / "samples"))
    assert got.returncode == 0, got.stderr
    wanted = {"numaplane-exporter-worker": 2, "numaplane-exporter-latency": 1, "numaplane-agent-latency": 1}
    cp.wait_for(
        "DaemonSets with their nodes",
        lambda: {n: d.get("status", {}).get("desiredNumberScheduled") for n, d in _daemon_sets(cp).items()} == wanted,
        timeout=60,
    )
    print(f"DaemonSets rendered and selecting their nodes in {time.monotonic() - started:.1f} s")
    assert _condition(cp.request("GET", NRO), "Available") != "True"  # no operand is ready yet
    cp.wait_for(
        "scheduler Deployment",
        lambda: cp.request("GET", f"/apis/apps/v1/namespaces/{NS}/deployments/numaplane-scheduler"),
    )
    # the real kube-scheduler binds the DaemonSets' pods to exactly the group's nodes
    with cp.scheduler():

        def placed() -> dict[str, set[str]] | None:
            pods = cp.request("GET", f"/api/v1/namespaces/{NODE_NS}/pods")["items"]
            by_ds: dict[str, set[str]] = {}
            for pod in pods:
                owner = (pod["metadata"].get("ownerReferences") or [{}])[0]
                if owner.get("kind") == "DaemonSet":
                    if not pod["spec"].get("nodeName"):
                        return None
                    by_ds.setdefault(owner["name"], set()).add(pod["spec"]["nodeName"])
            return by_ds if sum(map(len, by_ds.values())) == 4 else None

        by_ds = cp.wait_for("DaemonSet pods bound", placed, timeout=60)
    print(f"operands bound by kube-scheduler at {time.monotonic() - started:.1f} s")
    assert by_ds == {
        "numaplane-exporter-worker": {"op-w1", "op-w2"},
        "numaplane-exporter-latency": {"op-l1"},
        "numaplane-agent-latency": {"op-l1"},
    }
    # the nodes have no kubelet: play its part, then the operator must report the stack Available
    for namespace in (NS, NODE_NS):
        for pod in cp.request("GET", f"/api/v1/namespaces/{namespace}/pods")["items"]:
            if pod["spec"].get("nodeName"):
                cp.mark_pod_running(namespace, pod["metadata"]["name"])
    cp.wait_for("Available", lambda: _condition(cp.request("GET", NRO), "Available") == "True", timeout=60)
    print(f"stack Available at {time.monotonic() - started:.1f} s")
    forbidden = [line for line in installed.lines() if _says_forbidden(line)]
    assert not forbidden, forbidden[:5]


def test_a_live_policy_change_reaches_the_nodes_configuration(
    control_plane: ControlPlane, installed: OperatorProcess
) -> None:
    cp = control_plane
    assert _configmap(cp)["cpuManager"]["reservedCPUs"] == "0-1"
    cp.request(
        "PATCH",
        NRP,
        {"spec": {"config": {"cpuManager": {"reservedCPUs": "0-3"}}}},
        content_type="application/merge-patch+json",
    )
    cp.wait_for(
        "new reservedCPUs in the ConfigMap", lambda: _configmap(cp)["cpuManager"]["reservedCPUs"] == "0-3", timeout=30
    )


NRT_PATH = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"


def _nrt(node: str, *, ours: bool) -> dict[str, Any]:
    """A minimal NRT of ``node`` as our exporter writes it (its managed-by label), or another writer's."""
    labels = {"app.kubernetes.io/managed-by": "numaplane-exporter"} if ours else {}
    return {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": node, "labels": labels},
        "topologyPolicies": ["None"],
        "zones": [
            {
                "name": "node-0",
                "type": "Node",
                "resources": [{"name": "cpu", "capacity": "8", "allocatable": "8", "available": "8"}],
            }
        ],
    }


def _nrt_names(cp: ControlPlane) -> set[str]:
    return {o["metadata"]["name"] for o in cp.request("GET", NRT_PATH)["items"]}


def test_the_nrt_of_a_node_that_left_every_node_group_is_deleted(
    control_plane: ControlPlane, installed: OperatorProcess
) -> None:
    """Issue 23 item 3 (RTE#203): a node relabelled out of every node group keeps no NRT of ours — the
    scheduler would trust it forever. Other writers' objects and the NRTs of nodes still in the stack stay."""
    cp = control_plane
    for node, ours in (("op-w1", True), ("op-w2", True), ("op-p1", False)):
        with contextlib.suppress(ApiStatus):
            cp.request("DELETE", f"{NRT_PATH}/{node}")
        cp.request("POST", NRT_PATH, _nrt(node, ours=ours))
    time.sleep(2)  # the operator saw them appear and collected nothing: op-w1/op-w2 are in a group
    assert {"op-w1", "op-w2", "op-p1"} <= _nrt_names(cp)
    left = time.monotonic()
    cp.request(
        "PATCH",
        "/api/v1/nodes/op-w2",
        {"metadata": {"labels": {"numaplane.io/node-group": None}}},
        content_type="application/merge-patch+json",
    )
    try:
        cp.wait_for("op-w2's NRT deleted", lambda: "op-w2" not in _nrt_names(cp), timeout=30)
        took = time.monotonic() - left
        assert {"op-w1", "op-p1"} <= _nrt_names(cp)  # in the stack / another writer's: left alone
        assert any(
            "deleted NodeResourceTopology op-w2: no node group selects its node any more" in line
            for line in installed.lines()
        )
        assert installed.metric("numaplane_operator_nrt_garbage_collected_total") >= 1
    finally:
        cp.request(
            "PATCH",
            "/api/v1/nodes/op-w2",
            {"metadata": {"labels": {"numaplane.io/node-group": "worker"}}},
            content_type="application/merge-patch+json",
        )
        for node in ("op-w1", "op-w2", "op-p1"):
            with contextlib.suppress(ApiStatus):
                cp.request("DELETE", f"{NRT_PATH}/{node}")
    print(f"\nnode relabelled out of every group → its NRT deleted by the operator: {took:.2f} s")


def test_node_events_do_not_reconcile_the_whole_stack(control_plane: ControlPlane, installed: OperatorProcess) -> None:
    cp = control_plane
    cp.wait_for("quiet", lambda: _quiet(installed), timeout=30)
    before = installed.metric("numaplane_operator_reconcile_total", 'controller="operator"')
    # what kubelets do all day: heartbeats in the Node status (the DaemonSet controller ignores them,
    # so nothing else the operator watches changes)
    for round_ in range(5):
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + round_))
        for name in GROUPS:
            ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": now}
            cp.request(
                "PATCH",
                f"/api/v1/nodes/{name}/status",
                {"status": {"conditions": [ready]}},
                content_type="application/strategic-merge-patch+json",
            )
        time.sleep(0.2)
    time.sleep(2)  # an event-driven reconcile would have run by now
    # 20 Node events: before the fix each one queued a full reconcile (~30 GETs); one reconcile is
    # tolerated for a late DaemonSet status update of the first test's pods
    assert installed.metric("numaplane_operator_reconcile_total", 'controller="operator"') <= before + 1


def _quiet(operator: OperatorProcess) -> bool:
    first = operator.metric("numaplane_operator_reconcile_total")
    time.sleep(1.5)
    return operator.metric("numaplane_operator_reconcile_total") == first


def test_idle_operator_logs_decisions_not_http_requests(installed: OperatorProcess) -> None:
    lines = installed.lines()
    assert not [line for line in lines if "HTTP Request" in line], "HTTP client requests logged at info"
    assert any("applied DaemonSet" in line for line in lines), "no decision logged"


def test_an_api_server_restart_loses_no_update_and_duplicates_nothing(
    control_plane: ControlPlane, installed: OperatorProcess
) -> None:
    cp = control_plane
    before = {n: d["metadata"]["uid"] for n, d in _daemon_sets(cp).items()}
    started = time.monotonic()
    cp.restart_apiserver(down_seconds=3)
    print(f"API server down and back in {time.monotonic() - started:.1f} s")
    cp.request(
        "PATCH",
        NRP,
        {"spec": {"config": {"cpuManager": {"reservedCPUs": "0-2"}}}},
        content_type="application/merge-patch+json",
    )
    cp.wait_for("update after the restart", lambda: _configmap(cp)["cpuManager"]["reservedCPUs"] == "0-2", timeout=60)
    assert installed.process.poll() is None
    after = {n: d["metadata"]["uid"] for n, d in _daemon_sets(cp).items()}
    assert after == before  # the same objects: nothing recreated, nothing duplicated


def test_the_shared_nrt_crd_is_left_to_another_owner(control_plane: ControlPlane, installed: OperatorProcess) -> None:
    cp = control_plane
    crd = cp.request("GET", NRT_CRD)
    crd["metadata"] = {"name": crd["metadata"]["name"], "labels": {"owner": "another-tool"}}
    crd.pop("status", None)
    got = cp.kubectl(
        "apply", "--server-side", "--force-conflicts", "--field-manager=another-tool", "-f", "-", stdin=json.dumps(crd)
    )
    assert got.returncode == 0, got.stderr
    version = cp.request("GET", NRT_CRD)["metadata"]["resourceVersion"]
    cp.request(
        "PATCH",
        NRO,
        {"metadata": {"annotations": {"touch": str(time.time())}}},
        content_type="application/merge-patch+json",
    )
    cp.wait_for("quiet", lambda: _quiet(installed), timeout=30)
    assert cp.request("GET", NRT_CRD)["metadata"]["resourceVersion"] == version


def test_every_owned_object_comes_back_after_deletion_or_drift(
    control_plane: ControlPlane, installed: OperatorProcess
) -> None:
    """Issue 25 item 15: before, Services (and every kind but DaemonSets and Deployments) were not
    watched, so a deleted ``numaplane-scheduler-metrics`` stayed gone. Now each comes back in seconds."""
    cp = control_plane
    # (the API server restart of an earlier test may leave a transient 403 of its RBAC cache in the log)
    logged_before = len(installed.lines())
    paths = {
        "Service numaplane-scheduler-metrics": f"/api/v1/namespaces/{NS}/services/numaplane-scheduler-metrics",
        "NetworkPolicy numaplane-scheduler": f"/apis/networking.k8s.io/v1/namespaces/{NS}/networkpolicies/numaplane-scheduler",
        "Role numaplane-scheduler": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/roles/numaplane-scheduler",
        "ServiceAccount numaplane-exporter": f"/api/v1/namespaces/{NODE_NS}/serviceaccounts/numaplane-exporter",
        "ClusterRoleBinding numaplane-agent": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/numaplane-agent",
        "ConfigMap numaplane-policy-latency": f"/api/v1/namespaces/{NODE_NS}/configmaps/numaplane-policy-latency",
    }
    seconds: dict[str, float] = {}
    for what, path in paths.items():
        uid = cp.request("GET", path)["metadata"]["uid"]
        cp.request("DELETE", path)
        began = time.monotonic()

        def recreated(path: str = path, uid: str = uid) -> bool:
            try:
                return bool(cp.request("GET", path)["metadata"]["uid"] != uid)
            except ApiStatus:
                return False

        cp.wait_for(f"{what} recreated", recreated, timeout=10)
        seconds[what] = time.monotonic() - began
    # drift: fields the operator owns edited by hand (the metrics Service's target port, the
    # NetworkPolicy's ingress rule opened to every source); a field another manager adds (a second
    # port) stays theirs under server-side apply, so only owned fields are edited here
    service = paths["Service numaplane-scheduler-metrics"]
    [owned_port] = cp.request("GET", service)["spec"]["ports"]
    cp.request(
        "PATCH",
        service,
        {"spec": {"ports": [{"port": owned_port["port"], "targetPort": 9999}]}},
        content_type="application/strategic-merge-patch+json",
    )
    policy = paths["NetworkPolicy numaplane-scheduler"]
    ingress = cp.request("GET", policy)["spec"]["ingress"]
    cp.request("PATCH", policy, {"spec": {"ingress": [{}]}}, content_type="application/merge-patch+json")
    assert cp.request("GET", policy)["spec"]["ingress"] != ingress
    began = time.monotonic()

    def undone() -> bool:
        return bool(
            cp.request("GET", service)["spec"]["ports"] == [owned_port]
            and cp.request("GET", policy)["spec"]["ingress"] == ingress
        )

    try:
        cp.wait_for("drift undone", undone, timeout=10)
    except TimeoutError:
        ports, now = cp.request("GET", service)["spec"]["ports"], cp.request("GET", policy)["spec"]["ingress"]
        raise AssertionError(f"ports {ports} (want [{owned_port}]), ingress {now} (want {ingress})") from None
    seconds["drift (Service port, NetworkPolicy ingress)"] = time.monotonic() - began
    print("back after deletion or drift in (s):", {k: round(v, 1) for k, v in seconds.items()})
    assert max(seconds.values()) < 10
    # recreating them needed no right the rendered RBAC lacks
    forbidden = [line for line in installed.lines()[logged_before:] if _says_forbidden(line)]
    assert not forbidden, forbidden[:5]


def test_deleting_the_custom_resources_cleans_up(control_plane: ControlPlane, installed: OperatorProcess) -> None:
    cp = control_plane
    cp.request("DELETE", NRO)
    cp.wait_for("DaemonSets deleted", lambda: not _daemon_sets(cp), timeout=60)
    cp.request("DELETE", NRS)
    cp.wait_gone("scheduler Deployment deleted", f"/apis/apps/v1/namespaces/{NS}/deployments/numaplane-scheduler")
    assert cp.request("GET", NRT_CRD)  # shared: stays
