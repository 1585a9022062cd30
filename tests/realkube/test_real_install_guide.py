"""docs/install.md, run: every ``sh`` block of the install guide, in order, against the real control plane.

A block preceded by ``<!-- not run: <why> -->`` is skipped (and there must be few). The blocks run in
bash (``-euo pipefail``) from a folder holding a link to the repository's ``deploy/``, with ``KUBECONFIG`` (admin), ``IMAGE``, ``PATH`` (the real
kubectl, this environment's ``numaplane``) and ``NODE`` (the node to label) set.

The control plane's nodes have no kubelet, so a background thread plays the parts the guide's
cluster would: it marks pods bound to the node Running and Ready, finishes the graceful deletion of
pods being deleted, starts the operator (out of cluster, under its own ServiceAccount) once its
Deployment has a pod, and the node's exporter (a synthetic machine, ``fake://`` PodResources) once
its DaemonSet pod is bound — so ``numaplane e2e`` in the guide checks a real operator and exporter.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from numaplane.operator.render_common import DEFAULT_IMAGE
from numaplane_harness.containerd import terminate_process
from numaplane_harness.kubecluster import ApiStatus, ControlPlane, free_port

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "exporter"))
from exp_helpers import build_sysfs

pytestmark = pytest.mark.timeout(600)

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "install.md"
CLI = (sys.executable, "-c", "from numaplane.cli import main; main()")
NS = "numaplane-system"
NODE_NS = "numaplane-node"
NODE = "guide-w1"
GI = 1 << 30
BLOCK = re.compile(r"(?P<skip><!-- not run: (?P<why>[^>]*?) -->\n)?```sh\n(?P<body>.*?)```", re.S)


def guide_blocks() -> list[tuple[str, str | None]]:
    """``(body, why-not-run)`` of every sh block of the guide, in order."""
    return [(m.group("body"), m.group("why")) for m in BLOCK.finditer(GUIDE.read_text())]


def test_the_guide_marks_few_blocks_not_run() -> None:
    blocks = guide_blocks()
    skipped = [why for _, why in blocks if why]
    assert len(blocks) >= 8
    assert len(skipped) <= 2, skipped


class Kubelet(threading.Thread):
    """Plays the node's kubelet (and starts the operator's and exporter's processes); see the docstring."""

    def __init__(self, cp: ControlPlane, work: Path) -> None:
        super().__init__(daemon=True)
        self.cp, self.work = cp, work
        self.stopping = threading.Event()
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.errors: list[str] = []

    def run(self) -> None:
        while not self.stopping.wait(0.5):
            try:
                self.step()
            except (ApiStatus, OSError) as exc:
                self.errors.append(str(exc))
        for name, process in self.processes.items():
            if process.poll() is not None:
                self.errors.append(f"{name} exited with {process.returncode}")

    def step(self) -> None:
        for namespace in (NS, NODE_NS):
            self.step_in(namespace)

    def step_in(self, namespace: str) -> None:
        try:
            pods = self.cp.request("GET", f"/api/v1/namespaces/{namespace}/pods")["items"]
        except ApiStatus:
            return
        for pod in pods:
            name = pod["metadata"]["name"]
            if pod["metadata"].get("deletionTimestamp"):
                with contextlib.suppress(ApiStatus):
                    self.cp.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", {"gracePeriodSeconds": 0})
                continue
            if not pod["spec"].get("nodeName"):
                continue
            if pod["status"].get("phase") != "Running":
                with contextlib.suppress(ApiStatus):
                    self.cp.mark_pod_running(namespace, name)
            component = pod["metadata"].get("labels", {}).get("app.kubernetes.io/component")
            if component in ("operator", "exporter") and component not in self.processes:
                self.launch(component)

    def launch(self, component: str) -> None:
        kubeconfig = (
            self.cp.node_bound_kubeconfig(NODE_NS, "numaplane-exporter", NODE)  # as a kubelet-mounted token
            if component == "exporter"
            else self.cp.service_account_kubeconfig(NS, f"numaplane-{component}")
        )
        common = ["--metrics-address", f"127.0.0.1:{free_port()}", "--health-address", f"127.0.0.1:{free_port()}"]
        if component == "operator":
            args = [
                "operator",
                *("--kubeconfig", str(kubeconfig), "--namespace", NS, "--node-namespace", NODE_NS),
                *("--image", DEFAULT_IMAGE, *common),
            ]
        else:
            work = self.work / "exporter"
            fake = work / "podres"
            fake.mkdir(parents=True, exist_ok=True)
            memory = [{"memory_type": "memory", "size": 8 * GI, "topology": {"nodes": [{"ID": n}]}} for n in (0, 1)]
            (fake / "get_allocatable_resources.json").write_text(
                json.dumps({"cpu_ids": [1, 2, 3, 5, 6, 7], "memory": memory})
            )
            (fake / "list.json").write_text(json.dumps({"pod_resources": []}))
            sysfs = work / "host"
            if not sysfs.exists():
                build_sysfs(sysfs)
            kubelet_config = work / "kubelet.yaml"
            kubelet_config.write_text(
                yaml.safe_dump(
                    {
                        "apiVersion": "kubelet.config.k8s.io/v1beta1",
                        "kind": "KubeletConfiguration",
                        "topologyManagerPolicy": "single-numa-node",
                        "reservedSystemCPUs": "0,4",
                    }
                )
            )
            args = [
                "exporter",
                f"--node-name={NODE}",
                f"--podresources-socket=fake://{fake}",
                f"--sysfs-root={sysfs}",
                f"--kubelet-config={kubelet_config}",
                "--period=1",
                f"--kubeconfig={kubeconfig}",
                *common,
            ]
        with open(self.work / f"{component}.log", "ab") as out:
            self.processes[component] = subprocess.Popen([*CLI, *args], stdout=out, stderr=out)

    def stop(self) -> None:
        self.stopping.set()
        if self.is_alive():
            self.join(10)
        for process in self.processes.values():
            terminate_process(process)


def _crds() -> list[dict[str, Any]]:
    out = subprocess.run([*CLI, "render"], capture_output=True, text=True, check=True, cwd=REPO).stdout
    return [d for d in yaml.safe_load_all(out) if d and d["kind"] == "CustomResourceDefinition"]


@pytest.fixture
def guide_cluster(control_plane: ControlPlane, tmp_path: Path) -> Iterator[dict[str, str]]:
    cp = control_plane
    cp.register_node(
        NODE, {"cpu": "8", "memory": "16Gi", "pods": "110"}, allocatable={"cpu": "6", "memory": "15Gi", "pods": "110"}
    )
    kubelet = Kubelet(cp, tmp_path)
    # a user's working folder: the repository's deploy/ tree, and room for the files blocks write
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "deploy").symlink_to(REPO / "deploy")
    env = dict(os.environ)
    env.update(
        KUBECONFIG=str(cp.admin_kubeconfig),
        IMAGE=DEFAULT_IMAGE,  # the reference the guide asks for (nothing pulls it: the player runs the processes)
        NODE=NODE,
        GUIDE_CWD=str(cwd),
        PATH=os.pathsep.join([str(cp.assets), str(Path(sys.executable).parent), env.get("PATH", "")]),
    )
    try:
        with cp.scheduler():
            kubelet.start()
            yield env
    finally:
        kubelet.stop()
        print("kubelet player errors:", kubelet.errors[-5:])
        print("".join(f"\n{c} log:\n{(tmp_path / f'{c}.log').read_text()[-1500:]}" for c in kubelet.processes))
        # other modules share the control plane: leave the CRDs installed, remove the rest
        crds = _crds()
        cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=yaml.safe_dump_all(crds))
        for crd in crds:
            cp.kubectl("wait", "--for=condition=Established", f"crd/{crd['metadata']['name']}", "--timeout=60s")
        with contextlib.suppress(ApiStatus):
            cp.request("DELETE", f"/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies/{NODE}")
        cp.delete_node(NODE)


def test_every_shell_block_of_the_install_guide_runs(guide_cluster: dict[str, str]) -> None:
    timings: list[str] = []
    started = time.monotonic()
    for number, (body, why) in enumerate(guide_blocks(), 1):
        first = body.strip().splitlines()[0]
        if why:
            timings.append(f"  block {number} not run ({why}): {first}")
            continue
        t0 = time.monotonic()
        got = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", body],
            cwd=guide_cluster["GUIDE_CWD"],
            env=guide_cluster,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        timings.append(f"  block {number} ({time.monotonic() - t0:.1f} s): {first}")
        assert got.returncode == 0, f"block {number} failed:\n{body}\nstdout:\n{got.stdout}\nstderr:\n{got.stderr}"
        if "numaplane e2e\n" in body:
            assert "PASSED" in got.stdout, got.stdout
    print(f"\ninstall guide ran in {time.monotonic() - started:.1f} s\n" + "\n".join(timings))
