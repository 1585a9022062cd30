"""``numaplane exporter --dra`` on the real kube-apiserver v1.36.2 under the RBAC the operator renders
for the exporter (issue 28 item 2).

Real: the API server's ResourceSlice (a device on NUMA node 0, one on node 1, and one of another node),
DeviceClass (its CEL selector validated by the server and evaluated by the exporter), a ResourceClaim whose
allocation is written through the status subresource, the exporter's watches and the NRT write the
server validates against the CRD. Not real: the machine (a synthetic two-NUMA sysfs tree) and the
PodResources answers (``fake://`` files).

Checked: the zones carry ``deviceclass.resource.kubernetes.io/<class>`` rows with one device each, and
the claim's allocation makes the device's zone show 0 available within seconds (a watch, no restart);
deleting the claim frees it again.
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

from numaplane_harness.containerd import terminate_process
from numaplane_harness.kubecluster import ApiStatus, ControlPlane, free_port

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "exporter"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agent"))
from dra_helpers import DRIVER, devices_on_server, resource_slice
from exp_helpers import build_sysfs

pytestmark = pytest.mark.timeout(240)

REPO = Path(__file__).resolve().parents[2]
CLI = (sys.executable, "-c", "from numaplane.cli import main; main()")
NS = "numaplane-exp-dra"
NODE = "exp-dra-n1"
CLASS = "accel-exp-dra"
ROW = f"deviceclass.resource.kubernetes.io/{CLASS}"
NRT = f"/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies/{NODE}"
DRA = "/apis/resource.k8s.io/v1"
GI = 1 << 30


def render(*args: str) -> list[dict[str, Any]]:
    out = subprocess.run([*CLI, "render", *args], capture_output=True, text=True, check=True, cwd=REPO).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def apply(cp: ControlPlane, docs: list[dict[str, Any]]) -> None:
    got = cp.kubectl(
        "apply", "--server-side", "--force-conflicts", "-f", "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}),
    )  # fmt: skip
    assert got.returncode == 0, got.stderr


def row(cp: ControlPlane, zone: str) -> tuple[str, str] | None:
    try:
        obj = cp.request("GET", NRT)
    except ApiStatus:
        return None
    for z in obj.get("zones") or []:
        if z["name"] == zone:
            for r in z["resources"]:
                if r["name"] == ROW:
                    return str(r["allocatable"]), str(r["available"])
    return None


@pytest.fixture
def exporter(control_plane: ControlPlane, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    cp = control_plane
    crd = next(d for d in render() if d["metadata"]["name"].startswith("noderesourcetopologies."))
    apply(cp, [crd])
    cp.kubectl("wait", "--for=condition=Established", f"crd/{crd['metadata']['name']}", "--timeout=60s")
    rbac = [
        d
        for d in render(
            "--from", str(REPO / "deploy/samples/numaresourcesoperator.yaml"), "--no-install", "--node-namespace", NS
        )
        if d["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
        and d["metadata"]["name"] == "numaplane-exporter"
    ]
    with contextlib.suppress(ApiStatus):
        cp.request("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
    apply(cp, rbac)
    cp.register_node(NODE, {"cpu": "8", "memory": "16Gi", "pods": "110"})
    slices = [resource_slice(NODE, {"a0": 0, "a1": 1}), resource_slice("exp-dra-other", {"b0": 0})]
    fake = tmp_path / "podres"
    fake.mkdir()
    memory = [{"memory_type": "memory", "size": 4 * GI, "topology": {"nodes": [{"ID": n}]}} for n in (0, 1)]
    (fake / "get_allocatable_resources.json").write_text(json.dumps({"cpu_ids": [1, 2, 3, 5, 6, 7], "memory": memory}))
    (fake / "list.json").write_text(json.dumps({"pod_resources": []}))
    kubeconfig = cp.service_account_kubeconfig(NS, "numaplane-exporter")
    log = tmp_path / "exporter.log"
    with devices_on_server(cp, CLASS, slices):
        with open(log, "ab") as out:
            process = subprocess.Popen(
                [
                    *CLI, "exporter", "--node-name", NODE, "--podresources-socket", f"fake://{fake}",
                    "--sysfs-root", str(build_sysfs(tmp_path / "host")), "--topology-manager-policy",
                    "single-numa-node", "--topology-manager-scope", "container", "--period", "0.5",
                    "--kubeconfig", str(kubeconfig), "--include-terminal-pods", "--dra",
                    f"--metrics-address=127.0.0.1:{free_port()}", f"--health-address=127.0.0.1:{free_port()}",
                ],
                stdout=out,
                stderr=out,
            )  # fmt: skip
        process.log = log  # type: ignore[attr-defined]
        try:
            yield process
        finally:
            terminate_process(process)
            with contextlib.suppress(ApiStatus):
                cp.request("DELETE", f"{DRA}/namespaces/default/resourceclaims/exp-dra-claim")
            with contextlib.suppress(ApiStatus):
                cp.request("DELETE", NRT)
            cp.delete_node(NODE)


def test_the_exporter_publishes_dra_rows_and_charges_allocated_claims(
    control_plane: ControlPlane, exporter: subprocess.Popen[bytes]
) -> None:
    cp = control_plane
    log: Path = exporter.log  # type: ignore[attr-defined]
    try:
        cp.wait_for("DRA rows", lambda: row(cp, "node-0") == ("1", "1") and row(cp, "node-1") == ("1", "1"), timeout=60)
    except TimeoutError:
        pytest.fail(f"no DRA rows: {cp.request('GET', NRT) if row(cp, 'node-0') else None}\n{log.read_text()[-3000:]}")
    claim = cp.request(
        "POST",
        f"{DRA}/namespaces/default/resourceclaims",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "exp-dra-claim", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "req", "exactly": {"deviceClassName": CLASS}}]}},
        },
    )
    claim["status"] = {
        "allocation": {
            "devices": {"results": [{"request": "req", "driver": DRIVER, "pool": NODE, "device": "a1"}]},
            "nodeSelector": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE]}]}]
            },
        }
    }
    cp.request("PUT", f"{DRA}/namespaces/default/resourceclaims/exp-dra-claim/status", claim)
    cp.wait_for("device a1 charged", lambda: row(cp, "node-1") == ("1", "0"), timeout=30)
    assert row(cp, "node-0") == ("1", "1")
    cp.request("DELETE", f"{DRA}/namespaces/default/resourceclaims/exp-dra-claim")
    cp.wait_for("device a1 free again", lambda: row(cp, "node-1") == ("1", "1"), timeout=30)
