"""``numaplane e2e`` against the real control plane: passes on a healthy stack, fails clearly when a part breaks.

The stack: ``numaplane render`` installed for real (CRDs, RBAC, the operator Deployment), the operator
running out of cluster under its own ServiceAccount, a ``NUMAResourcesOperator`` with a kubelet-mode
and an agent-mode node group, a ``NUMAResourcesScheduler``, two Nodes registered without a kubelet,
and per node a real ``numaplane exporter`` (out of cluster, its own ServiceAccount, a synthetic
machine and ``fake://`` PodResources answers) publishing the NRT. The nodes have no kubelet, so the
test plays its part for the operands' pods (Running and Ready, or not Ready once their process is
gone: what the kubelet reports when the readiness probe fails). The agent itself is not run here
(it needs a real node: see test_real_node_agent.py), so the agent check can only warn that no policy
revision was reported and that the kubelet's configuration is unreadable.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from numaplane_harness.containerd import terminate_process
from numaplane_harness.kubecluster import ApiStatus, ControlPlane, free_port

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "exporter"))
from exp_helpers import build_sysfs

pytestmark = pytest.mark.timeout(300)

REPO = Path(__file__).resolve().parents[2]
CLI = (sys.executable, "-c", "from numaplane.cli import main; main()")
NS = "numaplane-e2e-cmd"
NODE_NS = "numaplane-e2e-cmd-node"
IMAGE = "localhost/numaplane:e2e"
NODES = {"e2e-k1": "e2e-kubelet", "e2e-a1": "e2e-agent"}
NRO = "/apis/numaplane.io/v1/numaresourcesoperators/numaresourcesoperator"
NRS = "/apis/numaplane.io/v1/numaresourcesschedulers/numaresourcesscheduler"
NRP = "/apis/numaplane.io/v1/noderesourcepolicies/e2e-agent"
NRP_CRD = "noderesourcepolicies.numaplane.io"
GI = 1 << 30


def _render(*args: str) -> list[dict[str, Any]]:
    out = subprocess.run([*CLI, "render", *args], capture_output=True, text=True, check=True, cwd=REPO).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def _apply(cp: ControlPlane, docs: list[dict[str, Any]]) -> None:
    crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    rest = [d for d in docs if d["kind"] != "CustomResourceDefinition"]
    for part in (crds, rest):
        if not part:
            continue
        got = cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=yaml.safe_dump_all(part))
        assert got.returncode == 0, got.stderr
    for crd in crds:
        cp.kubectl("wait", "--for=condition=Established", f"crd/{crd['metadata']['name']}", "--timeout=60s")


def _custom_resources() -> list[dict[str, Any]]:
    group = {"numaplane.io/node-group": ""}
    return [
        {
            "apiVersion": "numaplane.io/v1",
            "kind": "NUMAResourcesOperator",
            "metadata": {"name": "numaresourcesoperator"},
            "spec": {
                "nodeGroups": [
                    {
                        "name": name,
                        "nodeSelector": {"matchLabels": {**group, "numaplane.io/node-group": name}},
                        "enforcement": "agent" if name == "e2e-agent" else "kubelet",
                        "config": {"infoRefreshMode": "Periodic", "infoRefreshPeriod": "1s"},
                    }
                    for name in ("e2e-kubelet", "e2e-agent")
                ]
            },
        },
        {
            "apiVersion": "numaplane.io/v1",
            "kind": "NUMAResourcesScheduler",
            "metadata": {"name": "numaresourcesscheduler"},
            "spec": {"schedulerName": "numaplane-scheduler", "mode": "standalone"},
        },
        {
            "apiVersion": "numaplane.io/v1",
            "kind": "NodeResourcePolicy",
            "metadata": {"name": "e2e-agent"},
            "spec": {
                "nodeGroup": "e2e-agent",
                "config": {
                    "topologyManager": {"policy": "single-numa-node"},
                    "cpuManager": {"policy": "static", "reservedCPUs": "0,4"},
                },
            },
        },
    ]


class Exporter:
    """``numaplane exporter`` for one kubelet-less node, under the exporter's ServiceAccount."""

    def __init__(self, cp: ControlPlane, node: str, work: Path) -> None:
        self.cp, self.node, self.work = cp, node, work
        fake = work / "podres"
        fake.mkdir(parents=True)
        memory = [{"memory_type": "memory", "size": 8 * GI, "topology": {"nodes": [{"ID": n}]}} for n in (0, 1)]
        (fake / "get_allocatable_resources.json").write_text(
            json.dumps({"cpu_ids": [1, 2, 3, 5, 6, 7], "memory": memory})
        )
        (fake / "list.json").write_text(json.dumps({"pod_resources": []}))
        self.sysfs = build_sysfs(work / "host")
        self.kubelet = work / "kubelet.yaml"
        self.kubelet.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "kubelet.config.k8s.io/v1beta1",
                    "kind": "KubeletConfiguration",
                    "topologyManagerPolicy": "single-numa-node",
                    "topologyManagerScope": "container",
                    "reservedSystemCPUs": "0,4",
                }
            )
        )
        self.fake = fake
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        # bound to a pod on its node, as a kubelet-mounted token is (the install's admission policy)
        kubeconfig = self.cp.node_bound_kubeconfig(NODE_NS, "numaplane-exporter", self.node)
        with open(self.work / "exporter.log", "ab") as out:
            self.process = subprocess.Popen(
                [
                    *CLI,
                    "exporter",
                    "--node-name",
                    self.node,
                    "--podresources-socket",
                    f"fake://{self.fake}",
                    "--sysfs-root",
                    str(self.sysfs),
                    "--kubelet-config",
                    str(self.kubelet),
                    "--period",
                    "1",
                    "--kubeconfig",
                    str(kubeconfig),
                    "--metrics-address",
                    f"127.0.0.1:{free_port()}",
                    "--health-address",
                    f"127.0.0.1:{free_port()}",
                ],
                stdout=out,
                stderr=out,
            )

    def stop(self) -> None:
        if self.process is not None:
            terminate_process(self.process)
            self.process = None


def _pods(cp: ControlPlane) -> list[dict[str, Any]]:
    """The pods of both namespaces (operator and scheduler; exporters and agents)."""
    return [p for ns in (NS, NODE_NS) for p in cp.request("GET", f"/api/v1/namespaces/{ns}/pods")["items"]]


def _set_ready(cp: ControlPlane, pod: str, ready: bool) -> None:
    """What the kubelet reports when the readiness probe of node pod ``pod`` starts failing (or passes again)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    body = cp.request("GET", f"/api/v1/namespaces/{NODE_NS}/pods/{pod}")
    status = body["status"]
    value = "True" if ready else "False"
    for cond in status["conditions"]:
        if cond["type"] in ("Ready", "ContainersReady"):
            cond.update(status=value, lastTransitionTime=now)
    for container in status.get("containerStatuses") or []:
        container["ready"] = ready
    cp.request("PUT", f"/api/v1/namespaces/{NODE_NS}/pods/{pod}/status", body)


def _condition(obj: dict[str, Any], kind: str) -> str | None:
    return next((c["status"] for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), None)


@pytest.fixture(scope="module")
def stack(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Exporter]]:
    cp = control_plane
    work = tmp_path_factory.mktemp("e2e-cmd")
    started = time.monotonic()
    _apply(cp, _render("--namespace", NS, "--node-namespace", NODE_NS, "--image", IMAGE))
    for name, group in NODES.items():
        cp.register_node(
            name,
            {"cpu": "8", "memory": "16Gi", "pods": "110"},
            allocatable={"cpu": "6", "memory": "15Gi", "pods": "110"},
            labels={"numaplane.io/node-group": group},
        )
    log = work / "operator.log"
    with open(log, "ab") as out:
        operator = subprocess.Popen(
            [
                *CLI,
                "operator",
                "--kubeconfig",
                str(cp.service_account_kubeconfig(NS, "numaplane-operator")),
                "--namespace",
                NS,
                "--node-namespace",
                NODE_NS,
                "--image",
                IMAGE,
                "--metrics-address",
                f"127.0.0.1:{free_port()}",
                "--health-address",
                f"127.0.0.1:{free_port()}",
            ],
            stdout=out,
            stderr=out,
        )
    exporters: dict[str, Exporter] = {}
    try:
        _apply(cp, _custom_resources())
        with cp.scheduler():

            def all_running() -> bool:
                pods = _pods(cp)
                for pod in pods:
                    if pod["spec"].get("nodeName") and pod["status"].get("phase") != "Running":
                        cp.mark_pod_running(pod["metadata"]["namespace"], pod["metadata"]["name"])
                # operator, scheduler, 2 exporters, 1 agent
                return len([p for p in pods if p["spec"].get("nodeName")]) == 5

            cp.wait_for("every operand pod bound and running", all_running, timeout=90, interval=0.5)
            for name in NODES:
                exporters[name] = Exporter(cp, name, work / name)
            for name in NODES:
                cp.wait_for(
                    f"NRT of {name}",
                    lambda n=name: cp.request("GET", f"/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies/{n}"),
                    timeout=60,
                )
            cp.wait_for("NRO Available", lambda: _condition(cp.request("GET", NRO), "Available") == "True", timeout=60)
            cp.wait_for("NRS Available", lambda: _condition(cp.request("GET", NRS), "Available") == "True", timeout=60)
            print(f"\nfixture stack Ready in {time.monotonic() - started:.1f} s")
            yield exporters
    finally:
        for exporter in exporters.values():
            exporter.stop()
        for path in (NRO, NRS, NRP):
            with contextlib.suppress(ApiStatus):
                cp.request("DELETE", path)
        terminate_process(operator)
        for name in NODES:
            with contextlib.suppress(ApiStatus):
                cp.request("DELETE", f"/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies/{name}")
            cp.delete_node(name)
        # the rest of the install too (ClusterRoles are cluster-wide; other modules apply their own), not the CRDs
        rest = [
            d
            for d in _render("--namespace", NS, "--node-namespace", NODE_NS, "--image", IMAGE)
            if d["kind"] != "CustomResourceDefinition"
        ]
        cp.kubectl("delete", "--ignore-not-found", "--wait=false", "-f", "-", stdin=yaml.safe_dump_all(rest))


def _e2e(cp: ControlPlane, *args: str) -> tuple[int, str, str, float]:
    started = time.monotonic()
    got = subprocess.run(
        [*CLI, "e2e", "--kubeconfig", str(cp.admin_kubeconfig), "--namespace", NS, "--node-namespace", NODE_NS, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return got.returncode, got.stdout, got.stderr, time.monotonic() - started


def _results(stdout: str) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in json.loads(stdout)["results"]}


def test_e2e_passes_on_a_healthy_stack(control_plane: ControlPlane, stack: dict[str, Exporter], tmp_path: Path) -> None:
    junit = tmp_path / "e2e.xml"
    rc, out, err, seconds = _e2e(control_plane, "-o", "json", "--junit-file", str(junit))
    print(f"numaplane e2e (read-only) ran in {seconds:.1f} s")
    assert rc == 0, out + err
    results = _results(out)
    assert {"crds", "operator", "daemonsets", "nrt/e2e-k1", "nrt/e2e-a1", "scheduler", "agent/e2e-a1"} <= set(results)
    failed = {n: r["message"] for n, r in results.items() if r["status"] == "fail"}
    assert not failed
    for name in ("crds", "operator", "daemonsets", "nrt/e2e-k1", "nrt/e2e-a1", "scheduler"):
        assert results[name]["status"] == "pass", results[name]
    assert "8 CPUs" in results["nrt/e2e-k1"]["message"]
    # no agent runs here: warned, not failed (see the module docstring)
    assert results["agent/e2e-a1"]["status"] == "warn"
    assert "configz" in json.dumps(results["agent/e2e-a1"])
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "0"
    assert len(suite.findall("testcase")) == len(results)
    table = _e2e(control_plane)[1]
    print(table)
    assert table.rstrip().splitlines()[-1].startswith("PASSED")


def test_serial_checks_fail_clearly_and_clean_up(control_plane: ControlPlane, stack: dict[str, Exporter]) -> None:
    """Without a kubelet nothing can run: every disruptive step must fail with its reason, and leave nothing."""
    cp = control_plane
    policy_before = cp.request("GET", NRP)["spec"]
    rc, out, err, seconds = _e2e(cp, "--serial", "--timeout", "4", "-o", "json")
    print(f"numaplane e2e --serial (failing) ran in {seconds:.1f} s")
    assert rc == 1, out + err
    results = _results(out)
    canary = results["canary/e2e-k1"]
    assert canary["status"] == "fail" and "canary Running: not within 4 s" in canary["message"]
    assert "Pending" in canary["message"]
    assert results["agent-restart/e2e-a1"]["status"] == "fail"
    assert "new agent pod Ready" in results["agent-restart/e2e-a1"]["message"]
    assert results["policy-change/e2e-agent"]["status"] == "fail"
    assert json.loads(out)["cleanupProblems"] == []
    # the policy is restored and the run's namespace is gone
    assert cp.request("GET", NRP)["spec"] == policy_before
    namespaces = cp.request("GET", "/api/v1/namespaces")["items"]
    left = [
        n["metadata"]["name"]
        for n in namespaces
        if (n["metadata"].get("labels") or {}).get("numaplane.io/e2e") == "run"
    ]  # deleted already, or being deleted
    assert all(cp.request("GET", f"/api/v1/namespaces/{n}")["metadata"].get("deletionTimestamp") for n in left), left

    # play the kubelet for the agent pod its DaemonSet made anew, so the stack is healthy again
    def healthy() -> bool:
        for pod in _pods(cp):
            name, ns = pod["metadata"]["name"], pod["metadata"]["namespace"]
            if pod["metadata"].get("deletionTimestamp"):  # the kubelet would confirm the deletion
                cp.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}", {"gracePeriodSeconds": 0})
            elif pod["spec"].get("nodeName") and pod["status"].get("phase") != "Running":
                cp.mark_pod_running(ns, name)
        return _e2e(cp)[0] == 0

    cp.wait_for("the stack healthy again", healthy, timeout=60, interval=1)


def test_a_stopped_exporter_fails_its_node(control_plane: ControlPlane, stack: dict[str, Exporter]) -> None:
    cp = control_plane
    exporter = stack["e2e-k1"]
    exporter.stop()
    pod = next(
        p
        for p in _pods(cp)
        if p["spec"].get("nodeName") == "e2e-k1"
        and p["metadata"]["labels"].get("app.kubernetes.io/component") == "exporter"
    )
    _set_ready(cp, pod["metadata"]["name"], False)
    try:
        rc, out, err, _ = _e2e(cp)
        assert rc == 1, out + err
        line = next(line for line in out.splitlines() if "nrt/e2e-k1" in line)
        assert line.startswith("FAIL")
        assert "stale" in line and pod["metadata"]["name"] in line and "not Ready" in line
        assert next(line for line in out.splitlines() if "nrt/e2e-a1" in line).startswith("PASS")
        assert out.rstrip().splitlines()[-1].startswith("FAILED")
    finally:
        exporter.start()
        _set_ready(cp, pod["metadata"]["name"], True)


def test_a_missing_nrt_is_named(control_plane: ControlPlane, stack: dict[str, Exporter]) -> None:
    cp = control_plane
    exporter = stack["e2e-a1"]
    exporter.stop()
    try:
        cp.request("DELETE", "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies/e2e-a1")
        rc, out, _, _ = _e2e(cp, "-o", "json")
        assert rc == 1
        assert _results(out)["nrt/e2e-a1"]["message"] == "no NodeResourceTopology for this node"
    finally:
        exporter.start()
    cp.wait_for(
        "NRT back", lambda: cp.request("GET", "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies/e2e-a1")
    )


def test_a_broken_crd_fails_with_its_name(control_plane: ControlPlane, stack: dict[str, Exporter]) -> None:
    cp = control_plane
    got = cp.kubectl("delete", "crd", NRP_CRD, "--wait=true")
    assert got.returncode == 0, got.stderr
    try:
        rc, out, _, _ = _e2e(cp, "-o", "junit")
        assert rc == 1
        suite = ET.fromstring(out).find("testsuite")
        assert suite is not None
        failures = {
            c.get("name"): c.find("failure") for c in suite.findall("testcase") if c.find("failure") is not None
        }
        assert "crds" in failures
        message = failures["crds"].get("message") or ""  # type: ignore[union-attr]
        assert message.startswith(f"{NRP_CRD}: not installed")
    finally:
        _apply(
            cp, [d for d in _render() if d["kind"] == "CustomResourceDefinition" and d["metadata"]["name"] == NRP_CRD]
        )


def test_unreachable_cluster_is_one_line(tmp_path: Path) -> None:
    got = subprocess.run(
        [*CLI, "e2e", "--server", f"http://127.0.0.1:{free_port()}"], capture_output=True, text=True, check=False
    )
    assert got.returncode == 1
    assert got.stderr.startswith("Error: cannot read the cluster") and got.stderr.count("\n") == 1
