"""The exporter publishing NodeResourceTopology objects to a real kube-apiserver, under its own RBAC.

``numaplane exporter`` runs as a subprocess authenticated by a bound token of the exporter's
ServiceAccount with exactly the RBAC the operator renders for it. It reads a synthetic machine (a
sysfs tree) and PodResources answers from ``fake://`` files, and publishes to the real API server,
which validates every write against the CRD it serves: numaplane's own, then an upstream CRD written
by hand for the tests from the published API facts (``data/upstream-nrt-crd.yaml``).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
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
NS = "numaplane-exp-e2e"
NODE = "exp-n1"
NRT = f"/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies/{NODE}"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/noderesourcetopologies.topology.node.k8s.io"
UPSTREAM_CRD = Path(__file__).parent / "data" / "upstream-nrt-crd.yaml"
GI = 1 << 30


def _render(*args: str) -> list[dict[str, Any]]:
    out = subprocess.run([*CLI, "render", *args], capture_output=True, text=True, check=True, cwd=REPO).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def _apply(cp: ControlPlane, docs: list[dict[str, Any]]) -> None:
    got = cp.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}),
    )
    assert got.returncode == 0, got.stderr


def _use_crd(cp: ControlPlane, crd: dict[str, Any]) -> None:
    _apply(cp, [crd])
    cp.kubectl("wait", "--for=condition=Established", f"crd/{crd['metadata']['name']}", "--timeout=60s")


def _pods(*cpus_per_pod: tuple[int, ...]) -> dict[str, Any]:
    return {
        "pod_resources": [
            {
                "name": f"gu-{i}",
                "namespace": "default",
                "containers": [
                    {
                        "name": "main",
                        "cpu_ids": list(cpus),
                        "memory": [{"memory_type": "memory", "size": GI, "topology": {"nodes": [{"ID": 0}]}}],
                    }
                ],
            }
            for i, cpus in enumerate(cpus_per_pod)
        ]
    }


class ExporterRun:
    """The exporter subprocess and the files it reads."""

    def __init__(self, cp: ControlPlane, work: Path) -> None:
        self.fake = work / "podres"
        self.fake.mkdir()
        memory = [{"memory_type": "memory", "size": 4 * GI, "topology": {"nodes": [{"ID": n}]}} for n in (0, 1)]
        (self.fake / "get_allocatable_resources.json").write_text(
            json.dumps({"cpu_ids": [1, 2, 3, 5, 6, 7], "memory": memory})
        )
        self.set_pods(_pods((1, 2)))
        sysfs = build_sysfs(work / "host")
        kubelet = work / "kubelet.yaml"
        kubelet.write_text(
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
        self.log = work / "exporter.log"
        kubeconfig = cp.service_account_kubeconfig(NS, "numaplane-exporter")
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                [
                    *CLI,
                    "exporter",
                    "--node-name",
                    NODE,
                    "--podresources-socket",
                    f"fake://{self.fake}",
                    "--sysfs-root",
                    str(sysfs),
                    "--kubelet-config",
                    str(kubelet),
                    "--period",
                    "0.5",
                    "--kubeconfig",
                    str(kubeconfig),
                    "--include-terminal-pods",
                    "--metrics-address",
                    f"127.0.0.1:{free_port()}",
                    "--health-address",
                    f"127.0.0.1:{free_port()}",
                ],
                stdout=out,
                stderr=out,
            )

    def set_pods(self, doc: dict[str, Any]) -> None:
        tmp = self.fake / "list.json.tmp"
        tmp.write_text(json.dumps(doc))
        tmp.replace(self.fake / "list.json")

    def log_tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])


@pytest.fixture(scope="module")
def exporter(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExporterRun]:
    cp = control_plane
    ours = next(d for d in _render() if d["metadata"]["name"].startswith("noderesourcetopologies."))
    _use_crd(cp, ours)
    rbac = [
        d
        for d in _render(
            "--from", str(REPO / "deploy/samples/numaresourcesoperator.yaml"), "--no-install", "--node-namespace", NS
        )
        if d["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
        and d["metadata"]["name"] == "numaplane-exporter"
    ]
    assert {d["kind"] for d in rbac} >= {"ServiceAccount", "ClusterRole", "ClusterRoleBinding"}
    with contextlib.suppress(ApiStatus):
        cp.request("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
    _apply(cp, rbac)
    node = cp.register_node(NODE, {"cpu": "8", "memory": "16Gi", "pods": "110"})
    run = ExporterRun(cp, tmp_path_factory.mktemp("exporter"))
    run.node_uid = node["metadata"]["uid"]  # type: ignore[attr-defined]
    try:
        yield run
    finally:
        terminate_process(run.process)
        _use_crd(cp, ours)
        with contextlib.suppress(ApiStatus):
            cp.request("DELETE", NRT)
        cp.delete_node(NODE)


def _zone(obj: dict[str, Any], zone: str, resource: str) -> dict[str, Any]:
    z = next(z for z in obj["zones"] if z["name"] == zone)
    return next(r for r in z["resources"] if r["name"] == resource)


def _attribute(obj: dict[str, Any], name: str) -> str | None:
    return next((a["value"] for a in obj.get("attributes") or [] if a["name"] == name), None)


def _nrt(cp: ControlPlane) -> dict[str, Any]:
    return cp.request("GET", NRT)


def test_the_exporter_creates_a_valid_nrt_under_its_own_rbac(
    control_plane: ControlPlane, exporter: ExporterRun
) -> None:
    cp = control_plane
    started = time.monotonic()
    try:
        obj = cp.wait_for("the NRT object", lambda: _nrt(cp), timeout=60)
    except TimeoutError:
        pytest.fail(f"no NRT; exporter log:\n{exporter.log_tail()}")
    print(f"NRT published {time.monotonic() - started:.1f} s after start")
    assert _zone(obj, "node-0", "cpu")["available"] == "1"  # 1,2,3 allocatable, 1,2 taken
    assert _zone(obj, "node-1", "cpu")["available"] == "3"
    assert _zone(obj, "node-0", "memory")["available"] == str(3 * GI)
    assert _attribute(obj, "topologyManagerPolicy") == "single-numa-node"
    assert (_attribute(obj, "nodeTopologyPodsFingerprint") or "").startswith("pfp0v001")
    owners = obj["metadata"].get("ownerReferences") or []
    assert [o["uid"] for o in owners] == [exporter.node_uid]  # type: ignore[attr-defined]
    bad = [line for line in exporter.log.read_text().splitlines() if "forbidden" in line.lower()]
    assert not bad, bad[:3]


def test_nothing_is_written_when_nothing_changed(control_plane: ControlPlane, exporter: ExporterRun) -> None:
    cp = control_plane
    version = cp.wait_for("the NRT object", lambda: _nrt(cp))["metadata"]["resourceVersion"]
    time.sleep(2.5)  # five refresh periods
    assert _nrt(cp)["metadata"]["resourceVersion"] == version


def test_a_change_is_published(control_plane: ControlPlane, exporter: ExporterRun) -> None:
    cp = control_plane
    before = _attribute(_nrt(cp), "nodeTopologyPodsFingerprint")
    exporter.set_pods(_pods((1, 2), (5, 6)))
    obj = cp.wait_for(
        "node-1 CPUs taken", lambda: (o := _nrt(cp)) and _zone(o, "node-1", "cpu")["available"] == "1" and o
    )
    assert _attribute(obj, "nodeTopologyPodsFingerprint") != before


def test_objects_are_valid_under_the_upstream_crd(control_plane: ControlPlane, exporter: ExporterRun) -> None:
    cp = control_plane
    upstream = json.loads(json.dumps(yaml.safe_load(UPSTREAM_CRD.read_text())))
    _use_crd(cp, upstream)
    served = cp.request("GET", CRD_PATH)
    assert "x-kubernetes-validations" not in json.dumps(served["spec"])  # really the hand-written one
    exporter.set_pods(_pods((3,), (5, 6, 7)))
    obj = cp.wait_for(
        "update validated by the upstream schema",
        lambda: (o := _nrt(cp)) and _zone(o, "node-0", "cpu")["available"] == "2" and o,
        timeout=30,
    )
    assert _zone(obj, "node-1", "cpu")["available"] == "0"
    # and a consumer reading the older served version gets the same zones
    old = cp.request("GET", f"/apis/topology.node.k8s.io/v1alpha1/noderesourcetopologies/{NODE}")
    assert old["zones"] == obj["zones"]
    rejected = [line for line in exporter.log.read_text().splitlines() if "Invalid" in line or "422" in line]
    assert not rejected, rejected[:3]
