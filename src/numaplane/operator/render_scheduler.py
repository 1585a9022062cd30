"""Objects of a ``NUMAResourcesScheduler``: the scheduler Deployment, its config, RBAC and policies.

``standalone``: one container running ``numaplane scheduler run``. ``extender``: the stock
kube-scheduler (``kubeSchedulerImage``) reading a rendered ``KubeSchedulerConfiguration`` from the
ConfigMap ``numaplane-scheduler-config``, plus a sidecar running ``numaplane scheduler extender``
on ``127.0.0.1:8888`` (loopback only: the kube-scheduler in the same pod is its only client). The
Deployment's pod template carries the config's hash so a config change rolls the pods.

Command-line contract: ``numaplane scheduler run|extender`` take ``--scheduler-name``,
``--cache-resync-period <duration>``, ``--scoring-strategy <type>``, ``--resource-weight name=weight``
(repeated), ``--informer-mode shared|dedicated``, ``--metrics-address``,
``--health-address``, ``--log-level``; ``run`` also ``--leader-elect``,
``--leader-election-namespace``, ``--leader-election-lease``; ``extender`` also ``--listen host:port``.
The extender serves ``POST /filter``, ``/prioritize`` and ``/bind`` under ``http://127.0.0.1:8888/``.
"""

from __future__ import annotations

import hashlib
from typing import Any

import yaml

from numaplane.operator.api.meta import LogLevel
from numaplane.operator.api.scheduler import KIND as NRS_KIND
from numaplane.operator.api.scheduler import NUMAResourcesScheduler, SchedulerDRA, SchedulerMode
from numaplane.operator.rbac import SCHEDULER_LEASE, binding, role, scheduler_cluster_rules, scheduler_namespace_rules
from numaplane.operator.render_common import (
    CONFIG_HASH_ANNOTATION,
    EXTENDER_PORT,
    HEALTH_PORT,
    KUBE_SCHEDULER_SECURE_PORT,
    METRICS_PORT,
    Owner,
    Settings,
    component_labels,
    container_ports,
    env_from_field,
    meta,
    metrics_service,
    network_policy,
    probe,
    resources,
    restricted_security_context,
    service_account,
)
from numaplane.resources.duration import format_duration

__all__ = ["kube_scheduler_configuration", "render_scheduler_objects"]

SCHEDULER = "scheduler"
NAME = "numaplane-scheduler"
CONFIG_MAP = "numaplane-scheduler-config"
CONFIG_MOUNT = "/etc/numaplane/scheduler"
CONFIG_KEY = "config.yaml"
#: kube-scheduler's ``-v`` for each log level (upstream's mapping).
_KLOG_LEVEL = {LogLevel.NORMAL: 2, LogLevel.DEBUG: 4, LogLevel.TRACE: 6, LogLevel.TRACE_ALL: 8}


def kube_scheduler_configuration(nrs: NUMAResourcesScheduler, settings: Settings) -> dict[str, Any]:
    """The ``kubescheduler.config.k8s.io/v1`` config: one profile, our extender, Lease election, and the
    API client's rate limit ``spec.kubeSchedulerClient`` (``clientConnection.qps``/``burst``; no
    ``kubeconfig``: in-cluster).

    Dynamic resource allocation is disabled in the profile unless ``spec.dra`` is ``Enabled``: then
    kube-scheduler's ``DynamicResources`` plugin allocates the pods' claims (the extender, run with
    ``--dra``, filters out the nodes where no NUMA zone holds the pod's CPUs and memory with a free device
    of each claim; the device on the chosen node is the plugin's choice, docs/dra.md). Either way
    kube-scheduler v1.36 watches DeviceClasses, ResourceClaims and ResourceSlices (and schedules nothing
    until those informers sync), so its RBAC reads them.
    """
    profile: dict[str, Any] = {"schedulerName": nrs.scheduler_name}
    if nrs.dra is not SchedulerDRA.ENABLED:
        profile["plugins"] = {"multiPoint": {"disabled": [{"name": "DynamicResources"}]}}
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": nrs.kube_scheduler_client.to_dict(),
        "leaderElection": {
            "leaderElect": nrs.leader_elect,
            "resourceLock": "leases",
            "resourceNamespace": settings.namespace,
            "resourceName": SCHEDULER_LEASE,
        },
        "profiles": [profile],
        "extenders": [
            {
                "urlPrefix": f"http://127.0.0.1:{EXTENDER_PORT}/",
                "filterVerb": "filter",
                "prioritizeVerb": "prioritize",
                "bindVerb": "bind",
                "weight": 1,
                "enableHTTPS": False,
                "nodeCacheCapable": True,
                "ignorable": False,
                "httpTimeout": "5s",
            }
        ],
    }


def _numaplane_args(nrs: NUMAResourcesScheduler) -> list[str]:
    strategy = nrs.scoring_strategy
    return [
        f"--scheduler-name={nrs.scheduler_name}",
        f"--cache-resync-period={format_duration(nrs.cache_resync_period_seconds)}",
        f"--scoring-strategy={strategy.type.value}",
        *[f"--resource-weight={w}" for w in strategy.flag_values],
        f"--informer-mode={nrs.scheduler_informer.value.lower()}",
        f"--metrics-address=:{METRICS_PORT}",
        f"--health-address=:{HEALTH_PORT}",
        f"--log-level={nrs.log_level.cli_value}",
        *(["--dra"] if nrs.dra is SchedulerDRA.ENABLED else []),
    ]


def _numaplane_container(nrs: NUMAResourcesScheduler, settings: Settings, args: list[str]) -> dict[str, Any]:
    return {
        "name": "extender" if nrs.mode is SchedulerMode.EXTENDER else SCHEDULER,
        "image": settings.image,
        "imagePullPolicy": settings.image_pull_policy,
        "args": args,
        "env": [env_from_field("POD_NAME", "metadata.name"), env_from_field("POD_NAMESPACE", "metadata.namespace")],
        "ports": container_ports(),
        "readinessProbe": probe("/readyz"),
        "livenessProbe": probe("/healthz", period_seconds=20),
        "resources": resources("150m", "256Mi", memory_limit="1Gi"),
        "securityContext": restricted_security_context(),
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }


def _kube_scheduler_container(nrs: NUMAResourcesScheduler) -> dict[str, Any]:
    return {
        "name": "kube-scheduler",
        "image": nrs.kube_scheduler_image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["kube-scheduler"],
        "args": [
            f"--config={CONFIG_MOUNT}/{CONFIG_KEY}",
            "--cert-dir=/var/run/kube-scheduler-certs",
            f"--v={_KLOG_LEVEL[nrs.log_level]}",
        ],
        "ports": [{"name": "https", "containerPort": KUBE_SCHEDULER_SECURE_PORT, "protocol": "TCP"}],
        "readinessProbe": probe("/readyz", "https", scheme="HTTPS"),
        "livenessProbe": probe("/healthz", "https", scheme="HTTPS", period_seconds=20),
        "resources": resources("100m", "128Mi", memory_limit="1Gi"),
        "securityContext": restricted_security_context(),
        "volumeMounts": [
            {"name": "config", "mountPath": CONFIG_MOUNT, "readOnly": True},
            {"name": "certs", "mountPath": "/var/run/kube-scheduler-certs"},
        ],
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }


def scheduler_deployment(
    nrs: NUMAResourcesScheduler, settings: Settings, owner: Owner, config_hash: str | None
) -> dict[str, Any]:
    labels = component_labels(SCHEDULER, instance=NAME)
    if nrs.mode is SchedulerMode.EXTENDER:
        args = ["scheduler", "extender", f"--listen=127.0.0.1:{EXTENDER_PORT}", *_numaplane_args(nrs)]
        containers = [_kube_scheduler_container(nrs), _numaplane_container(nrs, settings, args)]
        volumes: list[dict[str, Any]] = [
            {"name": "config", "configMap": {"name": CONFIG_MAP}},
            {"name": "certs", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
        ]
    else:
        args = ["scheduler", "run", *_numaplane_args(nrs)]
        if nrs.leader_elect:
            args += [
                "--leader-elect",
                f"--leader-election-namespace={settings.namespace}",
                f"--leader-election-lease={SCHEDULER_LEASE}",
            ]
        containers = [_numaplane_container(nrs, settings, args)]
        volumes = []
    template_meta: dict[str, Any] = {"labels": labels}
    if config_hash:
        template_meta["annotations"] = {CONFIG_HASH_ANNOTATION: config_hash}
    pod_spec: dict[str, Any] = {
        "serviceAccountName": NAME,
        "priorityClassName": "system-cluster-critical",
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": containers,
        "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 50,
                        "preference": {
                            "matchExpressions": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}]
                        },
                    }
                ]
            },
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": component_labels(SCHEDULER)},
                            "topologyKey": "kubernetes.io/hostname",
                        },
                    }
                ]
            },
        },
    }
    if volumes:
        pod_spec["volumes"] = volumes
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(NAME, SCHEDULER, namespace=settings.namespace, owner=owner),
        "spec": {
            "replicas": nrs.replicas,
            "selector": {"matchLabels": component_labels(SCHEDULER)},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
            "template": {"metadata": template_meta, "spec": pod_spec},
        },
    }


def render_scheduler_objects(nrs: NUMAResourcesScheduler, settings: Settings) -> list[dict[str, Any]]:
    """Every object the NUMAResourcesScheduler owns (unordered; :mod:`.render` sorts)."""
    owner = Owner(NRS_KIND, nrs.metadata.name, nrs.metadata.uid)
    out: list[dict[str, Any]] = [
        service_account(NAME, SCHEDULER, settings, owner),
        role(
            "ClusterRole",
            NAME,
            SCHEDULER,
            scheduler_cluster_rules(nrs.mode, nrs.dra is SchedulerDRA.ENABLED),
            settings,
            owner,
        ),
        binding("ClusterRoleBinding", NAME, SCHEDULER, NAME, NAME, settings, owner),
        role("Role", NAME, SCHEDULER, scheduler_namespace_rules(), settings, owner),
        binding("RoleBinding", NAME, SCHEDULER, NAME, NAME, settings, owner),
        metrics_service("numaplane-scheduler-metrics", SCHEDULER, component_labels(SCHEDULER), settings, owner),
        network_policy("numaplane-scheduler", SCHEDULER, {"matchLabels": component_labels(SCHEDULER)}, settings, owner),
    ]
    config_hash = None
    if nrs.mode is SchedulerMode.EXTENDER:
        text = yaml.safe_dump(kube_scheduler_configuration(nrs, settings), sort_keys=False)
        config_hash = "sha256:" + hashlib.sha256(text.encode()).hexdigest()
        out.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": meta(CONFIG_MAP, SCHEDULER, namespace=settings.namespace, owner=owner),
                "data": {CONFIG_KEY: text},
            }
        )
    out.append(scheduler_deployment(nrs, settings, owner, config_hash))
    return out
