"""``numaplane agent`` enforcing through NRI on a real kubelet v1.36.2 (issue 12, 2f second half).

E2E-node compatibility: one pod sequence (Guaranteed with one CPU, Burstable, BestEffort, the
Guaranteed pod deleted, another one, deleted too, a Guaranteed pod with an init container) runs twice
on the same real node:

1. the kubelet's own managers: static CPU manager (CPU 0 reserved), Static memory manager,
   single-numa-node topology policy — the kubelet writes the cpusets;
2. the kubelet's managers off (``cpuManagerPolicy: none``, memory ``None``, topology ``none``) and
   ``numaplane agent`` deployed as the operator deploys it: the args, ServiceAccount, RBAC and policy
   ConfigMap that ``numaplane render --from`` prints for an agent-mode node group with the same policy
   (``--watch-pods`` with the agent's ServiceAccount token, never admin; ``POD_NAME``/``POD_NAMESPACE``
   of a stand-in pod for the DaemonSet's, on which it reports the policy revision) — the agent writes them.

After every step each running container's ``cpuset.cpus`` (read from its cgroup on the host) must equal
what the kubelet's static policy chose at that step. Then the agent-mode group's exporter (rendered
args, its own ServiceAccount) publishes the agent's allocations from the agent's PodResources socket,
and a deletion reaches the NRT through the agent's notify file, long before the 60 s period.

The Guaranteed pods carry a memory request, so the second run also proves issue 12 defect 2 fixed: with
the Static memory policy and ``--watch-pods`` the agent used to refuse every Guaranteed pod (the kubelet
posts a ``ContainerCreating`` status without ``allocatedResources``, and the memory policy read its
requests from there).

The agent's command-line defects of issue 12 (defect 6) are checked on the same node's NRI socket:
a busy metrics/health port is a one-line error with exit status 1, ``--pod-name`` without
``--watch-pods`` a usage error.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from node_helpers import CLI, REPO, ensure_nrt_crd, get_nrt, numaplane, render, wait_http_ready

from numaplane.grpcapi.podresources.client import PodResourcesClient
from numaplane.nrt.fingerprint import ANNOTATION, compute_fingerprint
from numaplane.nrt.podresources import PodResources
from numaplane_harness.containerd import ContainerdInstance
from numaplane_harness.kubecluster import ControlPlane, free_port
from numaplane_harness.kubelet import MANAGERS_OFF as KUBELET_OFF
from numaplane_harness.kubelet import STATIC_MANAGERS as KUBELET_STATIC
from numaplane_harness.kubelet import KubeletPolicy, RealKubelet

pytestmark = pytest.mark.timeout(420)

#: The same policy as KUBELET_STATIC, as a NodeResourcePolicy for an agent-mode node group.
CUSTOM_RESOURCES = """
apiVersion: numaplane.io/v1
kind: NUMAResourcesOperator
metadata: {name: numaresourcesoperator}
spec:
  nodeGroups:
  - name: realnode
    nodeSelector: {matchLabels: {numaplane.io/node-group: realnode}}
    enforcement: agent
    # events: the agent touches the notify file, the exporter republishes at once (60 s is a fallback)
    config: {infoRefreshMode: PeriodicAndEvents, infoRefreshPeriod: 60s}
---
apiVersion: numaplane.io/v1
kind: NodeResourcePolicy
metadata: {name: realnode}
spec:
  nodeGroup: realnode
  config:
    topologyManager: {policy: single-numa-node}
    cpuManager: {policy: static, reservedCPUs: "0"}
    memoryManager:
      policy: Static
      reservedMemory: [{numaNode: 0, limits: {memory: 100Mi}}]
"""

Step = tuple[str, str, dict[str, Any]]
#: (action, pod, pod_manifest kwargs) and, after it, the cpuset of every running pod under the
#: kubelet's static policy (2 CPUs, CPU 0 reserved: CPU 1 is the only exclusive one; the shared pool
#: is every CPU not held exclusively, reserved CPU included). The node's allocatable CPU is 1 (the
#: reserved CPU is subtracted), all of it taken by a Guaranteed pod: the Burstable pod asks for memory only.
SEQUENCE: list[tuple[Step, dict[str, str]]] = [
    (("create", "seq-g1", {"cpu": "1", "memory": "64Mi"}), {"seq-g1": "1"}),
    (("create", "seq-bu", {"memory": "32Mi", "limits": False}), {"seq-g1": "1", "seq-bu": "0"}),
    (("create", "seq-be", {}), {"seq-g1": "1", "seq-bu": "0", "seq-be": "0"}),
    (("delete", "seq-g1", {}), {"seq-bu": "0-1", "seq-be": "0-1"}),
    (("create", "seq-g2", {"cpu": "1", "memory": "64Mi"}), {"seq-g2": "1", "seq-bu": "0", "seq-be": "0"}),
    (("delete", "seq-g2", {}), {"seq-bu": "0-1", "seq-be": "0-1"}),
    # the init container holds CPU 1 while it runs; the app container reuses it (kubelet: reusable CPUs)
    (
        ("create", "seq-init", {"cpu": "1", "memory": "64Mi", "init_container": True}),
        {"seq-init": "1", "seq-bu": "0", "seq-be": "0"},
    ),
    # no exclusive CPU left: refused at the kubelet's admission, before any container exists — by its
    # topology manager (which admits before the resource fit check does); see AGENT_REFUSAL
    (
        ("refused", "seq-over", {"cpu": "1", "memory": "64Mi"}),
        {"seq-over": "refused: TopologyAffinityError", "seq-init": "1", "seq-bu": "0", "seq-be": "0"},
    ),
]
#: The one difference the architecture imposes: the agent acts at CreateContainer, never at the
#: kubelet's admission, so with the kubelet's managers off the same pod is refused up front by the
#: kubelet's resource fit check (allocatable CPU excludes the reserved CPU, see KUBELET_OFF) instead.
AGENT_REFUSAL = {"refused: TopologyAffinityError": "refused: OutOfcpu"}

#: The other difference, on containerd 1.7 (docs/agent.md, "The agent never wedges the runtime"): the
#: agent never calls Runtime.UpdateContainers there, so the CPUs a deleted pod frees reach the shared
#: containers with the runtime's next answered request, not at once as the kubelet's reconcile does:
#: after a deletion the shared pods keep the cpusets they had before it.
OWED_AFTER_DELETE = frozenset(index for index, ((action, _, _), _) in enumerate(SEQUENCE) if action == "delete")

#: the Guaranteed pod running at the end of the sequence
LAST = "seq-init"


def observe(kubelet: RealKubelet, names: list[str]) -> dict[str, str]:
    """Each pod's ``main`` cpuset, or ``refused: <reason>`` for a pod the kubelet failed."""
    out = {}
    for name in names:
        pod = kubelet.get_pod(name)
        if pod["status"].get("phase") == "Failed":
            out[name] = f"refused: {pod['status'].get('reason')}"
        else:
            out[name] = kubelet.container_cpuset(pod)
    return out


def run_sequence(kubelet: RealKubelet, expected: list[dict[str, str]], what: str) -> list[dict[str, str]]:
    """Run :data:`SEQUENCE`; after each step wait (deadline) until the cpusets are ``expected[i]``."""
    seen: list[dict[str, str]] = []
    for index, ((action, name, kwargs), _) in enumerate(SEQUENCE):
        if action == "create":
            kubelet.create_pod(kubelet.pod_manifest(name, **kwargs))
            kubelet.wait_pod_running(name)
        elif action == "refused":
            kubelet.create_pod(kubelet.pod_manifest(name, **kwargs))
            kubelet.wait_pod_status(name, lambda pod: pod["status"].get("phase") == "Failed")
        else:
            kubelet.control_plane.request("DELETE", f"/api/v1/namespaces/default/pods/{name}")
            kubelet.control_plane.wait_for(
                f"pod {name} gone",
                lambda n=name: (
                    not [
                        p
                        for p in kubelet.control_plane.request("GET", "/api/v1/namespaces/default/pods")["items"]
                        if p["metadata"]["name"] == n
                    ]
                ),
                timeout=60,
            )
        want = expected[index]
        last: dict[str, str] = {}

        def settled(want: dict[str, str] = want) -> bool:
            nonlocal last
            last = observe(kubelet, sorted(want))
            return last == want

        try:
            kubelet.control_plane.wait_for(f"{what}: cpusets after {action} {name}", settled, timeout=30)
        except TimeoutError:
            raise AssertionError(f"{what}, step {index} ({action} {name}): cpusets {last}, expected {want}") from None
        seen.append(last)
    return seen


def as_the_agent_refuses(steps: list[dict[str, str]]) -> list[dict[str, str]]:
    """The kubelet's cpusets as the agent gives them: its refusals (:data:`AGENT_REFUSAL`), and after a
    deletion the shared pods' cpusets of the step before (:data:`OWED_AFTER_DELETE`)."""
    out: list[dict[str, str]] = []
    for index, step in enumerate(steps):
        seen = {name: AGENT_REFUSAL.get(value, value) for name, value in step.items()}
        if index in OWED_AFTER_DELETE and index > 0:
            seen = {name: out[index - 1].get(name, value) for name, value in seen.items()}
        out.append(seen)
    return out


def deploy_agent_rbac(cp: ControlPlane, docs: list[dict[str, Any]]) -> None:
    """Namespace, ServiceAccounts and RBAC exactly as rendered (workloads are run by the test itself)."""
    kinds = ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
    wanted = sorted((d for d in docs if d["kind"] in kinds), key=lambda d: kinds.index(d["kind"]))
    got = cp.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",  # cluster-scoped RBAC of the same names is applied by other tests of the session
        "--field-manager=numaplane-test",
        "-f",
        "-",
        stdin=yaml.safe_dump_all(wanted),
    )
    assert got.returncode == 0, got.stderr


def rendered_command(docs: list[dict[str, Any]], component: str, replace: dict[str, str]) -> list[str]:
    """The args of the rendered ``numaplane-<component>`` DaemonSet, with ``replace[flag]`` as the value
    of each ``flag`` (the node's paths in place of the pod's mounts); every such flag must be there."""
    [daemonset] = [
        d for d in docs if d["kind"] == "DaemonSet" and d["metadata"]["name"].startswith(f"numaplane-{component}")
    ]
    [container] = daemonset["spec"]["template"]["spec"]["containers"]
    args = []
    for arg in container["args"]:
        flag, sep, _ = arg.partition("=")
        args.append(f"{flag}={replace[flag]}" if sep and flag in replace else arg)
    missing = [flag for flag in replace if not any(a.startswith(flag + "=") for a in args)]
    assert not missing, (component, missing, args)
    return args


def agent_command(
    docs: list[dict[str, Any]], kubelet: RealKubelet, folder: Path, kubeconfig: Path, port: int
) -> list[str]:
    """The rendered agent DaemonSet's command line on this node (policy: the rendered ConfigMap's)."""
    [configmap] = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("numaplane-policy")]
    (folder / "config.yaml").write_text(configmap["data"]["config.yaml"])
    args = rendered_command(
        docs,
        "agent",
        {
            "--node-name": kubelet.node_name,
            "--config": str(folder / "config.yaml"),
            "--nri-socket": kubelet.containerd.nri_socket,
            "--state-dir": str(folder / "state"),
            "--podresources-socket": str(folder / "podres.sock"),
            "--plugin-dir": str(folder / "plugins"),
            "--notify-file": str(folder / "notify"),
            "--applied-policy-file": str(folder / "applied-policy.json"),
            "--kubelet-config": str(kubelet.config_file),
            "--sysfs-root": "/",
            "--metrics-address": f"127.0.0.1:{port}",
            "--health-address": f"127.0.0.1:{port}",
        },
    )
    assert "--watch-pods" in args
    return [*args, f"--kubeconfig={kubeconfig}", "--log-format=console"]


def exporter_command(
    docs: list[dict[str, Any]], kubelet: RealKubelet, folder: Path, kubeconfig: Path, port: int
) -> list[str]:
    """The rendered exporter DaemonSet of the agent-mode group: it reads the agent's PodResources."""
    args = rendered_command(
        docs,
        "exporter",
        {
            "--node-name": kubelet.node_name,
            "--sysfs-root": "/",
            "--podresources-socket": f"unix://{folder / 'podres.sock'}",
            "--notify-file": str(folder / "notify"),
            "--applied-policy-file": str(folder / "applied-policy.json"),
            "--lock-file": str(folder / "exporter.lock"),
            "--metrics-address": f"127.0.0.1:{port}",
            "--health-address": f"127.0.0.1:{port}",
        },
    )
    return [*args, f"--kubeconfig={kubeconfig}", "--log-format=console"]


def podresources(socket_path: Path) -> tuple[PodResources, ...]:
    async def go() -> tuple[PodResources, ...]:
        async with PodResourcesClient(str(socket_path), timeout_seconds=5) as client:
            return await client.list()

    return asyncio.run(go())


def test_agent_cpusets_equal_the_kubelet_static_policy(
    control_plane: ControlPlane, real_kubelet: RealKubelet, short_tmp: Path
) -> None:
    began = time.monotonic()
    kubelet = real_kubelet
    expected = [want for _, want in SEQUENCE]

    # 1. the kubelet decides
    kubelet.delete_pods()
    if kubelet.policy != KUBELET_STATIC:
        kubelet.restart(KUBELET_STATIC)
    by_kubelet = run_sequence(kubelet, expected, "kubelet static policy")
    state = kubelet.cpu_manager_state()
    last_uid = kubelet.get_pod(LAST)["metadata"]["uid"]
    assert list(state["entries"]) == [last_uid], state
    assert state["entries"][last_uid]["main"] == "1", state
    assert state["defaultCpuSet"] == "0"
    kubelet.delete_pods()
    first = time.monotonic() - began

    # 2. the kubelet's managers off, numaplane agent as the operator deploys it
    ready_off = kubelet.restart(KUBELET_OFF)
    with deployed_agent(control_plane, kubelet, short_tmp, report_on="numaplane-agent-realnode-x1") as agent:
        check_policy_reported(kubelet, agent)
        try:
            by_agent = run_sequence(kubelet, as_the_agent_refuses(by_kubelet), "numaplane agent")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nagent log:\n{agent.log_tail()}") from None
        assert "node allocatable cpu" not in agent.log.read_text()  # the kubelet reserves CPU 0 too
        # the agent's PodResources: the last pod holds CPU 1 and a memory block on NUMA node 0 (defect 2)
        listed = {p.name: p for p in podresources(short_tmp / "podres.sock")}
        [main] = [c for c in listed[LAST].containers if c.name == "main"]
        assert main.cpu_ids == (1,)
        assert [(b.memory_type, b.size_bytes, b.numa_nodes) for b in main.memory] == [("memory", 64 << 20, (0,))]
        exporter_seconds = check_exporter_on_the_agent(control_plane, kubelet, agent.docs, agent.namespace, short_tmp)
        kubelet.delete_pods()
    assert by_agent == as_the_agent_refuses(by_kubelet)
    # the kubelet with its managers off wrote no CPU assignment of its own
    assert kubelet.cpu_manager_state()["policyName"] == "none"
    print(
        f"\ntest duration {time.monotonic() - began:.1f} s (kubelet run {first:.1f} s); "
        f"kubelet Ready after restarts {kubelet.ready_history} (managers off: {ready_off:.1f} s); "
        f"cpusets per step {by_kubelet}; exporter republished after an event in {exporter_seconds:.1f} s"
    )


@dataclass
class DeployedAgent:
    process: subprocess.Popen[bytes]
    log: Path
    docs: list[dict[str, Any]]
    namespace: str
    pod: str | None

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-5000:]


@contextlib.contextmanager
def deployed_agent(
    cp: ControlPlane, kubelet: RealKubelet, folder: Path, *, report_on: str | None = None
) -> Iterator[DeployedAgent]:
    """``numaplane agent`` as :data:`CUSTOM_RESOURCES` render it, ready (NRI synchronized).

    ``report_on``: a stand-in for the DaemonSet's pod, created first (the agent adopts its container at
    Synchronize, as a real agent pod's), named to the agent by ``POD_NAME``/``POD_NAMESPACE``.
    """
    docs = _render_custom_resources(folder)
    deploy_agent_rbac(cp, docs)
    namespace = next(  # the agent's: where its ServiceAccount is (the node namespace)
        d["metadata"]["namespace"]
        for d in docs
        if d["kind"] == "ServiceAccount" and d["metadata"]["name"] == "numaplane-agent"
    )
    kubeconfig = cp.service_account_kubeconfig(namespace, "numaplane-agent")
    env = {}
    if report_on:
        manifest = kubelet.pod_manifest(report_on, namespace=namespace)
        manifest["spec"]["serviceAccountName"] = "numaplane-agent"  # the agent's token is bound to its pod
        kubelet.create_pod(manifest)
        kubelet.wait_pod_running(report_on, namespace)
        env = {"POD_NAME": report_on, "POD_NAMESPACE": namespace}
        # as the kubelet mounts it: bound to the pod (the install's admission policy, issue 25 item 13)
        kubeconfig = cp.service_account_kubeconfig(namespace, "numaplane-agent", pod=report_on)
    port = free_port()
    log = folder / "agent.log"
    with numaplane(agent_command(docs, kubelet, folder, kubeconfig, port), log, env) as process:
        wait_http_ready(process, port, log)
        yield DeployedAgent(process, log, docs, namespace, report_on)


def check_policy_reported(kubelet: RealKubelet, agent: DeployedAgent) -> None:
    """The agent (its ServiceAccount's RBAC) writes ``numaplane.io/PolicyApplied`` on its pod, with the
    rendered policy's revision, next to the kubelet's own conditions."""
    assert agent.pod is not None
    docs, pod, namespace, log = agent.docs, agent.pod, agent.namespace, agent.log
    [configmap] = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("numaplane-policy")]
    revision = configmap["metadata"]["annotations"]["numaplane.io/policy-revision"]

    def reported(doc: dict[str, Any]) -> dict[str, Any] | None:
        for condition in doc.get("status", {}).get("conditions", []):
            if condition["type"] == "numaplane.io/PolicyApplied":
                return dict(condition)
        return None

    try:
        condition = kubelet.wait_pod_status(pod, reported, namespace=namespace, timeout=30)
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\nagent log:\n{log.read_text(errors='replace')[-4000:]}") from None
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "True",
        "Applied",
        f"revision {revision}",
    )
    kinds = {c["type"] for c in kubelet.get_pod(pod, namespace)["status"]["conditions"]}
    assert {"Ready", "ContainersReady", "PodScheduled"} <= kinds, kinds


def check_exporter_on_the_agent(
    cp: ControlPlane, kubelet: RealKubelet, docs: list[dict[str, Any]], namespace: str, folder: Path
) -> float:
    """The agent-mode group's exporter, under its own ServiceAccount, publishes the agent's allocations
    (the last pod holds CPU 1, 64Mi on node 0); deleting it reaches the NRT through the agent's notify
    file well before the 60 s period. Returns the seconds from the deletion to the new NRT."""
    ensure_nrt_crd(cp)
    # as the kubelet mounts it: bound to a pod on this node (the install's admission policy lets the
    # exporter write only the NRT of the node its token names, issue 25 item 13). A BestEffort stand-in
    # for the DaemonSet's pod: no exclusive resources, so neither the zones nor the fingerprint see it.
    stand_in = "numaplane-exporter-realnode-x1"
    manifest = kubelet.pod_manifest(stand_in, namespace=namespace)
    manifest["spec"]["serviceAccountName"] = "numaplane-exporter"
    kubelet.create_pod(manifest)
    kubelet.wait_pod_running(stand_in, namespace)
    kubeconfig = cp.service_account_kubeconfig(namespace, "numaplane-exporter", pod=stand_in)
    port = free_port()
    log = folder / "exporter.log"
    last = compute_fingerprint([("default", LAST)])

    def zone_cpu(nrt: dict[str, Any] | None) -> tuple[int, int, int] | None:
        for zone in (nrt or {}).get("zones", []):
            for row in zone.get("resources", []):
                if zone["name"] == "node-0" and row["name"] == "cpu":
                    return int(row["capacity"]), int(row["allocatable"]), int(row["available"])
        return None

    def memory_taken(nrt: dict[str, Any]) -> int:
        for zone in nrt.get("zones", []):
            for row in zone.get("resources", []):
                if zone["name"] == "node-0" and row["name"] == "memory":
                    return int(row["allocatable"]) - int(row["available"])
        raise AssertionError(f"no memory row in {nrt}")

    def fingerprint(nrt: dict[str, Any] | None) -> str | None:
        return (nrt or {}).get("metadata", {}).get("annotations", {}).get(ANNOTATION)

    with numaplane(exporter_command(docs, kubelet, folder, kubeconfig, port), log) as exporter:
        wait_http_ready(exporter, port, log)
        try:
            nrt = cp.wait_for(
                "NRT of the agent's allocations",
                lambda: (
                    (n := get_nrt(cp, kubelet.node_name)) and zone_cpu(n) == (2, 1, 0) and fingerprint(n) == last and n
                ),
                timeout=60,
            )
            assert memory_taken(nrt) == 64 << 20
            cp.request("DELETE", f"/api/v1/namespaces/default/pods/{LAST}")
            deleted = time.monotonic()
            cp.wait_for(
                f"NRT after {LAST} went",
                lambda: (n := get_nrt(cp, kubelet.node_name)) and zone_cpu(n) == (2, 1, 1) and fingerprint(n) != last,
                timeout=30,
            )
            return time.monotonic() - deleted
        except (TimeoutError, AssertionError) as exc:
            raise AssertionError(
                f"{exc}\nNRT: {get_nrt(cp, kubelet.node_name)}\nexporter log:\n{log.read_text(errors='replace')[-4000:]}"
            ) from None


def test_a_policy_change_reaches_the_nrt_without_an_exporter_restart(
    control_plane: ControlPlane, real_kubelet: RealKubelet, short_tmp: Path
) -> None:
    """Issue 23 item 2, agent mode: the NRT's Topology Manager attributes are the policy the agent
    enforces now. The agent and the exporter run with the args ``numaplane render`` gives them; the
    policy ConfigMap's file changes (single-numa-node/container → restricted/pod, as the operator
    writes a new NodeResourcePolicy revision); the agent applies it live and the same exporter
    process publishes it. On the old main the exporter's policy was a rendered flag: unchanged until
    the exporter pod was rolled."""
    kubelet = real_kubelet
    kubelet.delete_pods()
    if kubelet.policy != KUBELET_OFF:
        kubelet.restart(KUBELET_OFF)
    ensure_nrt_crd(control_plane)
    with deployed_agent(control_plane, kubelet, short_tmp) as agent:
        kubeconfig = control_plane.service_account_kubeconfig(agent.namespace, "numaplane-exporter")
        port = free_port()
        log = short_tmp / "exporter.log"

        def attributes() -> dict[str, str]:
            nrt = get_nrt(control_plane, kubelet.node_name) or {}
            return {a["name"]: a["value"] for a in nrt.get("attributes", [])}

        def policy_is(policy: str, scope: str) -> bool:
            got = attributes()
            return got.get("topologyManagerPolicy") == policy and got.get("topologyManagerScope") == scope

        command = exporter_command(agent.docs, kubelet, short_tmp, kubeconfig, port)
        assert not [a for a in command if a.startswith("--topology-manager-")], command
        with numaplane(command, log) as exporter:
            wait_http_ready(exporter, port, log)
            try:
                control_plane.wait_for(
                    "NRT with the rendered policy", lambda: policy_is("single-numa-node", "container"), timeout=60
                )
                config = short_tmp / "config.yaml"
                document = yaml.safe_load(config.read_text())
                document["topologyManager"] = {"policy": "restricted", "scope": "pod"}
                document["metadata"]["revision"] = "changed-1"
                config.write_text(yaml.safe_dump(document))
                changed = time.monotonic()
                control_plane.wait_for("NRT with the new policy", lambda: policy_is("restricted", "pod"), timeout=30)
                took = time.monotonic() - changed
            except (TimeoutError, AssertionError) as exc:
                raise AssertionError(
                    f"{exc}\nNRT attributes {attributes()}\nexporter log:\n{log.read_text(errors='replace')[-3000:]}"
                    f"\nagent log:\n{agent.log_tail()}"
                ) from None
            assert exporter.poll() is None and agent.process.poll() is None  # neither restarted
    print(f"\npolicy ConfigMap file changed → NRT attributes changed: {took:.2f} s (agent config poll 1 s)")
    assert took < 10, took


def test_agent_warns_when_the_kubelet_does_not_reserve_its_cpus(
    control_plane: ControlPlane, real_kubelet: RealKubelet, short_tmp: Path
) -> None:
    """Found on the real node: with the kubelet's managers off and *no* kubelet CPU reservation, node
    allocatable CPU is 2, so the kubelet admits a second Guaranteed 1-CPU pod that the agent (CPU 0
    reserved) cannot pin — it loops in CreateContainerError instead of being refused (OutOfcpu) as
    under the kubelet's static policy. The agent now says so at start."""
    began = time.monotonic()
    kubelet = real_kubelet
    kubelet.restart(KubeletPolicy(cpu_manager_policy="none", reserved_system_cpus="", memory_manager_policy="None"))
    node = control_plane.request("GET", f"/api/v1/nodes/{kubelet.node_name}")
    assert node["status"]["allocatable"]["cpu"] == "2"
    with deployed_agent(control_plane, kubelet, short_tmp) as agent:
        warning = control_plane.wait_for(
            "the agent's allocatable warning",
            lambda: [line for line in agent.log.read_text().splitlines() if "node allocatable cpu is 2000m" in line],
            timeout=20,
        )
        assert "warning" in warning[0] and "reservedSystemCPUs" in warning[0]
        # what the warning is about
        kubelet.create_pod(kubelet.pod_manifest("over-a", cpu="1", memory="64Mi"))
        assert kubelet.container_cpuset(kubelet.wait_pod_running("over-a")) == "1"
        kubelet.create_pod(kubelet.pod_manifest("over-b", cpu="1", memory="64Mi"))

        def stuck(pod: dict[str, Any]) -> str | None:
            for cs in pod["status"].get("containerStatuses") or []:
                waiting = cs.get("state", {}).get("waiting", {})
                if waiting.get("reason") == "CreateContainerError":
                    return str(waiting.get("message"))
            return None

        message = kubelet.wait_pod_status("over-b", stuck, timeout=30)
        assert "TopologyAffinityError" in message
        kubelet.delete_pods()
    print(f"\ntest duration {time.monotonic() - began:.1f} s")


def _render_custom_resources(folder: Path) -> list[dict[str, Any]]:
    path = folder / "custom-resources.yaml"
    path.write_text(CUSTOM_RESOURCES)
    return render("--from", str(path))


# ---- issue 12 defect 6: the agent's command line ----------------------------------------------------


def _agent(args: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "agent", *args], capture_output=True, text=True, timeout=timeout, cwd=REPO, check=False
    )


def test_agent_port_in_use_is_one_line_and_exit_1(kubelet_containerd: ContainerdInstance, short_tmp: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        got = _agent(
            [
                f"--nri-socket={kubelet_containerd.nri_socket}",
                f"--state-dir={short_tmp / 'state'}",
                f"--podresources-socket={short_tmp / 'podres.sock'}",
                "--sysfs-root=/",
                "--node-name=busy-port",
                f"--metrics-address=127.0.0.1:{port}",
                f"--health-address=127.0.0.1:{free_port()}",
                "--log-level=error",
            ]
        )
    assert got.returncode == 1, (got.returncode, got.stderr)
    assert "Traceback" not in got.stderr
    [line] = got.stderr.strip().splitlines()
    assert line.startswith(f"Error: cannot listen on 127.0.0.1:{port}: "), line
    assert "in use" in line


def test_agent_pod_name_without_watch_pods_is_refused(kubelet_containerd: ContainerdInstance, short_tmp: Path) -> None:
    got = _agent([f"--nri-socket={kubelet_containerd.nri_socket}", "--pod-name=agent-x", "--pod-namespace=ns"])
    assert got.returncode == 2, (got.returncode, got.stderr)
    assert "--pod-name and --pod-namespace need --watch-pods" in got.stderr
    assert "Traceback" not in got.stderr
