"""``numaplane snapshot`` against a real kube-apiserver, and the no-change round trip of ``simulate --from``.

The fixture cluster: Nodes registered without a kubelet, the NRT CRD exactly as ``numaplane render``
prints it, one NRT object per node holding what the node's bound pods hold (computed by numaplane's
resource manager, :mod:`numaplane_harness.clustergen`), pods bound through ``spec.nodeName`` (they
never run: there is no kubelet) and a few pending pods (no scheduler runs). Snapshot it with small
LIST pages (the real server's ``continue`` tokens), then simulate with no change: every pod is
re-admitted on its own node and every zone's available resources equal the NRT object's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from numaplane.sim.snapshot import read_snapshot
from numaplane.sim.whatif import baseline, load_cluster
from numaplane_harness.clustergen import generate_cluster, pending_pods
from numaplane_harness.kubecluster import ApiStatus, ControlPlane

pytestmark = pytest.mark.timeout(300)

REPO = Path(__file__).resolve().parents[2]
CLI = (sys.executable, "-c", "from numaplane.cli import main; main()")
NS = "whatif-fixture"
NRT_PATH = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"
NODES = 6
SECRET = "s3cr3t-value-never-captured"


def _nrt_crd(cp: ControlPlane) -> None:
    out = subprocess.run([*CLI, "render"], capture_output=True, text=True, check=True, cwd=REPO).stdout
    crd = next(
        d
        for d in yaml.safe_load_all(out)
        if d and d["kind"] == "CustomResourceDefinition" and d["metadata"]["name"].startswith("noderesourcetopologies")
    )
    got = cp.kubectl("apply", "--server-side", "--field-manager=numaplane-test", "-f", "-", stdin=yaml.safe_dump(crd))
    assert got.returncode == 0, got.stderr
    waited = cp.kubectl("wait", "--for=condition=Established", f"crd/{crd['metadata']['name']}", "--timeout=60s")
    assert waited.returncode == 0, waited.stderr


def _in_namespace(pod: dict[str, Any]) -> dict[str, Any]:
    pod["metadata"]["namespace"] = NS
    return pod


@pytest.fixture(scope="module")
def fixture_cluster(control_plane: ControlPlane) -> dict[str, Any]:
    cp = control_plane
    _nrt_crd(cp)
    try:
        cp.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    except ApiStatus as exc:
        assert exc.code == 409, exc
    # pods are refused until the controller-manager made the namespace's default ServiceAccount
    cp.wait_for("ServiceAccount default", lambda: cp.request("GET", f"/api/v1/namespaces/{NS}/serviceaccounts/default"))
    bound: dict[str, list[str]] = {}
    nrts: dict[str, Any] = {}
    for gen in generate_cluster(NODES, 14, seed=19):
        old = gen.node["metadata"]["name"]
        name = f"whatif-{old}"
        cp.register_node(
            name,
            gen.node["status"]["capacity"],
            labels=gen.node["metadata"]["labels"],
            allocatable=gen.node["status"]["allocatable"],
        )
        nrt = json.loads(json.dumps(gen.nrt).replace(old, name))
        nrt["metadata"] = {"name": name}
        created = cp.request("POST", NRT_PATH, nrt)
        nrts[name] = created
        bound[name] = []
        for pod in gen.pods:
            pod = json.loads(json.dumps(pod).replace(old, name))
            pod["spec"]["containers"][0]["env"] = [{"name": "TOKEN", "value": SECRET}]
            pod["metadata"]["annotations"] = {"example.com/private": SECRET, "numaplane.io/cpu-strategy": "packed"}
            cp.request("POST", f"/api/v1/namespaces/{NS}/pods", _in_namespace(pod))
            bound[name].append(pod["metadata"]["name"])
    pending = [_in_namespace(p) for p in pending_pods(3, seed=19)]
    for pod in pending:
        cp.request("POST", f"/api/v1/namespaces/{NS}/pods", pod)
    return {"bound": bound, "nrts": nrts, "pending": [p["metadata"]["name"] for p in pending]}


@pytest.fixture(scope="module")
def snapshot_file(control_plane: ControlPlane, fixture_cluster: dict[str, Any], tmp_path_factory: Any) -> Path:
    path = tmp_path_factory.mktemp("snapshot") / "cluster.yaml"
    got = subprocess.run(
        [*CLI, "snapshot", "--kubeconfig", str(control_plane.admin_kubeconfig), "-o", str(path), "--page-size", "7"],
        check=False,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert got.returncode == 0, got.stderr
    return path


def test_snapshot_captures_nodes_nrts_and_pods_without_secrets(
    snapshot_file: Path, fixture_cluster: dict[str, Any]
) -> None:
    text = snapshot_file.read_text()
    assert SECRET not in text and "registry.example" not in text
    doc = yaml.safe_load(text)  # plain YAML for any tool
    assert (doc["apiVersion"], doc["kind"]) == ("numaplane.io/v1", "ClusterSnapshot")
    snap = read_snapshot(snapshot_file)
    names = {n["name"] for n in snap.nodes}
    assert set(fixture_cluster["bound"]) <= names
    nrts = {n["name"]: n for n in snap.nrts}
    for name in fixture_cluster["bound"]:
        assert nrts[name]["zones"] == fixture_cluster["nrts"][name]["zones"]
        assert nrts[name]["policy"]["topologyManagerPolicy"] in ("single-numa-node", "best-effort")
    ours = [p for p in snap.pods if p["metadata"]["namespace"] == NS]
    assert sum(len(v) for v in fixture_cluster["bound"].values()) + len(fixture_cluster["pending"]) == len(ours)
    for pod in ours:
        assert pod["metadata"].get("annotations", {}) in ({}, {"numaplane.io/cpu-strategy": "packed"})
        assert "env" not in pod["spec"]["containers"][0]


def test_no_change_reproduces_placements_and_per_zone_availability(
    control_plane: ControlPlane, snapshot_file: Path, fixture_cluster: dict[str, Any]
) -> None:
    cluster = load_cluster(read_snapshot(snapshot_file))
    before, mismatches = baseline(cluster)
    for node, pods in fixture_cluster["bound"].items():
        assert [p.name for p in cluster.bound[node]] == pods  # the cluster's own placements, creation order
        assert before[node].refused == []
        assert node not in mismatches
        live = control_plane.request("GET", f"{NRT_PATH}/{node}")
        want = {z["name"]: {r["name"]: int(r["available"]) for r in z.get("resources", [])} for z in live["zones"]}
        assert before[node].zones == want  # identical per-zone available resources to the NRT object
    assert sorted(p.name for p in cluster.pending if p.namespace == NS) == fixture_cluster["pending"]


def test_simulate_from_with_no_change_reports_nothing_changed(
    snapshot_file: Path, fixture_cluster: dict[str, Any]
) -> None:
    got = subprocess.run(
        [*CLI, "simulate", "--from", str(snapshot_file), "-o", "json", "-q"],
        check=False,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert got.returncode == 0, got.stderr
    doc = json.loads(got.stdout)
    assert not set(doc["baseline"]["nrtMismatches"]) & set(fixture_cluster["bound"])
    assert not [r for r in doc["baseline"]["notReadmitted"] if r["node"] in fixture_cluster["bound"]]
    (default,) = doc["schedulers"]
    assert default["scheduler"] == "default"
    assert default["nowFailingAtNode"] == []
    placed = {p["pod"] for p in default["pendingNowPlaced"]}
    assert {f"{NS}/{name}" for name in fixture_cluster["pending"]} <= placed | set(default["pendingStillPending"])
