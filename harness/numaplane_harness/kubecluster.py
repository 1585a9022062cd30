"""A real, private Kubernetes control plane for tests: etcd, kube-apiserver, controller-manager, scheduler.

What :func:`run_control_plane` does (DESIGN.md, "Tests and real components"; ``shared/k8s/README.md``):

1. :func:`~numaplane_harness.k8sassets.k8s_assets` — the Kubernetes binaries: a folder named by
   ``KUBEBUILDER_ASSETS`` (the envtest convention, for users with their own binaries), else the xz-compressed v1.36.2 binaries of
   ``$NUMAPLANE_SHARED/k8s`` unpacked once into ``<cache>/k8s/<version>`` and checked against
   ``SHA256SUMS``. etcd comes from that folder too if it holds one, else Debian trixie's ``etcd-server``
   3.5 fetched with the private apt configuration (:mod:`numaplane_harness.debian`).
2. :mod:`numaplane_harness.kubecerts` — a cluster CA, a front-proxy CA, serving and client
   certificates, the service-account key pair: made fresh at every start, nothing reused.
3. etcd (``--unsafe-no-fsync``, loopback, free ports), kube-apiserver (``Node,RBAC`` authorization,
   client certificates, service-account tokens, front-proxy flags) and kube-controller-manager
   (without the node-lifecycle controller, so Nodes registered without a kubelet stay Ready) started as
   child processes in their own sessions; ready once ``/readyz`` says ``ok``. kube-scheduler is started
   on demand by :meth:`ControlPlane.scheduler` with the configuration a test gives (extenders).
4. On exit every process is terminated and the work folder removed.

:func:`make_control_plane_fixture` builds a session-scoped pytest fixture that skips LOUDLY with the
reason where the machine cannot run it (or fails, if ``NUMAPLANE_REQUIRE_KUBE=1``).

Why one module over 400 lines: :class:`ControlPlane` is the one handle tests get, and its API helpers
(requests with the cluster's client certificates, kubeconfigs, fake Nodes) and its process control
(stop, restart, the on-demand scheduler) use the certificates, ports and work folder that
:func:`run_control_plane` creates and removes; read together, a reviewer can check that every process
and file it makes is gone at the end.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import yaml

from numaplane_harness.k8sassets import KubeUnavailable, etcd_binary, k8s_assets, shared_dir
from numaplane_harness.kubecerts import ClusterPKI, make_pki
from numaplane_harness.processes import terminate_process
from numaplane_harness.unavailable import component_unavailable

# KubeUnavailable is re-exported: the fixtures' users catch it from here.
__all__ = [
    "ControlPlane",
    "KubeUnavailable",
    "make_control_plane_fixture",
    "run_control_plane",
]

SERVICE_CIDR = "10.0.0.0/24"
#: Controllers left out: nothing heart-beats for kubelet-less Nodes, so the lifecycle controller
#: would mark them NotReady and the taint manager evict their pods.
DISABLED_CONTROLLERS = ("node-lifecycle-controller", "taint-eviction-controller")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def kubeconfig(server: str, ca_file: Path, user: Mapping[str, str], *, namespace: str | None = None) -> str:
    """A one-context kubeconfig document for ``server`` with ``user`` (cert/key files or a token)."""
    context: dict[str, str] = {"cluster": "test", "user": "user"}
    if namespace:
        context["namespace"] = namespace
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "test", "cluster": {"server": server, "certificate-authority": str(ca_file)}}],
            "users": [{"name": "user", "user": dict(user)}],
            "contexts": [{"name": "test", "context": context}],
            "current-context": "test",
        }
    )


class ApiStatus(Exception):
    """A non-2xx answer from the real API server, with its ``Status`` body."""

    def __init__(self, code: int, body: dict[str, Any]) -> None:
        super().__init__(f"HTTP {code}: {body.get('message', body)}")
        self.code = code
        self.body = body


@dataclass
class ControlPlane:
    """A running private control plane. Every path is under ``workdir``."""

    workdir: Path
    url: str
    pki: ClusterPKI
    assets: Path
    admin_kubeconfig: Path
    etcd_url: str = ""
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    _commands: dict[str, list[str]] = field(default_factory=dict, repr=False)

    @property
    def ca_file(self) -> Path:
        return self.pki.ca_cert

    # ---- requests as admin (tests' own set-up and checks) ----

    def _ssl(self, cert: tuple[Path, Path] | None) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        cert = cert or (self.pki.admin_cert, self.pki.admin_key)
        ctx.load_cert_chain(str(cert[0]), str(cert[1]))
        return ctx

    def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        content_type: str = "application/json",
        timeout: float = 30,
        token: str | None = None,
    ) -> dict[str, Any]:
        """One API request as the cluster admin (or with ``token``); raises :class:`ApiStatus` on an error."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        ctx = self._ssl(None)
        if token is not None:
            ctx = ssl.create_default_context(cafile=str(self.pki.ca_cert))
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = {"message": raw.decode(errors="replace")}
            raise ApiStatus(exc.code, parsed) from None
        result: dict[str, Any] = json.loads(raw) if raw else {}
        return result

    def kubectl(
        self, *args: str, kubeconfig_file: Path | None = None, timeout: float = 120, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run the real kubectl against this cluster (admin unless ``kubeconfig_file``)."""
        return subprocess.run(
            [str(self.assets / "kubectl"), "--kubeconfig", str(kubeconfig_file or self.admin_kubeconfig), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            input=stdin,
            check=False,
        )

    # ---- identities ----

    def user_kubeconfig(self, user: str, groups: tuple[str, ...] = ()) -> Path:
        """A kubeconfig with a fresh client certificate for ``user`` in ``groups``."""
        cert, key = self.pki.client(user, groups)
        path = (
            self.workdir / "kubeconfigs" / f"{hashlib.sha256((user + '|'.join(groups)).encode()).hexdigest()[:12]}.yaml"
        )
        path.parent.mkdir(exist_ok=True)
        path.write_text(
            kubeconfig(self.url, self.pki.ca_cert, {"client-certificate": str(cert), "client-key": str(key)})
        )
        return path

    def service_account_token(self, namespace: str, name: str, *, seconds: int = 3600, pod: str | None = None) -> str:
        """A token of ServiceAccount ``namespace/name`` (TokenRequest API).

        With ``pod`` (a Pod of that namespace), the token is bound to that pod as the kubelet's are: the
        API server then adds the ``authentication.kubernetes.io/pod-name``/``pod-uid`` user extras, and
        ``node-name``/``node-uid`` for a pod assigned to a node (``ServiceAccountTokenPodNodeInfo``).
        """
        spec: dict[str, Any] = {"expirationSeconds": seconds}
        if pod is not None:
            uid = self.request("GET", f"/api/v1/namespaces/{namespace}/pods/{pod}")["metadata"]["uid"]
            spec["boundObjectRef"] = {"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": uid}
        answer = self.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec},
        )
        token: str = answer["status"]["token"]
        return token

    def service_account_kubeconfig(self, namespace: str, name: str, *, pod: str | None = None) -> Path:
        """A kubeconfig authenticating as ServiceAccount ``namespace/name`` — exactly its RBAC, never admin
        (bound to Pod ``pod`` when given, see :meth:`service_account_token`)."""
        token = self.service_account_token(namespace, name, pod=pod)
        suffix = f"-{pod}" if pod is not None else ""
        path = self.workdir / "kubeconfigs" / f"sa-{namespace}-{name}{suffix}.yaml"
        path.parent.mkdir(exist_ok=True)
        path.write_text(kubeconfig(self.url, self.pki.ca_cert, {"token": token}, namespace=namespace))
        return path

    def node_bound_kubeconfig(self, namespace: str, name: str, node: str) -> Path:
        """A kubeconfig of ServiceAccount ``namespace/name`` whose token is bound to a pod on ``node``.

        For a component run as a process on a kubelet-less node: a placeholder Pod
        ``<name>-on-<node>`` of that ServiceAccount is created with ``spec.nodeName`` (nothing runs it),
        so the token carries the node's name as a kubelet-mounted one does (the install's admission
        policies refuse node components' writes without it).
        """
        pod = f"{name}-on-{node}"[:63].rstrip("-.")
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": pod, "namespace": namespace},
            "spec": {
                "nodeName": node,
                "serviceAccountName": name,
                "containers": [{"name": "placeholder", "image": "localhost/busybox:1.35"}],
            },
        }
        try:
            self.request("POST", f"/api/v1/namespaces/{namespace}/pods", body)
        except ApiStatus as exc:
            if exc.code != 409:
                raise
        return self.service_account_kubeconfig(namespace, name, pod=pod)

    # ---- nodes without a kubelet ----

    def register_node(
        self,
        name: str,
        capacity: Mapping[str, str],
        *,
        labels: Mapping[str, str] | None = None,
        allocatable: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Create Node ``name`` with ``capacity``/``allocatable`` and a Ready condition; nothing runs it."""
        node_labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **(labels or {})}
        self.request(
            "POST",
            "/api/v1/nodes",
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": node_labels}},
        )
        # The TaintNodesByCondition admission plugin taints every new Node not-ready; the node-lifecycle
        # controller (left out, see DISABLED_CONTROLLERS) would lift it once Ready: do its part.
        self.request(
            "PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": None}}, content_type="application/merge-patch+json"
        )
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status = {
            "capacity": dict(capacity),
            "allocatable": dict(allocatable or capacity),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "registered by numaplane.testing (no kubelet)",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": "v1.36.2",
                "kubeProxyVersion": "",
                "bootID": "",
                "containerRuntimeVersion": "containerd://1.7",
                "kernelVersion": "",
                "machineID": "",
                "osImage": "",
                "systemUUID": "",
            },
        }
        return self.request(
            "PATCH", f"/api/v1/nodes/{name}/status", {"status": status}, content_type="application/merge-patch+json"
        )

    def mark_pod_running(self, namespace: str, name: str) -> dict[str, Any]:
        """Play the kubelet for a pod bound to a kubelet-less Node: phase Running, every container ready."""
        pod = self.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        statuses = [
            {
                "name": c["name"],
                "image": c["image"],
                "imageID": "",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
            }
            for c in pod["spec"]["containers"]
        ]
        conditions = [
            {"type": kind, "status": "True", "lastTransitionTime": now}
            for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
        ]
        status = {
            "phase": "Running",
            "conditions": conditions,
            "containerStatuses": statuses,
            "startTime": now,
            "hostIP": "127.0.0.1",
            "podIP": "127.0.0.1",
        }
        return self.request(
            "PATCH",
            f"/api/v1/namespaces/{namespace}/pods/{name}/status",
            {"status": status},
            content_type="application/merge-patch+json",
        )

    def delete_node(self, name: str) -> None:
        with contextlib.suppress(ApiStatus):
            self.request("DELETE", f"/api/v1/nodes/{name}")

    def wait_for(self, what: str, check: Any, *, timeout: float = 60, interval: float = 0.2) -> Any:
        """Call ``check()`` until it returns something truthy; raise ``TimeoutError`` naming ``what``."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while True:
            try:
                last = check()
            except (ApiStatus, OSError) as exc:  # an error answer, or nothing listening yet
                last = exc
            else:
                if last:
                    return last
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not reached in {timeout} s (last: {last!r})")
            time.sleep(interval)

    def events_about(self, namespace: str, name: str) -> list[dict[str, Any]]:
        """The core/v1 Events of ``namespace`` whose ``involvedObject.name`` is ``name`` (kube-scheduler
        writes events.k8s.io ones; they show here too)."""
        listed = self.request(
            "GET", f"/api/v1/namespaces/{namespace}/events?fieldSelector=involvedObject.name%3D{name}"
        )
        items: list[dict[str, Any]] = listed.get("items") or []
        return items

    def wait_gone(self, what: str, path: str, *, timeout: float = 60) -> None:
        """Until ``GET path`` answers 404 (other error answers are retried, as :meth:`wait_for` does)."""

        def gone() -> bool:
            try:
                self.request("GET", path)
            except ApiStatus as exc:
                return exc.code == 404
            return False

        self.wait_for(what, gone, timeout=timeout)

    # ---- process control ----

    def log_tail(self, component: str, lines: int = 30) -> str:
        try:
            return "\n".join((self.workdir / f"{component}.log").read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def _start(self, component: str, command: list[str]) -> subprocess.Popen[bytes]:
        self._commands[component] = command
        with open(self.workdir / f"{component}.log", "ab") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.processes[component] = process
        return process

    def stop(self, component: str) -> None:
        process = self.processes.pop(component, None)
        if process is not None:
            terminate_process(process)

    def wait_ready(self, timeout: float = 60) -> None:
        """Until ``/readyz`` answers ``ok`` (raises :class:`KubeUnavailable` with the log otherwise)."""
        deadline = time.monotonic() + timeout
        ctx = self._ssl(None)
        last = ""
        while time.monotonic() < deadline:
            api = self.processes.get("kube-apiserver")
            if api is not None and api.poll() is not None:
                raise KubeUnavailable(
                    f"kube-apiserver exited with {api.returncode}:\n{self.log_tail('kube-apiserver')}"
                )
            try:
                with urllib.request.urlopen(self.url + "/readyz", context=ctx, timeout=5) as resp:
                    if resp.read().strip() == b"ok":
                        return
            except (urllib.error.URLError, OSError) as exc:
                last = str(exc)
            time.sleep(0.2)
        raise KubeUnavailable(f"kube-apiserver not ready in {timeout} s ({last}):\n{self.log_tail('kube-apiserver')}")

    def compact_etcd(self, revision: int) -> None:
        """Compact etcd's history up to ``revision`` (as kube-apiserver does every 5 minutes): watches
        and lists from older resourceVersions then answer 410 Gone."""
        req = urllib.request.Request(
            self.etcd_url + "/v3/kv/compaction",
            data=json.dumps({"revision": str(revision), "physical": True}).encode(),
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            resp.read()

    def restart_apiserver(self, down_seconds: float = 0.0) -> None:
        """Stop kube-apiserver, stay down ``down_seconds``, start it with the same flags, wait until ready."""
        command = self._commands["kube-apiserver"]
        self.stop("kube-apiserver")
        time.sleep(down_seconds)
        self._start("kube-apiserver", command)
        self.wait_ready()

    @contextlib.contextmanager
    def scheduler(
        self,
        profiles: list[dict[str, Any]] | None = None,
        extenders: list[dict[str, Any]] | None = None,
        *,
        kubeconfig_file: Path | None = None,
        leader_election: Mapping[str, Any] | None = None,
        qps: float = 200,
        burst: int = 400,
        verbosity: int = 2,
        extra_args: Sequence[str] = (),
    ) -> Iterator[subprocess.Popen[bytes]]:
        """Run kube-scheduler with a ``KubeSchedulerConfiguration`` (its ``extenders`` and ``profiles``).

        ``kubeconfig_file`` (e.g. :meth:`service_account_kubeconfig`) runs it with that identity's RBAC
        instead of ``system:kube-scheduler``'s; ``leader_election`` replaces the default
        ``{leaderElect: false}``. ``qps``/``burst``: its API client's rate limit (``clientConnection``);
        ``verbosity``: its ``-v`` (benches lower it: at 2 it logs a line per pod); ``extra_args``: more
        command-line flags, after the defaults (a later ``--secure-port`` replaces ``--secure-port=0``).
        """
        kubeconfig_file = kubeconfig_file or self.workdir / "kube-scheduler.kubeconfig"
        config: dict[str, Any] = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": str(kubeconfig_file), "qps": qps, "burst": burst},
            "leaderElection": dict(leader_election) if leader_election else {"leaderElect": False},
        }
        if profiles:
            config["profiles"] = profiles
        if extenders:
            config["extenders"] = extenders
        path = self.workdir / f"kube-scheduler-{time.monotonic_ns()}.yaml"
        path.write_text(yaml.safe_dump(config))
        process = self._start(
            "kube-scheduler",
            [
                str(self.assets / "kube-scheduler"),
                "--config",
                str(path),
                "--secure-port=0",
                f"-v={verbosity}",
                *extra_args,
            ],
        )
        try:
            yield process
        finally:
            self.stop("kube-scheduler")


def control_plane_unavailable_reason() -> str | None:
    """Why this machine cannot run the control plane, or None if it can (downloads aside)."""
    if sys.platform != "linux":
        return f"needs Linux, this is {sys.platform}"
    if not os.environ.get("KUBEBUILDER_ASSETS") and not (shared_dir() / "k8s" / "kube-apiserver.xz").is_file():
        return f"no Kubernetes binaries (set KUBEBUILDER_ASSETS or provide {shared_dir()}/k8s)"
    return None


@contextlib.contextmanager
def run_control_plane(
    *, with_controller_manager: bool = True, startup_timeout_seconds: float = 90.0
) -> Iterator[ControlPlane]:
    """Start etcd, kube-apiserver and (by default) kube-controller-manager; yield; tear everything down."""
    reason = control_plane_unavailable_reason()
    if reason:
        raise KubeUnavailable(reason)
    assets = k8s_assets()
    etcd = etcd_binary(assets)
    work = Path(tempfile.mkdtemp(prefix="numaplane-kube-"))
    pki = make_pki(work / "pki", service_ip="10.0.0.1")
    api_port, etcd_port, peer_port = free_port(), free_port(), free_port()
    url = f"https://127.0.0.1:{api_port}"
    admin = work / "admin.kubeconfig"
    admin.write_text(
        kubeconfig(url, pki.ca_cert, {"client-certificate": str(pki.admin_cert), "client-key": str(pki.admin_key)})
    )
    plane = ControlPlane(
        workdir=work, url=url, pki=pki, assets=assets, admin_kubeconfig=admin, etcd_url=f"http://127.0.0.1:{etcd_port}"
    )
    try:
        plane._start(
            "etcd",
            [
                str(etcd),
                "--name=numaplane-test",
                f"--data-dir={work / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=numaplane-test=http://127.0.0.1:{peer_port}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
        )
        plane._start(
            "kube-apiserver",
            [
                str(assets / "kube-apiserver"),
                f"--etcd-servers=http://127.0.0.1:{etcd_port}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                f"--secure-port={api_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--cert-dir={work / 'apiserver-certs'}",
                f"--tls-cert-file={pki.serving_cert}",
                f"--tls-private-key-file={pki.serving_key}",
                f"--client-ca-file={pki.ca_cert}",
                f"--kubelet-client-certificate={pki.apiserver_kubelet_cert}",
                f"--kubelet-client-key={pki.apiserver_kubelet_key}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki.sa_public}",
                f"--service-account-signing-key-file={pki.sa_private}",
                "--authorization-mode=Node,RBAC",
                "--allow-privileged=true",
                f"--requestheader-client-ca-file={pki.front_proxy_ca_cert}",
                f"--proxy-client-cert-file={pki.front_proxy_client_cert}",
                f"--proxy-client-key-file={pki.front_proxy_client_key}",
                "--requestheader-allowed-names=front-proxy-client",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                "--profiling=false",
                "--enable-priority-and-fairness=false",
            ],
        )
        plane.wait_ready(startup_timeout_seconds)
        if with_controller_manager:
            cm_kubeconfig = work / "kube-controller-manager.kubeconfig"
            cert, key = pki.client("system:kube-controller-manager")
            cm_kubeconfig.write_text(
                kubeconfig(url, pki.ca_cert, {"client-certificate": str(cert), "client-key": str(key)})
            )
            plane._start(
                "kube-controller-manager",
                [
                    str(assets / "kube-controller-manager"),
                    f"--kubeconfig={cm_kubeconfig}",
                    f"--authentication-kubeconfig={cm_kubeconfig}",
                    f"--authorization-kubeconfig={cm_kubeconfig}",
                    "--use-service-account-credentials=true",
                    f"--service-account-private-key-file={pki.sa_private}",
                    f"--root-ca-file={pki.ca_cert}",
                    f"--cluster-signing-cert-file={pki.ca_cert}",
                    f"--cluster-signing-key-file={pki.ca_key}",
                    "--leader-elect=false",
                    "--bind-address=127.0.0.1",
                    "--secure-port=0",
                    "--controllers=*," + ",".join(f"-{c}" for c in DISABLED_CONTROLLERS),
                    "--concurrent-gc-syncs=5",
                ],
            )
        sched_kubeconfig = work / "kube-scheduler.kubeconfig"
        cert, key = pki.client("system:kube-scheduler")
        sched_kubeconfig.write_text(
            kubeconfig(url, pki.ca_cert, {"client-certificate": str(cert), "client-key": str(key)})
        )
        # The default ServiceAccount of "default" exists once the controller-manager runs.
        if with_controller_manager:
            plane.wait_for(
                "ServiceAccount default/default",
                lambda: plane.request("GET", "/api/v1/namespaces/default/serviceaccounts/default"),
                timeout=startup_timeout_seconds,
            )
        yield plane
    finally:
        for component in ("kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"):
            plane.stop(component)
        for process in list(plane.processes.values()):
            terminate_process(process)
        shutil.rmtree(work, ignore_errors=True)


def make_control_plane_fixture(name: str = "control_plane") -> Any:
    """A session-scoped pytest fixture yielding a :class:`ControlPlane`.

    Skips loudly where the machine cannot run it; with ``NUMAPLANE_REQUIRE_KUBE=1`` it fails instead.
    """
    import pytest

    @pytest.fixture(scope="session", name=name)
    def control_plane_fixture() -> Iterator[ControlPlane]:
        def unavailable(reason: str) -> NoReturn:
            component_unavailable("the control plane", reason, "NUMAPLANE_REQUIRE_KUBE")

        reason = control_plane_unavailable_reason()
        if reason:
            unavailable(reason)
        started = time.monotonic()
        try:
            with run_control_plane() as plane:
                print(
                    f"\nreal control plane ready in {time.monotonic() - started:.1f} s at {plane.url}", file=sys.stderr
                )
                yield plane
        except KubeUnavailable as exc:
            unavailable(str(exc))

    return control_plane_fixture


def b64(data: bytes) -> str:
    """Base64 text of ``data`` (kubeconfig ``*-data`` fields, Secrets)."""
    return base64.b64encode(data).decode()
