"""A real kubelet v1.36.2 for tests: a node of the private control plane, on the private containerd.

What :func:`run_kubelet` does (``shared/k8s/README.md``, "kubelet as a real node"):

1. A client certificate ``CN=system:node:<name>, O=system:nodes`` from the control plane's CA (the Node
   authorizer then lets it register its Node and read the pods bound to it), a kubeconfig, and a
   ``KubeletConfiguration`` built from a :class:`KubeletPolicy`: ``failCgroupV1: false``,
   ``failSwapOn: false``, the cgroupfs driver, a private ``cgroupRoot`` (its ``kubepods`` tree sits
   there, not at the machine's top level), loopback-only serving on free ports, a private
   ``podLogsDir`` and ``volumePluginDir``, the CPU / Memory / Topology Manager policies asked for.
2. A loopback CNI conflist in the containerd's CNI conf folder, so the runtime reports NetworkReady
   (pods run with ``hostNetwork: true``; no CNI plugin binary is ever called for them, so none is
   installed). The sandbox image is the containerd's ``sandbox_image`` (``PAUSE_IMAGE``): kubelet v1.36
   has no ``--pod-infra-container-image`` flag any more.
3. ``kubelet --root-dir <private>`` started in its own session; ready when its Node's ``Ready``
   condition is ``True`` (:attr:`RealKubelet.ready_seconds` records how long that took).
4. The kubelet sets kernel tunables at start (``vm.overcommit_memory``, ``kernel.panic``,
   ``kernel.panic_on_oops``) — on a shared machine those are the host's: their values before the start
   are written back as soon as the node is Ready and again at the end.
5. :meth:`RealKubelet.restart` with another policy: the kubelet is stopped, ``cpu_manager_state`` and
   ``memory_manager_state`` deleted (the kubelet refuses a state file of another policy), started again.
6. At the end: every pod bound to the node deleted, the kubelet stopped, the sandboxes it left removed
   through CRI, the processes in its cgroups killed, mounts under its root dir unmounted, its cgroups,
   root dir, pod logs and ``/var/log/containers`` links removed, its Node deleted, and the device
   manager's socket (``/var/lib/kubelet/device-plugins/kubelet.sock``: a fixed path, whatever the root
   dir) with the folders the kubelet made for it. Two kubelets on one machine would share that socket;
   run one at a time.

:func:`make_kubelet_fixture` builds a session-scoped pytest fixture that skips LOUDLY with the reason
where the machine cannot run it (or fails, if ``NUMAPLANE_REQUIRE_KUBELET=1``).

Why one module over 400 lines: it is one fixture whose start (steps 1–5) and clean-up (step 6) act on
the same state of a shared machine — cgroups, kernel tunables, mounts, the device manager's socket,
``/var/log/containers``; in one file a reviewer can check that the clean-up undoes every change the
start makes and nothing else.
"""

from __future__ import annotations

import calendar
import contextlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, NoReturn

import yaml

from numaplane_harness.busyboximage import BUSYBOX_IMAGE
from numaplane_harness.containerd import ContainerdInstance, containerd_unavailable_reason
from numaplane_harness.hostcleanup import cgroup_dirs, kill_cgroup_members, unmount_under
from numaplane_harness.kubecluster import ApiStatus, ControlPlane, free_port, kubeconfig
from numaplane_harness.machineoverlay import MachineOverlay
from numaplane_harness.processes import terminate_process
from numaplane_harness.unavailable import component_unavailable

__all__ = [
    "MANAGERS_OFF",
    "STATIC_MANAGERS",
    "KubeletPolicy",
    "KubeletStartError",
    "KubeletUnavailable",
    "RealKubelet",
    "kubelet_unavailable_reason",
    "make_kubelet_fixture",
    "run_kubelet",
]

CGROUP_ROOT = Path("/sys/fs/cgroup")
CONTAINER_LOGS = Path("/var/log/containers")
#: The device manager's socket folder is fixed (``pluginapi.DevicePluginPath``), whatever ``--root-dir``.
DEVICE_PLUGINS = Path("/var/lib/kubelet/device-plugins")
POD_LOGS = Path("/var/log/pods")
#: Kernel tunables the kubelet sets at start (``setupKernelTunables``), restored afterwards.
KERNEL_TUNABLES = ("vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops")
#: The kubelet's default hard eviction threshold for memory; Memory Manager ``Static`` needs
#: ``reservedMemory`` to add up to it (no kube- or system-reserved memory here).
EVICTION_MEMORY = "100Mi"


class KubeletUnavailable(Exception):
    """This machine cannot run the real kubelet; the message says why."""


class KubeletStartError(Exception):
    """The kubelet was started but did not become a Ready node; the message holds its log's tail.

    Not a reason to skip: on a machine that can run it, this is a failure to look at.
    """


@dataclass(frozen=True)
class KubeletPolicy:
    """The resource-manager part of the ``KubeletConfiguration``.

    ``reserved_memory`` maps NUMA node to bytes-quantity of ``memory``; with the ``Static`` memory
    policy it must add up to the eviction threshold (``EVICTION_MEMORY``), which the default does.
    """

    cpu_manager_policy: str = "static"  # static | none
    reserved_system_cpus: str = "0"
    cpu_manager_policy_options: Mapping[str, str] = field(default_factory=dict)
    memory_manager_policy: str = "None"  # Static | None
    reserved_memory: Mapping[int, str] = field(default_factory=lambda: {0: EVICTION_MEMORY})
    topology_manager_policy: str = "none"  # none | best-effort | restricted | single-numa-node
    topology_manager_scope: str = "container"
    #: ``featureGates`` of the KubeletConfiguration (e.g. the CPU manager's alpha/beta options)
    feature_gates: Mapping[str, bool] = field(default_factory=dict)

    def config(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "cpuManagerPolicy": self.cpu_manager_policy,
            "memoryManagerPolicy": self.memory_manager_policy,
            "topologyManagerPolicy": self.topology_manager_policy,
            "topologyManagerScope": self.topology_manager_scope,
            # Shared-pool changes reach running containers within a second or two.
            "cpuManagerReconcilePeriod": "1s",
        }
        if self.feature_gates:
            doc["featureGates"] = dict(self.feature_gates)
        if self.reserved_system_cpus:
            # also with the CPU manager off: node allocatable CPU leaves the reserved CPUs out
            doc["reservedSystemCPUs"] = self.reserved_system_cpus
        if self.cpu_manager_policy == "static" and self.cpu_manager_policy_options:
            doc["cpuManagerPolicyOptions"] = dict(self.cpu_manager_policy_options)
        if self.memory_manager_policy == "Static":
            doc["reservedMemory"] = [
                {"numaNode": node, "limits": {"memory": amount}}
                for node, amount in sorted(self.reserved_memory.items())
            ]
        return doc


#: The kubelet's own NUMA-aware managers, as users run them: the static CPU manager (CPU 0 reserved), the
#: Static memory manager and the single-numa-node topology policy.
STATIC_MANAGERS = KubeletPolicy(
    cpu_manager_policy="static",
    reserved_system_cpus="0",
    memory_manager_policy="Static",
    topology_manager_policy="single-numa-node",
)
#: The managers off, for ``numaplane agent`` to enforce the same policy. The kubelet still reserves CPU 0
#: (reservedSystemCPUs), as the agent's policy does, so node allocatable CPU is the same as under
#: :data:`STATIC_MANAGERS`.
MANAGERS_OFF = KubeletPolicy(
    cpu_manager_policy="none", reserved_system_cpus="0", memory_manager_policy="None", topology_manager_policy="none"
)


def kubelet_unavailable_reason() -> str | None:
    """Why this machine cannot run the real kubelet, or None if it can (downloads aside)."""
    reason = containerd_unavailable_reason()
    if reason:
        return reason
    if not (CGROUP_ROOT / "cpuset" / "cpuset.cpus").exists() and not (CGROUP_ROOT / "cgroup.controllers").exists():
        return "no cgroup hierarchy the kubelet can manage"
    return None


def _read_tunables() -> dict[str, str]:
    values = {}
    for name in KERNEL_TUNABLES:
        with contextlib.suppress(OSError):
            values[name] = (Path("/proc/sys") / name).read_text().strip()
    return values


def _restore_tunables(values: Mapping[str, str]) -> None:
    for name, value in values.items():
        path = Path("/proc/sys") / name
        with contextlib.suppress(OSError):
            if path.read_text().strip() != value:
                path.write_text(value + "\n")


def _v1_hierarchies() -> list[Path]:
    if not CGROUP_ROOT.is_dir() or (CGROUP_ROOT / "cgroup.controllers").exists():
        return [CGROUP_ROOT]
    return [p for p in CGROUP_ROOT.iterdir() if p.is_dir() and not p.is_symlink() and p.name != "unified"]


def _make_cgroup_root(name: str) -> None:
    """Create ``name`` in every hierarchy (the kubelet checks that its cgroupRoot exists); on cgroup v1
    a new cpuset cgroup starts with no CPUs and no memory nodes, so copy its parent's."""
    for hierarchy in _v1_hierarchies():
        path = hierarchy / name.strip("/")
        path.mkdir(parents=True, exist_ok=True)
        if hierarchy.name == "cpuset":
            for knob in ("cpuset.cpus", "cpuset.mems"):
                if not (path / knob).read_text().strip():
                    (path / knob).write_text((hierarchy / knob).read_text())


@dataclass
class RealKubelet:
    """A running kubelet registered as Node ``node_name``. Its files are all under ``workdir``."""

    control_plane: ControlPlane
    containerd: ContainerdInstance
    workdir: Path
    node_name: str
    cgroup_root: str
    policy: KubeletPolicy
    process: subprocess.Popen[bytes] | None = None
    ready_seconds: float = 0.0
    #: every start-to-Ready time of this kubelet, first start included
    ready_history: list[float] = field(default_factory=list)
    _tunables: dict[str, str] = field(default_factory=dict, repr=False)
    _starts: int = 0
    _ports: tuple[int, int] = field(default_factory=lambda: (free_port(), free_port()), repr=False)
    #: uids of the pods made through :meth:`create_pod` (their log folders are removed at the end)
    pod_uids: set[str] = field(default_factory=set, repr=False)
    #: fixed host paths the kubelet creates, with whether each existed before the first start
    _created_before: dict[Path, bool] = field(default_factory=dict, repr=False)
    #: another machine's sysfs shown to this kubelet only (its own mount namespace); None: this machine
    overlay: MachineOverlay | None = None

    # ---- paths ----

    @property
    def root_dir(self) -> Path:
        return self.workdir / "root"

    @property
    def config_file(self) -> Path:
        return self.workdir / "kubelet-config.yaml"

    @property
    def kubeconfig_file(self) -> Path:
        return self.workdir / "kubelet.kubeconfig"

    @property
    def pod_logs(self) -> Path:
        return self.workdir / "pod-logs"

    @property
    def podresources_socket(self) -> Path:
        return self.root_dir / "pod-resources" / "kubelet.sock"

    @property
    def cpu_manager_state_file(self) -> Path:
        return self.root_dir / "cpu_manager_state"

    @property
    def memory_manager_state_file(self) -> Path:
        return self.root_dir / "memory_manager_state"

    @property
    def log_path(self) -> Path:
        return self.workdir / f"kubelet-{self._starts}.log"

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def cpu_manager_state(self) -> dict[str, Any]:
        """The kubelet's ``cpu_manager_state`` checkpoint (``defaultCpuSet``, ``entries``)."""
        state: dict[str, Any] = json.loads(self.cpu_manager_state_file.read_text())
        return state

    # ---- configuration ----

    def kubelet_config(self) -> dict[str, Any]:
        """The ``KubeletConfiguration`` document this kubelet runs with."""
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "failCgroupV1": False,
            "failSwapOn": False,
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": self.cgroup_root,
            "containerRuntimeEndpoint": f"unix://{self.containerd.address}",
            "address": "127.0.0.1",
            "port": self._ports[0],
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": self._ports[1],
            "readOnlyPort": 0,
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": False},
                "x509": {"clientCAFile": str(self.control_plane.pki.ca_cert)},
            },
            "authorization": {"mode": "AlwaysAllow"},
            "podLogsDir": str(self.pod_logs),
            "volumePluginDir": str(self.workdir / "volume-plugins"),
            "resolvConf": "/etc/resolv.conf",
            "registerNode": True,
            # The test images exist only locally: never garbage-collect them.
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {
                "memory.available": EVICTION_MEMORY,
                "nodefs.available": "1%",
                "imagefs.available": "1%",
                "nodefs.inodesFree": "1%",
            },
            "nodeStatusUpdateFrequency": "2s",
            "serializeImagePulls": False,
            **self.policy.config(),
        }

    # ---- process control ----

    def start(self) -> float:
        """Start the kubelet with :attr:`policy`; return the seconds until its Node was Ready."""
        if self.process is not None:
            raise RuntimeError("kubelet already running")
        self.root_dir.mkdir(parents=True, exist_ok=True)
        self.pod_logs.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(yaml.safe_dump(self.kubelet_config(), sort_keys=True))
        self._tunables = self._tunables or _read_tunables()
        for path in (DEVICE_PLUGINS.parent, DEVICE_PLUGINS, DEVICE_PLUGINS / "kubelet.sock"):
            self._created_before.setdefault(path, path.exists())
        self._starts += 1
        command = [
            str(self.control_plane.assets / "kubelet"),
            f"--config={self.config_file}",
            f"--kubeconfig={self.kubeconfig_file}",
            f"--root-dir={self.root_dir}",
            f"--cert-dir={self.workdir / 'pki'}",
            f"--hostname-override={self.node_name}",
            "--node-ip=127.0.0.1",
            "--v=2",
        ]
        if self.overlay is not None:
            command = self.overlay.wrap(command)
        started = time.monotonic()
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self.wait_ready(since=started)
        finally:
            _restore_tunables(self._tunables)
        # The kubelet reads its file leniently after a strict failure: a misspelt field would be
        # silently ignored (it happened: podLogsDirectory for podLogsDir).
        strict = [line for line in self.log_tail(400).splitlines() if "strict decoding error" in line]
        if strict:
            raise KubeletStartError(f"the KubeletConfiguration has unknown fields: {strict[0]}")
        self.ready_seconds = time.monotonic() - started
        self.ready_history.append(self.ready_seconds)
        return self.ready_seconds

    def node_ready(self) -> bool:
        node = self.control_plane.request("GET", f"/api/v1/nodes/{self.node_name}")
        for condition in node.get("status", {}).get("conditions", []):
            if condition.get("type") == "Ready":
                return bool(condition.get("status") == "True")
        return False

    def wait_ready(self, *, since: float, timeout: float = 120) -> None:
        """Until the Node is Ready *and* reports a heartbeat newer than ``since`` (a restart)."""
        wall_since = time.time() - (time.monotonic() - since)
        deadline = time.monotonic() + timeout
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise KubeletStartError(f"kubelet exited with {self.process.returncode}:\n{self.log_tail()}")
            with contextlib.suppress(ApiStatus, OSError):
                node = self.control_plane.request("GET", f"/api/v1/nodes/{self.node_name}")
                for condition in node.get("status", {}).get("conditions", []):
                    if condition.get("type") != "Ready" or condition.get("status") != "True":
                        continue
                    # lastHeartbeatTime: UTC, 1 s resolution
                    beat = calendar.timegm(time.strptime(condition["lastHeartbeatTime"], "%Y-%m-%dT%H:%M:%SZ"))
                    # (a restarted kubelet's Node is still Ready from before: only a newer beat counts)
                    if beat >= math.ceil(wall_since) and self.podresources_socket.exists():
                        return
            if time.monotonic() > deadline:
                raise KubeletStartError(f"kubelet's Node not Ready in {timeout} s:\n{self.log_tail()}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.process is not None:
            terminate_process(self.process, 20)
            self.process = None
        self.podresources_socket.unlink(missing_ok=True)  # the next start's readiness waits for a new one

    def restart(self, policy: KubeletPolicy | None = None) -> float:
        """Delete the node's pods, stop, forget the managers' checkpoints, start; seconds to Ready.

        The pods go first: a kubelet started with another CPU or memory policy would otherwise adopt
        containers pinned under the old one, and its checkpoints must go (it refuses a state file
        written by another policy).
        """
        if self.process is not None:
            self.delete_pods()
        self.stop()
        if policy is not None:
            self.policy = policy
        for state in (self.cpu_manager_state_file, self.memory_manager_state_file):
            state.unlink(missing_ok=True)
        return self.start()

    # ---- pods ----

    def pod_manifest(
        self,
        name: str,
        *,
        cpu: str | None = None,
        memory: str | None = None,
        limits: bool = True,
        namespace: str = "default",
        init_container: bool = False,
    ) -> dict[str, Any]:
        """A tiny busybox pod bound to this node (``hostNetwork``, no token, never pulled).

        ``cpu``/``memory`` set requests (and equal limits with ``limits``: Guaranteed); none: BestEffort.
        ``init_container``: an init container ``init`` with the same resources runs (and exits) first.
        """
        resources: dict[str, Any] = {}
        requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
        if requests:
            resources["requests"] = requests
            if limits:
                resources["limits"] = dict(requests)
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "nodeName": self.node_name,
                "hostNetwork": True,
                "dnsPolicy": "Default",
                "automountServiceAccountToken": False,
                "enableServiceLinks": False,
                "terminationGracePeriodSeconds": 1,
                "restartPolicy": "Never",
                "tolerations": [{"operator": "Exists"}],
                "containers": [
                    {
                        "name": "main",
                        "image": BUSYBOX_IMAGE,
                        "imagePullPolicy": "Never",
                        "command": ["sleep", "3600"],
                        "resources": resources,
                    }
                ],
                **(
                    {
                        "initContainers": [
                            {
                                "name": "init",
                                "image": BUSYBOX_IMAGE,
                                "imagePullPolicy": "Never",
                                "command": ["true"],
                                "resources": resources,
                            }
                        ]
                    }
                    if init_container
                    else {}
                ),
            },
        }

    def create_pod(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        namespace = manifest["metadata"].get("namespace", "default")
        created = self.control_plane.request("POST", f"/api/v1/namespaces/{namespace}/pods", manifest)
        self.pod_uids.add(str(created["metadata"]["uid"]))
        return created

    def get_pod(self, name: str, namespace: str = "default") -> dict[str, Any]:
        return self.control_plane.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")

    def wait_pod_running(self, name: str, namespace: str = "default", timeout: float = 60) -> dict[str, Any]:
        """Until every container of the pod runs; a pod that fails or cannot start raises at once."""

        seen: list[dict[str, Any]] = []

        def check() -> dict[str, Any] | None:
            pod = self.get_pod(name, namespace)
            seen[:] = [pod]
            status = pod.get("status", {})
            if status.get("phase") in ("Failed", "Succeeded"):
                raise AssertionError(f"pod {namespace}/{name} is {status.get('phase')}: {status}")
            statuses = status.get("containerStatuses") or []
            for cs in statuses:
                waiting = cs.get("state", {}).get("waiting", {})
                if waiting.get("reason") in ("CreateContainerError", "ErrImageNeverPull", "CreateContainerConfigError"):
                    raise AssertionError(f"pod {namespace}/{name}: {waiting}")
            if statuses and all("running" in cs.get("state", {}) for cs in statuses):
                return pod
            return None

        try:
            result: dict[str, Any] = self.control_plane.wait_for(
                f"pod {namespace}/{name} running", check, timeout=timeout
            )
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}\n{self.explain_pod(name, namespace, seen[0] if seen else None)}") from None
        return result

    def explain_pod(self, name: str, namespace: str, pod: dict[str, Any] | None) -> str:
        """What a test needs to see when a pod did not start: where it is bound, its conditions and
        container states, the Events about it and the kubelet's last log lines (best effort)."""
        lines: list[str] = []
        if pod is not None:
            spec, status = pod.get("spec", {}), pod.get("status", {})
            lines.append(
                f"pod {namespace}/{name}: nodeName={spec.get('nodeName')!r} schedulerName={spec.get('schedulerName')!r}"
                f" phase={status.get('phase')!r} deletionTimestamp={pod.get('metadata', {}).get('deletionTimestamp')!r}"
            )
            for cond in status.get("conditions") or []:
                lines.append(
                    f"  condition {cond.get('type')}={cond.get('status')} {cond.get('reason', '')}: {cond.get('message', '')}"
                )
            for cs in status.get("containerStatuses") or []:
                lines.append(f"  container {cs.get('name')}: {cs.get('state')}")
        try:
            events = self.control_plane.events_about(namespace, name)
        except (ApiStatus, OSError) as exc:
            lines.append(f"  events: not read ({exc})")
        else:
            for ev in events:
                lines.append(
                    f"  event {ev.get('type')} {ev.get('reason')} x{ev.get('count', 1)}"
                    f" from {(ev.get('source') or {}).get('component') or ev.get('reportingComponent')}: {ev.get('message')}"
                )
        lines.append("kubelet log tail:")
        lines.append(self.log_tail(20))
        return "\n".join(lines)

    def wait_pod_status(self, name: str, check: Any, *, namespace: str = "default", timeout: float = 60) -> Any:
        """Until ``check(pod)`` is truthy; returns its value."""
        return self.control_plane.wait_for(
            f"pod {namespace}/{name} status", lambda: check(self.get_pod(name, namespace)), timeout=timeout
        )

    def delete_pods(self, namespace: str | None = None, timeout: float = 60) -> None:
        """Delete every pod bound to this node (in ``namespace``, default all); return once the kubelet
        has removed them (containers stopped, pods gone from the API)."""
        selector = f"fieldSelector=spec.nodeName={self.node_name}"
        listing = f"/api/v1/namespaces/{namespace}/pods?{selector}" if namespace else f"/api/v1/pods?{selector}"
        for pod in self.control_plane.request("GET", listing).get("items", []):
            meta = pod["metadata"]
            with contextlib.suppress(ApiStatus):  # already gone
                self.control_plane.request("DELETE", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}")
        self.control_plane.wait_for(
            f"pods of {self.node_name} gone",
            lambda: not self.control_plane.request("GET", listing).get("items"),
            timeout=timeout,
        )

    def container_cpuset(
        self, pod: Mapping[str, Any], container: str = "main", knob: Literal["cpus", "mems"] = "cpus"
    ) -> str:
        """``cpuset.cpus`` (``knob="mems"``: ``cpuset.mems``) of the container's cgroup (the host's view of
        what it may run on; on cgroup v2 the ``.effective`` file)."""
        for cs in pod.get("status", {}).get("containerStatuses", []):
            if cs.get("name") == container and cs.get("containerID"):
                cid = str(cs["containerID"]).split("://", 1)[1]
                found = list((CGROUP_ROOT / "cpuset" / self.cgroup_root.strip("/")).rglob(f"{cid}/cpuset.{knob}"))
                if not found:
                    found = list((CGROUP_ROOT / self.cgroup_root.strip("/")).rglob(f"*{cid}*/cpuset.{knob}.effective"))
                if found:
                    return found[0].read_text().strip()
                raise AssertionError(f"no cgroup for container {cid} under {self.cgroup_root}")
        raise AssertionError(f"container {container} has no containerID yet")


def _remove_container_log_links(pod_logs: Path, pod_uids: set[str]) -> None:
    """The kubelet links ``/var/log/containers/*.log`` to the pod logs; remove only links into ours, and
    any ``/var/log/pods/<ns>_<name>_<uid>`` folder of our pods (should the kubelet not honour podLogsDir)."""
    if POD_LOGS.is_dir():
        for folder in POD_LOGS.iterdir():
            if folder.name.rsplit("_", 1)[-1] in pod_uids:
                shutil.rmtree(folder, ignore_errors=True)
    if not CONTAINER_LOGS.is_dir():
        return
    for link in CONTAINER_LOGS.iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(link) if link.is_symlink() else ""
            if target.startswith(str(pod_logs)) or any(uid in target for uid in pod_uids):
                link.unlink()


def _remove_created(existed: Mapping[Path, bool]) -> None:
    """Remove the fixed host paths the kubelet created (deepest first); leave what existed before."""
    for path in sorted(existed, key=lambda p: len(p.parts), reverse=True):
        if existed[path]:
            continue
        with contextlib.suppress(OSError):
            if path.is_socket():
                path.unlink()
            elif path.is_dir():
                path.rmdir()  # only if empty


def _write_cni_conf(containerd: ContainerdInstance) -> None:
    conf_dir = containerd.workdir / "cni" / "conf"
    conf_dir.mkdir(parents=True, exist_ok=True)
    (conf_dir / "10-numaplane-loopback.conflist").write_text(
        json.dumps({"cniVersion": "1.0.0", "name": "numaplane-test", "plugins": [{"type": "loopback"}]})
    )


def _teardown(kubelet: RealKubelet) -> None:
    cp = kubelet.control_plane
    if kubelet.process is not None:
        with contextlib.suppress(Exception):
            kubelet.delete_pods(timeout=30)
    kubelet.stop()
    with contextlib.suppress(Exception):
        cp.request("DELETE", f"/api/v1/nodes/{kubelet.node_name}")
    kubelet.containerd.remove_all_pods()
    _restore_tunables(kubelet._tunables)
    _remove_created(kubelet._created_before)
    kill_cgroup_members(kubelet.cgroup_root)
    time.sleep(0.1)
    unmount_under(kubelet.workdir)
    for d in cgroup_dirs(kubelet.cgroup_root):
        with contextlib.suppress(OSError):
            d.rmdir()
    _remove_container_log_links(kubelet.pod_logs, kubelet.pod_uids)
    shutil.rmtree(kubelet.workdir, ignore_errors=True)


@contextlib.contextmanager
def run_kubelet(
    control_plane: ControlPlane,
    containerd: ContainerdInstance,
    policy: KubeletPolicy | None = None,
    *,
    node_name: str | None = None,
    overlay: MachineOverlay | None = None,
) -> Iterator[RealKubelet]:
    """Start a kubelet (see the module docstring); yield it once its Node is Ready; clean everything up."""
    reason = kubelet_unavailable_reason()
    if reason:
        raise KubeletUnavailable(reason)
    binary = control_plane.assets / "kubelet"
    if not binary.is_file():
        raise KubeletUnavailable(f"no kubelet binary in {control_plane.assets}")
    name = node_name or f"numaplane-node-{uuid.uuid4().hex[:6]}"
    work = Path(tempfile.mkdtemp(prefix="npk-", dir="/tmp"))  # short: unix socket paths below 107 bytes
    cgroup_root = f"/numaplane-kubelet-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    kubelet = RealKubelet(
        control_plane=control_plane,
        containerd=containerd,
        workdir=work,
        node_name=name,
        cgroup_root=cgroup_root,
        policy=policy or KubeletPolicy(),
        overlay=overlay,
    )
    try:
        cert, key = control_plane.pki.client(f"system:node:{name}", ("system:nodes",))
        kubelet.kubeconfig_file.write_text(
            kubeconfig(
                control_plane.url, control_plane.pki.ca_cert, {"client-certificate": str(cert), "client-key": str(key)}
            )
        )
        _make_cgroup_root(cgroup_root)
        _write_cni_conf(containerd)
        kubelet.start()
        yield kubelet
    finally:
        _teardown(kubelet)


def with_policy(kubelet: RealKubelet, **changes: Any) -> KubeletPolicy:
    """:attr:`RealKubelet.policy` with ``changes`` (field names of :class:`KubeletPolicy`)."""
    return replace(kubelet.policy, **changes)


def make_kubelet_fixture(
    name: str = "real_kubelet",
    *,
    control_plane: str = "control_plane",
    containerd: str = "containerd",
    policy: KubeletPolicy | None = None,
    scope: Literal["session", "package", "module", "class", "function"] = "session",
) -> Any:
    """A pytest fixture (``scope``: session by default) yielding a :class:`RealKubelet` started with
    ``policy`` (default: :class:`KubeletPolicy`, the static CPU manager with CPU 0 reserved). Its Node is
    deleted when the fixture ends.

    It uses the fixtures named ``control_plane`` and ``containerd``. Skips loudly where the machine
    cannot run it; with ``NUMAPLANE_REQUIRE_KUBELET=1`` it fails instead.
    """
    import pytest

    @pytest.fixture(scope=scope, name=name)
    def kubelet_fixture(request: pytest.FixtureRequest) -> Iterator[RealKubelet]:
        def unavailable(reason: str) -> NoReturn:
            component_unavailable("a kubelet", reason, "NUMAPLANE_REQUIRE_KUBELET")

        reason = kubelet_unavailable_reason()
        if reason:
            unavailable(reason)
        plane: ControlPlane = request.getfixturevalue(control_plane)
        runtime: ContainerdInstance = request.getfixturevalue(containerd)
        try:
            with run_kubelet(plane, runtime, policy) as kubelet:
                print(f"\nreal kubelet {kubelet.node_name} Ready in {kubelet.ready_seconds:.1f} s", file=sys.stderr)
                yield kubelet
        except KubeletUnavailable as exc:
            unavailable(str(exc))

    return kubelet_fixture
