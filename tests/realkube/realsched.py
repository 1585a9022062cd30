"""Helpers of the real-scheduler e2e tests (``test_real_sched_*.py``): RBAC exactly as rendered, NRTs,
kubelet-less nodes, pods, events and the numaplane scheduler processes as subprocesses.

Each test works in its own namespace with its own nodes (labelled ``numaplane-test=<tag>``; its pods
select that label) and deletes its nodes at the end, so tests sharing the session's control plane do
not see each other's nodes as candidates.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from numaplane_harness.kubecluster import ApiStatus, ControlPlane, free_port

REPO = Path(__file__).resolve().parents[2]
CLI = (sys.executable, "-c", "from numaplane.cli import main; main()")
NAMESPACE = "numaplane-system"
SA_NAME = "numaplane-scheduler"
NRT_PATH = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"
#: Rendered kinds a scheduler test creates (the Deployment is not: its pods would only wait unscheduled).
RBAC_KINDS = ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
TEST_LABEL = "numaplane-test"


def render(*args: str) -> list[dict[str, Any]]:
    out = subprocess.run([*CLI, "render", *args], capture_output=True, text=True, check=True, cwd=REPO).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def rendered_scheduler(
    cp: ControlPlane, tmp: Path, *, mode: str, scheduler_name: str, replicas: int = 1, **spec: Any
) -> list[dict[str, Any]]:
    """``numaplane render --from`` a NUMAResourcesScheduler of ``mode`` (and other ``spec`` fields, e.g.
    ``dra="Enabled"``): every object it prints."""
    cr = tmp / f"nrs-{mode}.yaml"
    cr.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "numaplane.io/v1",
                "kind": "NUMAResourcesScheduler",
                "metadata": {"name": "numaresourcesscheduler"},
                "spec": {
                    "schedulerName": scheduler_name,
                    "mode": mode,
                    "cacheResyncPeriod": "2s",
                    "replicas": replicas,  # > 1: Lease election rendered
                    **spec,
                },
            }
        )
    )
    return render("--from", str(cr))


def install_nrt_crd(cp: ControlPlane) -> None:
    """The NRT CRD exactly as ``numaplane render`` prints it, applied and Established."""
    crds = [
        d
        for d in render()
        if d["kind"] == "CustomResourceDefinition" and d["metadata"]["name"].endswith("topology.node.k8s.io")
    ]
    assert crds, "render prints no NodeResourceTopology CRD"
    got = cp.kubectl(
        "apply", "--server-side", "--force-conflicts", "--field-manager=numaplane-test", "-f", "-",
        stdin=yaml.safe_dump_all(crds),
    )  # fmt: skip
    assert got.returncode == 0, got.stderr
    name = crds[0]["metadata"]["name"]
    waited = cp.kubectl("wait", "--for=condition=Established", f"crd/{name}", "--timeout=60s")
    assert waited.returncode == 0, waited.stderr


def apply_rbac(cp: ControlPlane, docs: list[dict[str, Any]]) -> None:
    """Create the rendered identity and RBAC objects (nothing more: the grants are exactly these)."""
    wanted = [d for d in docs if d["kind"] in RBAC_KINDS]
    assert {d["kind"] for d in wanted} == set(RBAC_KINDS), sorted({d["kind"] for d in docs})
    # An earlier test's operator may have created these objects with an owner reference to a custom
    # resource that is gone: applying over them keeps that reference, and the garbage collector then
    # deletes them under this test. Start from fresh objects (the Namespace is kept).
    owned = [d for d in wanted if d["kind"] != "Namespace"]
    gone = cp.kubectl("delete", "--ignore-not-found", "--wait=true", "-f", "-", stdin=yaml.safe_dump_all(owned))
    assert gone.returncode == 0, gone.stderr
    got = cp.kubectl(
        "apply", "--server-side", "--force-conflicts", "--field-manager=numaplane-test", "-f", "-",
        stdin=yaml.safe_dump_all(wanted),
    )  # fmt: skip
    assert got.returncode == 0, got.stderr


def zone(name: str, cpu: int, memory_gib: int, *, allocatable_cpu: int = 4, allocatable_gib: int = 8) -> dict[str, Any]:
    """One NUMA zone of an NRT: ``cpu``/``memory_gib`` available of the allocatable amounts."""
    return {
        "name": name,
        "type": "Node",
        "resources": [
            {
                "name": "cpu",
                "capacity": str(allocatable_cpu),
                "allocatable": str(allocatable_cpu),
                "available": str(cpu),
            },
            {
                "name": "memory",
                "capacity": f"{allocatable_gib}Gi",
                "allocatable": f"{allocatable_gib}Gi",
                "available": f"{memory_gib}Gi",
            },
        ],
    }


def nrt(node: str, zones: list[dict[str, Any]], attributes: dict[str, str] | None = None) -> dict[str, Any]:
    extra = [{"name": k, "value": v} for k, v in (attributes or {}).items()]
    return {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": node},
        "topologyPolicies": ["SingleNUMANodeContainerLevel"],
        "attributes": [
            {"name": "topologyManagerPolicy", "value": "single-numa-node"},
            {"name": "topologyManagerScope", "value": "container"},
            *extra,
        ],
        "zones": zones,
    }


def put_nrt(
    cp: ControlPlane, node: str, zones: list[dict[str, Any]], attributes: dict[str, str] | None = None
) -> dict[str, Any]:
    """Create or replace the NRT of ``node`` (as an exporter would)."""
    doc = nrt(node, zones, attributes)
    try:
        current = cp.request("GET", f"{NRT_PATH}/{node}")
    except ApiStatus as exc:
        if exc.code != 404:
            raise
        return cp.request("POST", NRT_PATH, doc)
    doc["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    return cp.request("PUT", f"{NRT_PATH}/{node}", doc)


def delete_nrt(cp: ControlPlane, node: str) -> None:
    with contextlib.suppress(ApiStatus):
        cp.request("DELETE", f"{NRT_PATH}/{node}")


@dataclass
class Cluster:
    """This test's namespace, node label and nodes."""

    cp: ControlPlane
    tag: str
    namespace: str
    nodes: list[str]

    def add_node(
        self,
        name: str,
        zones: list[dict[str, Any]],
        *,
        cpu: str = "8",
        memory: str = "16Gi",
        attributes: dict[str, str] | None = None,
    ) -> str:
        node = f"{self.tag}-{name}"
        self.cp.register_node(node, {"cpu": cpu, "memory": memory, "pods": "110"}, labels={TEST_LABEL: self.tag})
        self.nodes.append(node)
        put_nrt(self.cp, node, zones, attributes)
        return node

    def pod(self, name: str, cpu: int, *, scheduler: str, memory: str = "1Gi") -> dict[str, Any]:
        """Create a Guaranteed pod for ``scheduler`` restricted to this test's nodes."""
        res = {"cpu": str(cpu), "memory": memory}
        doc = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {
                "schedulerName": scheduler,
                "nodeSelector": {TEST_LABEL: self.tag},
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": res, "limits": res},
                    }
                ],
            },
        }
        return self.cp.request("POST", f"/api/v1/namespaces/{self.namespace}/pods", doc)

    def running_pod(self, name: str, node: str, cpu: str, *, scheduler: str) -> dict[str, Any]:
        """A pod already on ``node`` and ``Running`` (as a kubelet would report it), e.g. a DaemonSet's."""
        res = {"cpu": cpu, "memory": "256Mi"}
        doc = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {
                "schedulerName": scheduler,
                "nodeName": node,
                "containers": [{"name": "main", "image": "pause", "resources": {"requests": res, "limits": res}}],
            },
        }
        self.cp.request("POST", f"/api/v1/namespaces/{self.namespace}/pods", doc)
        return self.cp.request(
            "PATCH",
            f"/api/v1/namespaces/{self.namespace}/pods/{name}/status",
            {"status": {"phase": "Running"}},
            content_type="application/merge-patch+json",
        )

    def taint(self, node: str, key: str = "node-role.kubernetes.io/control-plane") -> None:
        """Give ``node`` a NoSchedule taint our pods do not tolerate (like a control-plane node)."""
        self.cp.request(
            "PATCH",
            f"/api/v1/nodes/{node}",
            {"spec": {"taints": [{"key": key, "effect": "NoSchedule"}]}},
            content_type="application/merge-patch+json",
        )

    def get_pod(self, name: str) -> dict[str, Any]:
        return self.cp.request("GET", f"/api/v1/namespaces/{self.namespace}/pods/{name}")

    def node_of(self, name: str) -> str:
        node: str = self.get_pod(name)["spec"].get("nodeName") or ""
        return node

    def wait_bound(self, name: str, timeout: float = 40, *, extra: str = "") -> str:
        try:
            node: str = self.cp.wait_for(f"pod {name} bound", lambda: self.node_of(name), timeout=timeout)
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n{self.diagnostics(name)}\n{extra}") from None
        return node

    def diagnostics(self, name: str) -> str:
        """The pod's status and events and kube-scheduler's log tail (for failure messages)."""
        try:
            status = dump(self.get_pod(name).get("status"))
        except ApiStatus as exc:
            status = str(exc)
        events = [(e.get("reason"), e.get("message")) for e in self.events(name)]
        return f"status: {status}\nevents: {events}\nkube-scheduler:\n{self.cp.log_tail('kube-scheduler', 40)}"

    def events(self, name: str) -> list[dict[str, Any]]:
        """core/v1 view of every Event about pod ``name`` (kube-scheduler writes events.k8s.io ones)."""
        return self.cp.events_about(self.namespace, name)

    def wait_event(self, name: str, reason: str, contains: str = "", timeout: float = 40) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            for event in self.events(name):
                if event.get("reason") == reason and contains in (event.get("message") or ""):
                    return event
            return None

        try:
            event: dict[str, Any] = self.cp.wait_for(
                f"{reason} event of pod {name} with {contains!r}", found, timeout=timeout
            )
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n{self.diagnostics(name)}") from None
        return event


@contextlib.contextmanager
def scoped_cluster(cp: ControlPlane) -> Iterator[Cluster]:
    """A fresh namespace and node label for one test; its nodes and NRTs are deleted afterwards."""
    tag = "t" + uuid.uuid4().hex[:6]
    namespace = f"sched-{tag}"
    cp.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    # pods are refused until the controller-manager has made the namespace's default ServiceAccount
    cp.wait_for(
        f"ServiceAccount {namespace}/default",
        lambda: cp.request("GET", f"/api/v1/namespaces/{namespace}/serviceaccounts/default"),
    )
    cluster = Cluster(cp, tag, namespace, [])
    try:
        yield cluster
    finally:
        for node in cluster.nodes:
            delete_nrt(cp, node)
            cp.delete_node(node)
        with contextlib.suppress(ApiStatus):
            cp.request("DELETE", f"/api/v1/namespaces/{namespace}")


class NumaplaneProcess:
    """``numaplane scheduler extender|run`` as a subprocess with a kubeconfig; logs kept for failures."""

    def __init__(self, args: list[str], log_file: Path) -> None:
        self.log_file = log_file
        self._log = open(log_file, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen([*CLI, *args], stdout=self._log, stderr=subprocess.STDOUT, cwd=REPO)

    def denials(self) -> list[str]:
        """Log lines reporting an RBAC denial (HTTP 403) — none is expected under the rendered RBAC."""
        text = self.log_file.read_text(errors="replace")
        return [line for line in text.splitlines() if " 403 " in line or "forbidden" in line.lower()]

    def log(self, lines: int = 60) -> str:
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])

    def wait_ready(self, port: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"numaplane exited with {self.process.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code}: {exc.read()[:300]!r}"
            except OSError as exc:
                last = str(exc)
            time.sleep(0.2)
        raise AssertionError(f"numaplane not ready in {timeout} s ({last}):\n{self.log()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._log.close()


@contextlib.contextmanager
def numaplane(args: list[str], log_file: Path, ready_port: int) -> Iterator[NumaplaneProcess]:
    proc = NumaplaneProcess(args, log_file)
    try:
        proc.wait_ready(ready_port)
        yield proc
    finally:
        proc.stop()


def install_scheduler(
    cp: ControlPlane, tmp: Path, *, mode: str, scheduler_name: str, replicas: int = 1
) -> tuple[list[dict[str, Any]], Path]:
    """The one real-scheduler set-up: the NRT CRD, the RBAC ``numaplane render`` grants the scheduler
    of ``mode`` (:func:`rendered_scheduler`), and a kubeconfig of its ServiceAccount. Returns
    ``(the rendered objects, that kubeconfig)``."""
    install_nrt_crd(cp)
    docs = rendered_scheduler(cp, tmp, mode=mode, scheduler_name=scheduler_name, replicas=replicas)
    apply_rbac(cp, docs)
    return docs, cp.service_account_kubeconfig(NAMESPACE, SA_NAME)


def standalone_args(
    kubeconfig: Path, scheduler_name: str, health_port: int, *extra: str, overreserve: bool = True
) -> list[str]:
    """``numaplane scheduler run`` as the tests start it: health on ``health_port``, no metrics listener
    unless ``extra`` names one, console logs, and (``overreserve``) the over-reserve cache resynced every second."""
    cache = ["--cache=overreserve", "--resync-period=1s"] if overreserve else []
    if not any(a.startswith("--metrics-address") for a in extra):
        extra = ("--metrics-address=", *extra)
    return [
        "scheduler", "run", "--kubeconfig", str(kubeconfig), f"--scheduler-name={scheduler_name}", *cache,
        f"--health-address=127.0.0.1:{health_port}", "--log-format=console", *extra,
    ]  # fmt: skip


def extender_args(kubeconfig: Path, port: int, scheduler_name: str, *extra: str) -> list[str]:
    return [
        "scheduler", "extender", "--kubeconfig", str(kubeconfig), f"--address=127.0.0.1:{port}",
        f"--scheduler-name={scheduler_name}", "--log-format=console", "--log-level=debug", *extra,
    ]  # fmt: skip


def kube_scheduler_config(docs: list[dict[str, Any]], extender_port: int, **extender: Any) -> dict[str, Any]:
    """The rendered ``KubeSchedulerConfiguration`` (from its ConfigMap) pointed at ``extender_port``."""
    config_map = next(d for d in docs if d["kind"] == "ConfigMap")
    config: dict[str, Any] = yaml.safe_load(next(iter(config_map["data"].values())))
    for entry in config["extenders"]:
        entry["urlPrefix"] = f"http://127.0.0.1:{extender_port}/"
        entry.update(extender)
    return config


def scheduler_log_forbidden(cp: ControlPlane) -> list[str]:
    """kube-scheduler log lines reporting an RBAC denial."""
    try:
        text = (cp.workdir / "kube-scheduler.log").read_text(errors="replace")
    except OSError:
        return []
    # RBAC denials only ('... is forbidden: User "..." cannot ...'); an event refused because its
    # namespace is being deleted by another test's clean-up is also "forbidden", and not ours
    return [line for line in text.splitlines() if "forbidden: User" in line and " cannot " in line]


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=1)[:3000]


__all__ = [
    "NAMESPACE",
    "SA_NAME",
    "Cluster",
    "apply_rbac",
    "extender_args",
    "free_port",
    "install_nrt_crd",
    "kube_scheduler_config",
    "numaplane",
    "put_nrt",
    "rendered_scheduler",
    "scheduler_log_forbidden",
    "scoped_cluster",
    "zone",
]


def metric(port: int, name: str, **labels: str) -> float:
    """The value of one sample of a numaplane process's ``/metrics`` (0 when absent)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        head, _, value = line.rpartition(" ")
        if all(f'{k}="{v}"' in head for k, v in labels.items()):
            return float(value)
    return 0.0
