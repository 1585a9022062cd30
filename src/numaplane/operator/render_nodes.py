"""Node-side objects of a ``NUMAResourcesOperator``: exporter and agent DaemonSets and what they need.

Every namespaced object here lives in the node namespace (``Settings.node_namespace``, default
``numaplane-node``, Pod Security ``privileged``), never in the install namespace (``restricted``).

Per node group ``<g>``: DaemonSet ``numaplane-exporter-<g>``; in ``agent`` mode also DaemonSet
``numaplane-agent-<g>`` and ConfigMap ``numaplane-policy-<g>`` (the agents' config document, from
the group's ``NodeResourcePolicy`` or the default). Shared: service accounts, RBAC, a network policy
and a metrics Service per component.

Command-line contract with the components (one image, ``ENTRYPOINT numaplane``):

``numaplane exporter`` (its real CLI) — ``--node-name`` (from the downward API), ``--sysfs-root``
(the folder holding ``sys/``), ``--podresources-socket unix://...``, ``--kubelet-config`` (kubelet
mode) or ``--applied-policy-file`` (agent mode: the file the agent rewrites with the policy it
enforces, on the same host folder as the notify file; so a policy change never rolls the exporters),
``--refresh-mode periodic|events|both`` (``PeriodicAndEvents`` with a 0 period is ``events``:
upstream's "explicit 0 disables"), ``--period <seconds>``, ``--notify-file`` (agent mode: the agent
touches it) or ``--kubelet-state-dir`` (kubelet mode: the kubelet's root folder, read-only, whose
manager checkpoints change on every allocation) in the event modes,
``--pods-fingerprint``/``--no-pods-fingerprint``, ``--pods-fingerprint-method
all|with-exclusive-resources``, ``--no-publish``, ``--exclude-pods <ns-glob>/<name-glob>`` (repeated),
``--lock-file`` (``<run dir>/exporter.lock`` on the host: a second exporter of the node waits),
``--metrics-address``, ``--health-address``, ``--log-level``.

``numaplane agent`` — ``--node-name``, ``--config`` (a file the agent watches and reloads live; the
pod template carries no hash of it, so a policy change never restarts agents), ``--nri-socket``,
``--state-dir``, ``--podresources-socket`` (served by the agent), ``--plugin-dir``,
``--notify-file`` (the exporter's notify file on the host, touched after every allocation change;
always passed, so switching a group's refresh mode never restarts its agents), ``--applied-policy-file``
(the configuration in force, for the exporter), ``--kubelet-config``
(the kubelet's configuration file, mounted read-only: the take-over check refuses to enforce while
the kubelet's static managers are on), ``--watch-pods`` (exact requests from the node's Pods; its
RBAC allows reading pods, writing its own pod's status in its namespace and creating Events; the admission
policies of :mod:`numaplane.operator.admission` keep both to its own pod and node),
``--sysfs-root``, bind addresses, log level; ``POD_NAME`` and ``POD_NAMESPACE`` from the downward API, so that the agent
reports the policy revision it applied or rejected as the condition
:data:`numaplane.operator.status.POLICY_CONDITION` on its own pod (:mod:`numaplane.operator.status`
reads it into the NodeResourcePolicy's per-node status).

``tests/operator/test_op_cli_contract.py`` parses every rendered command line with the real click
commands and checks that every path argument is mounted and that agent and exporter meet on the
same host files.

Exactly one exporter per node: a DaemonSet runs one pod per selected node, and a required pod
anti-affinity on ``kubernetes.io/hostname`` against every exporter pod keeps a second group's
exporter Pending should selectors ever overlap (the operator rejects overlapping groups anyway).
What the scheduler cannot see — an exporter started by hand or by another tool, a second install —
is stopped on the node itself: every exporter locks the same host file (``--lock-file``), and a
second one waits, not ready, until the first is gone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from numaplane.operator.api.numaresources import (
    DRA,
    Enforcement,
    InfoRefreshMode,
    InfoRefreshPause,
    NodeGroup,
    NUMAResourcesOperator,
    PodsFingerprinting,
)
from numaplane.operator.api.numaresources import KIND as NRO_KIND
from numaplane.operator.api.policy import NodeResourcePolicy
from numaplane.operator.assignment import assign_policies, policy_document
from numaplane.operator.rbac import (
    AGENT_CLUSTER_RULES,
    AGENT_NAMESPACE_RULES,
    EXPORTER_CLUSTER_RULES,
    binding,
    merge_rules,
    role,
)
from numaplane.operator.render_common import (
    HEALTH_PORT,
    LABEL_NODE_GROUP,
    METRICS_PORT,
    Owner,
    Settings,
    component_labels,
    container_ports,
    env_from_field,
    host_path_volume,
    meta,
    metrics_service,
    network_policy,
    probe,
    resources,
    root_security_context,
    service_account,
)

__all__ = ["DEFAULT_TOLERATIONS", "render_node_objects"]

EXPORTER = "exporter"
AGENT = "agent"
EXPORTER_SA = "numaplane-exporter"
AGENT_SA = "numaplane-agent"
POLICY_MOUNT = "/etc/numaplane/policy"
POLICY_KEY = "config.yaml"
#: Where the exporter (kubelet mode) and the agent see the kubelet's configuration file (read-only hostPath).
KUBELET_CONFIG_MOUNT = "/host-kubelet/config.yaml"
#: Where a kubelet-mode exporter sees the kubelet's root folder (read-only), to watch its managers' checkpoints.
KUBELET_STATE_MOUNT = "/host-kubelet-state"
#: The agent touches ``<run_dir>/notify`` after allocation changes; the exporter watches the same host file.
NOTIFY_FILE = "notify"
#: The agent writes the configuration in force to ``<run_dir>/applied-policy.json``; the exporter publishes it.
APPLIED_POLICY_FILE = "applied-policy.json"
#: Every exporter of a node locks ``<run_dir>/exporter.lock``: one publishes, a second one waits.
EXPORTER_LOCK_FILE = "exporter.lock"
_EXPORTER_RUN_MOUNT = "/host-run-numaplane"
#: Default exporter/agent tolerations: run on control-plane nodes a group selects.
DEFAULT_TOLERATIONS: tuple[dict[str, Any], ...] = (
    {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"},
)
_REFRESH_FLAG = {
    InfoRefreshMode.PERIODIC: "periodic",
    InfoRefreshMode.EVENTS: "events",
    InfoRefreshMode.PERIODIC_AND_EVENTS: "both",
}


def exporter_name(group: str) -> str:
    return f"numaplane-exporter-{group}"


def agent_name(group: str) -> str:
    return f"numaplane-agent-{group}"


def policy_configmap_name(group: str) -> str:
    return f"numaplane-policy-{group}"


def exporter_args(nro: NUMAResourcesOperator, group: NodeGroup) -> list[str]:
    cfg = group.config
    args = ["exporter", "--node-name=$(NODE_NAME)", "--sysfs-root=/host"]
    if group.enforcement is Enforcement.AGENT:
        # the policy is the one the agent applied (a node-local file it rewrites on every change), never
        # a flag: a new policy reaches the NRT at once and never rolls the exporters
        args += [
            "--podresources-socket=unix:///host-numaplane/podresources/kubelet.sock",
            f"--applied-policy-file={_EXPORTER_RUN_MOUNT}/{APPLIED_POLICY_FILE}",
        ]
    else:
        args += [
            "--podresources-socket=unix:///host-podresources/kubelet.sock",
            f"--kubelet-config={KUBELET_CONFIG_MOUNT}",
        ]
    mode = cfg.info_refresh_mode
    if mode is InfoRefreshMode.PERIODIC_AND_EVENTS and cfg.info_refresh_period_seconds <= 0:
        # upstream: an explicit 0 period disables the periodic refresh (the exporter refuses 'both' with 0)
        mode = InfoRefreshMode.EVENTS
    args.append(f"--refresh-mode={_REFRESH_FLAG[mode]}")
    if mode is not InfoRefreshMode.EVENTS:
        args.append(f"--period={cfg.info_refresh_period_seconds:g}")
    if mode is not InfoRefreshMode.PERIODIC:
        if group.enforcement is Enforcement.AGENT:  # the agent touches the notify file on every change
            args.append(f"--notify-file={_EXPORTER_RUN_MOUNT}/{NOTIFY_FILE}")
        else:  # the kubelet rewrites its managers' checkpoints on every change
            args.append(f"--kubelet-state-dir={KUBELET_STATE_MOUNT}")
    if cfg.pods_fingerprinting is PodsFingerprinting.DISABLED:
        args.append("--no-pods-fingerprint")
    else:
        method = "all" if cfg.pods_fingerprinting is PodsFingerprinting.ENABLED else "with-exclusive-resources"
        args += ["--pods-fingerprint", f"--pods-fingerprint-method={method}"]
    if cfg.info_refresh_pause is InfoRefreshPause.ENABLED:
        args.append("--no-publish")
    if cfg.dra is DRA.ENABLED:  # the exporter's ClusterRole already reads DRA objects
        args.append("--dra")
        args += [f"--dra-numa-attribute={a}" for a in cfg.dra_numa_attributes]
    args += [f"--exclude-pods={p.flag_value}" for p in nro.pod_excludes]
    # one exporter per node, whatever runs it (a second DaemonSet, a rolling update's overlap)
    args.append(f"--lock-file={_EXPORTER_RUN_MOUNT}/{EXPORTER_LOCK_FILE}")
    args += _common_args(nro)
    return args


def _common_args(nro: NUMAResourcesOperator) -> list[str]:
    return [
        f"--metrics-address=:{METRICS_PORT}",
        f"--health-address=:{HEALTH_PORT}",
        f"--log-level={nro.log_level.cli_value}",
    ]


def agent_args(nro: NUMAResourcesOperator, settings: Settings) -> list[str]:
    return [
        "agent",
        "--node-name=$(NODE_NAME)",
        f"--config={POLICY_MOUNT}/{POLICY_KEY}",
        f"--nri-socket={settings.nri_socket_dir}/nri.sock",
        f"--state-dir={settings.state_dir}",
        f"--podresources-socket={settings.state_dir}/podresources/kubelet.sock",
        f"--plugin-dir={settings.state_dir}/plugins",
        f"--notify-file={settings.run_dir}/{NOTIFY_FILE}",
        f"--applied-policy-file={settings.run_dir}/{APPLIED_POLICY_FILE}",
        f"--kubelet-config={KUBELET_CONFIG_MOUNT}",
        "--watch-pods",
        "--sysfs-root=/host",
        *_common_args(nro),
    ]


def _tolerations(group: NodeGroup) -> list[dict[str, Any]]:
    if group.config.tolerations:
        return [t.to_dict() for t in group.config.tolerations]
    return [dict(t) for t in DEFAULT_TOLERATIONS]


def _pod_spec_common(group: NodeGroup, service_account_name: str, component: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "serviceAccountName": service_account_name,
        "automountServiceAccountToken": True,
        "priorityClassName": "system-node-critical",
        "tolerations": _tolerations(group),
        "terminationGracePeriodSeconds": 30,
    }
    terms = group.node_selector.node_affinity_terms()
    affinity: dict[str, Any] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": component_labels(component)},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    if terms:
        affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
    spec["affinity"] = affinity
    return spec


def _daemonset(
    name: str,
    component: str,
    group: NodeGroup,
    pod_spec: dict[str, Any],
    settings: Settings,
    owner: Owner,
) -> dict[str, Any]:
    selector = {**component_labels(component), LABEL_NODE_GROUP: group.name}
    template_labels = {**component_labels(component, instance=name), LABEL_NODE_GROUP: group.name}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": meta(
            name, component, namespace=settings.namespace, owner=owner, labels={LABEL_NODE_GROUP: group.name}
        ),
        "spec": {
            "selector": {"matchLabels": selector},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%"}},
            "template": {"metadata": {"labels": template_labels}, "spec": pod_spec},
        },
    }


def exporter_daemonset(
    nro: NUMAResourcesOperator, group: NodeGroup, settings: Settings, owner: Owner
) -> dict[str, Any]:
    mounts = [{"name": "host-sys", "mountPath": "/host/sys", "readOnly": True}]
    volumes = [host_path_volume("host-sys", "/sys", "Directory")]
    if group.enforcement is Enforcement.AGENT:
        mounts.append({"name": "agent-podresources", "mountPath": "/host-numaplane/podresources"})
        volumes.append(
            host_path_volume("agent-podresources", f"{settings.state_dir}/podresources", "DirectoryOrCreate")
        )
    else:
        mounts += [
            {"name": "kubelet-podresources", "mountPath": "/host-podresources"},
            {"name": "kubelet-config", "mountPath": KUBELET_CONFIG_MOUNT, "readOnly": True},
            {"name": "kubelet-state", "mountPath": KUBELET_STATE_MOUNT, "readOnly": True},
        ]
        volumes += [
            host_path_volume("kubelet-podresources", settings.kubelet_podresources_dir, "Directory"),
            host_path_volume("kubelet-config", settings.kubelet_config_file, "File"),
            host_path_volume("kubelet-state", settings.kubelet_state_dir, "Directory"),
        ]
    mounts.append({"name": "run-numaplane", "mountPath": _EXPORTER_RUN_MOUNT})
    volumes.append(host_path_volume("run-numaplane", settings.run_dir, "DirectoryOrCreate"))
    container = {
        "name": EXPORTER,
        "image": settings.image,
        "imagePullPolicy": settings.image_pull_policy,
        "args": exporter_args(nro, group),
        "env": [env_from_field("NODE_NAME", "spec.nodeName"), env_from_field("POD_NAME", "metadata.name")],
        "ports": container_ports(),
        "readinessProbe": probe("/readyz"),
        "livenessProbe": probe("/healthz", period_seconds=20),
        "resources": resources("50m", "64Mi", memory_limit="256Mi"),
        "securityContext": root_security_context(),
        "volumeMounts": mounts,
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    spec = _pod_spec_common(group, EXPORTER_SA, EXPORTER)
    spec["containers"] = [container]
    spec["volumes"] = volumes
    return _daemonset(exporter_name(group.name), EXPORTER, group, spec, settings, owner)


def agent_daemonset(nro: NUMAResourcesOperator, group: NodeGroup, settings: Settings, owner: Owner) -> dict[str, Any]:
    mounts = [
        {"name": "host-sys", "mountPath": "/host/sys", "readOnly": True},
        {"name": "nri", "mountPath": settings.nri_socket_dir},
        {"name": "state", "mountPath": settings.state_dir},
        {"name": "run-numaplane", "mountPath": settings.run_dir},
        {"name": "policy", "mountPath": POLICY_MOUNT, "readOnly": True},
        # the take-over check reads the kubelet's configuration (refuses while its static managers are on)
        {"name": "kubelet-config", "mountPath": KUBELET_CONFIG_MOUNT, "readOnly": True},
    ]
    volumes = [
        host_path_volume("host-sys", "/sys", "Directory"),
        host_path_volume("nri", settings.nri_socket_dir, "DirectoryOrCreate"),
        host_path_volume("state", settings.state_dir, "DirectoryOrCreate"),
        host_path_volume("run-numaplane", settings.run_dir, "DirectoryOrCreate"),
        {"name": "policy", "configMap": {"name": policy_configmap_name(group.name)}},
        host_path_volume("kubelet-config", settings.kubelet_config_file, "File"),
    ]
    container = {
        "name": AGENT,
        "image": settings.image,
        "imagePullPolicy": settings.image_pull_policy,
        "args": agent_args(nro, settings),
        "env": [
            env_from_field("NODE_NAME", "spec.nodeName"),
            env_from_field("POD_NAME", "metadata.name"),
            env_from_field("POD_NAMESPACE", "metadata.namespace"),
        ],
        "ports": container_ports(),
        "readinessProbe": probe("/readyz"),
        "livenessProbe": probe("/healthz", period_seconds=20),
        # exclusive CPUs are never taken by the agent itself: it runs in the shared pool
        "resources": resources("100m", "128Mi", memory_limit="512Mi"),
        "securityContext": root_security_context(),
        "volumeMounts": mounts,
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    spec = _pod_spec_common(group, AGENT_SA, AGENT)
    spec["containers"] = [container]
    spec["volumes"] = volumes
    return _daemonset(agent_name(group.name), AGENT, group, spec, settings, owner)


def policy_configmap(group: NodeGroup, document: Mapping[str, Any], settings: Settings, owner: Owner) -> dict[str, Any]:
    """The agents' config file; keys sorted so the same document always renders the same bytes."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta(
            policy_configmap_name(group.name),
            AGENT,
            namespace=settings.namespace,
            owner=owner,
            labels={LABEL_NODE_GROUP: group.name},
            annotations={"numaplane.io/policy-revision": str(document["metadata"]["revision"])},
        ),
        "data": {POLICY_KEY: yaml.safe_dump(json.loads(json.dumps(document)), sort_keys=True)},
    }


def render_node_objects(
    nro: NUMAResourcesOperator, policies: Sequence[NodeResourcePolicy], settings: Settings
) -> list[dict[str, Any]]:
    """Every object the NUMAResourcesOperator owns (unordered; :mod:`.render` sorts), all namespaced ones in
    the node namespace (``settings.node_namespace``): the DaemonSets run as root, so they live where Pod
    Security allows it and nothing but the operator creates workloads."""
    settings = settings.for_nodes()
    owner = Owner(NRO_KIND, nro.metadata.name, nro.metadata.uid)
    assignment = assign_policies(nro, policies)
    agent_groups = [g for g in nro.node_groups if g.enforcement is Enforcement.AGENT]
    out: list[dict[str, Any]] = [
        service_account(EXPORTER_SA, EXPORTER, settings, owner),
        role("ClusterRole", EXPORTER_SA, EXPORTER, merge_rules(EXPORTER_CLUSTER_RULES), settings, owner),
        binding("ClusterRoleBinding", EXPORTER_SA, EXPORTER, EXPORTER_SA, EXPORTER_SA, settings, owner),
        metrics_service("numaplane-exporter-metrics", EXPORTER, component_labels(EXPORTER), settings, owner),
        network_policy("numaplane-exporter", EXPORTER, {"matchLabels": component_labels(EXPORTER)}, settings, owner),
    ]
    if agent_groups:
        out += [
            service_account(AGENT_SA, AGENT, settings, owner),
            role("ClusterRole", AGENT_SA, AGENT, merge_rules(AGENT_CLUSTER_RULES), settings, owner),
            binding("ClusterRoleBinding", AGENT_SA, AGENT, AGENT_SA, AGENT_SA, settings, owner),
            role("Role", AGENT_SA, AGENT, merge_rules(AGENT_NAMESPACE_RULES), settings, owner),
            binding("RoleBinding", AGENT_SA, AGENT, AGENT_SA, AGENT_SA, settings, owner),
            metrics_service("numaplane-agent-metrics", AGENT, component_labels(AGENT), settings, owner),
            network_policy("numaplane-agent", AGENT, {"matchLabels": component_labels(AGENT)}, settings, owner),
        ]
    for group in nro.node_groups:
        if group.enforcement is Enforcement.AGENT:
            document = policy_document(group.name, assignment.by_group.get(group.name))
            out.append(policy_configmap(group, document, settings, owner))
            out.append(agent_daemonset(nro, group, settings, owner))
        out.append(exporter_daemonset(nro, group, settings, owner))
    return out
