"""The operator's desired state, rendered purely from custom resources and settings.

Two entry points:

* :func:`render_stack` — what the controllers apply for the given custom resources: the install
  namespace (Pod Security ``restricted``) and the node namespace (``privileged``: the root DaemonSets),
  the NodeResourceTopology CRD (unless the NUMAResourcesOperator says the cluster manages it),
  everything the NUMAResourcesOperator owns (exporter/agent DaemonSets, policy ConfigMaps, RBAC,
  network policies, metrics Services; in the node namespace) and everything the
  NUMAResourcesScheduler owns (in the install namespace). Objects carry ownerReferences when the
  resources carry a ``uid``.
* :func:`render_install` — the default install (``deploy/``): both namespaces, the three numaplane.io
  CRDs and the NRT CRD, the operator's RBAC (a Role in each namespace), Deployment, metrics Service
  and network policy, and the admission policies that keep each exporter and agent to its own node
  and pod (:mod:`numaplane.operator.admission`).

No I/O, no clock, no randomness: the same inputs give the same list (sorted by kind order, then
namespace and name), which is what makes "a second reconcile writes nothing" and the CI drift check
possible.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from numaplane.nrt.crd import crd_manifest as nrt_crd_manifest
from numaplane.operator.admission import admission_objects
from numaplane.operator.api import numaresources as nro_api
from numaplane.operator.api import policy as nrp_api
from numaplane.operator.api import scheduler as nrs_api
from numaplane.operator.api.meta import API_VERSION
from numaplane.operator.api.numaresources import NUMAResourcesOperator
from numaplane.operator.api.policy import NodeResourcePolicy
from numaplane.operator.api.scheduler import NUMAResourcesScheduler
from numaplane.operator.crds import all_crds
from numaplane.operator.errors import SpecError
from numaplane.operator.rbac import (
    binding,
    operator_cluster_rules,
    operator_namespace_rules,
    operator_node_namespace_rules,
    role,
)
from numaplane.operator.render_common import (
    HEALTH_PORT,
    METRICS_PORT,
    Settings,
    component_labels,
    container_ports,
    env_from_field,
    meta,
    metrics_service,
    network_policy,
    node_path_args,
    probe,
    resources,
    restricted_security_context,
    service_account,
)
from numaplane.operator.render_nodes import render_node_objects
from numaplane.operator.render_scheduler import render_scheduler_objects

__all__ = [
    "KIND_ORDER",
    "Inputs",
    "parse_resources",
    "render_install",
    "render_stack",
    "sample_resources",
    "sort_objects",
    "to_yaml",
]

OPERATOR = "operator"
OPERATOR_NAME = "numaplane-operator"
KIND_ORDER = (
    "Namespace",
    "CustomResourceDefinition",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "ConfigMap",
    "Service",
    "NetworkPolicy",
    "DaemonSet",
    "Deployment",
    nro_api.KIND,
    nrs_api.KIND,
    nrp_api.KIND,
)


@dataclass(frozen=True, slots=True)
class Inputs:
    """The custom resources a rendering starts from (all optional)."""

    operator: NUMAResourcesOperator | None = None
    scheduler: NUMAResourcesScheduler | None = None
    policies: tuple[NodeResourcePolicy, ...] = field(default_factory=tuple)


def sort_objects(objects: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stable order: kinds as applied (namespace and CRDs first), then namespace, then name."""

    def key(obj: Mapping[str, Any]) -> tuple[int, str, str]:
        kind = str(obj.get("kind", ""))
        rank = KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)
        md = obj.get("metadata") or {}
        return rank, str(md.get("namespace", "")), str(md.get("name", ""))

    return sorted(objects, key=key)


def _namespace(name: str, enforce: str, audit: str) -> dict[str, Any]:
    md = meta(name, "namespace")
    md["labels"].update(
        {
            "pod-security.kubernetes.io/enforce": enforce,
            "pod-security.kubernetes.io/enforce-version": "latest",
            "pod-security.kubernetes.io/audit": audit,
            "pod-security.kubernetes.io/audit-version": "latest",
        }
    )
    if audit == enforce:  # where nothing may break the level, also warn whoever applies a workload
        md["labels"].update(
            {"pod-security.kubernetes.io/warn": audit, "pod-security.kubernetes.io/warn-version": "latest"}
        )
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": md}


def namespace_object(settings: Settings) -> dict[str, Any]:
    """The install namespace: Pod Security ``restricted`` (every pod the operator puts there — operator,
    scheduler — runs as non-root with no capabilities, no escalation, seccomp ``RuntimeDefault``)."""
    return _namespace(settings.namespace, "restricted", "restricted")


def node_namespace_object(settings: Settings) -> dict[str, Any]:
    """The node namespace: the exporter and agent DaemonSets mount host paths and run as root, so Pod
    Security must allow ``privileged`` here; auditing at ``baseline`` keeps anything else that lands here
    visible (no ``warn``: the operator's own DaemonSets would warn at every apply). Only the operator may create workloads in it (its Role there; no other ServiceAccount of
    the install holds any right in it)."""
    return _namespace(settings.node_namespace, "privileged", "baseline")


def render_stack(inputs: Inputs, settings: Settings) -> list[dict[str, Any]]:
    """Desired state of the operands for ``inputs`` (see the module docstring)."""
    out = [namespace_object(settings), node_namespace_object(settings)]
    if inputs.operator is not None:
        if inputs.operator.manage_nrt_crd:
            out.append(nrt_crd_manifest())
        out += render_node_objects(inputs.operator, inputs.policies, settings)
    if inputs.scheduler is not None:
        out += render_scheduler_objects(inputs.scheduler, settings)
    return sort_objects(out)


def operator_deployment(settings: Settings) -> dict[str, Any]:
    labels = component_labels(OPERATOR, instance=OPERATOR_NAME)
    container = {
        "name": OPERATOR,
        "image": settings.image,
        "imagePullPolicy": settings.image_pull_policy,
        "args": [
            "operator",
            "--namespace=$(POD_NAMESPACE)",
            f"--node-namespace={settings.node_namespace}",
            f"--image={settings.image}",
            *node_path_args(settings),
            "--leader-elect",
            f"--metrics-address=:{METRICS_PORT}",
            f"--health-address=:{HEALTH_PORT}",
        ],
        "env": [env_from_field("POD_NAMESPACE", "metadata.namespace"), env_from_field("POD_NAME", "metadata.name")],
        "ports": container_ports(),
        "readinessProbe": probe("/readyz"),
        "livenessProbe": probe("/healthz", period_seconds=20),
        "resources": resources("100m", "128Mi", memory_limit="512Mi"),
        "securityContext": restricted_security_context(),
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(OPERATOR_NAME, OPERATOR, namespace=settings.namespace),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": component_labels(OPERATOR)},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": OPERATOR_NAME,
                    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [container],
                    "terminationGracePeriodSeconds": 10,
                },
            },
        },
    }


def render_install(settings: Settings) -> list[dict[str, Any]]:
    """The default install: what ``kubectl apply -k deploy/`` creates before any custom resource."""
    selector = {"matchLabels": component_labels(OPERATOR)}
    objects = [
        namespace_object(settings),
        node_namespace_object(settings),
        *all_crds(),
        nrt_crd_manifest(),
        service_account(OPERATOR_NAME, OPERATOR, settings, None),
        role("ClusterRole", OPERATOR_NAME, OPERATOR, operator_cluster_rules(settings), settings, None),
        binding("ClusterRoleBinding", OPERATOR_NAME, OPERATOR, OPERATOR_NAME, OPERATOR_NAME, settings, None),
        role("Role", OPERATOR_NAME, OPERATOR, operator_namespace_rules(), settings, None),
        binding("RoleBinding", OPERATOR_NAME, OPERATOR, OPERATOR_NAME, OPERATOR_NAME, settings, None),
        # the node namespace: the only other place the operator writes (it runs no pod there itself)
        role("Role", OPERATOR_NAME, OPERATOR, operator_node_namespace_rules(), settings.for_nodes(), None),
        binding(
            "RoleBinding",
            OPERATOR_NAME,
            OPERATOR,
            OPERATOR_NAME,
            OPERATOR_NAME,
            settings.for_nodes(),
            None,
            subject_namespace=settings.namespace,
        ),
        metrics_service("numaplane-operator-metrics", OPERATOR, component_labels(OPERATOR), settings, None),
        network_policy(OPERATOR_NAME, OPERATOR, selector, settings, None),
        operator_deployment(settings),
        *admission_objects(settings),
    ]
    return sort_objects(objects)


def sample_resources() -> list[dict[str, Any]]:
    """Example custom resources (``deploy/samples``): two node groups, a scheduler, a policy."""
    return [
        {
            "apiVersion": API_VERSION,
            "kind": nro_api.KIND,
            "metadata": {"name": nro_api.SINGLETON_NAME},
            "spec": {
                "logLevel": "Normal",
                "nodeGroups": [
                    {
                        "name": "worker",
                        "nodeSelector": {"matchLabels": {"numaplane.io/node-group": "worker"}},
                        "enforcement": "kubelet",
                        "config": {"infoRefreshMode": "Periodic", "infoRefreshPeriod": "10s"},
                    },
                    {
                        "name": "latency",
                        "nodeSelector": {"matchLabels": {"numaplane.io/node-group": "latency"}},
                        "enforcement": "agent",
                        "config": {"infoRefreshMode": "PeriodicAndEvents", "podsFingerprinting": "Enabled"},
                    },
                ],
                "podExcludes": [{"namespace": "kube-system"}],
            },
        },
        {
            "apiVersion": API_VERSION,
            "kind": nrs_api.KIND,
            "metadata": {"name": nrs_api.SINGLETON_NAME},
            "spec": {
                "schedulerName": "numaplane-scheduler",
                "mode": "standalone",
                "cacheResyncPeriod": "5s",
                "scoringStrategy": {
                    "type": "LeastAllocated",
                    "resources": [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}],
                },
                "replicas": 1,
            },
        },
        {
            "apiVersion": API_VERSION,
            "kind": nrp_api.KIND,
            "metadata": {"name": "latency"},
            "spec": {
                "nodeGroup": "latency",
                "config": {
                    "topologyManager": {"policy": "single-numa-node", "scope": "pod"},
                    "cpuManager": {"policy": "static", "reservedCPUs": "0-1", "options": {"full-pcpus-only": "true"}},
                    "memoryManager": {
                        "policy": "Static",
                        "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}],
                    },
                },
            },
        },
    ]


def parse_resources(documents: Sequence[Mapping[str, Any]], sources: Sequence[str] = ()) -> Inputs:
    """Inputs from custom resource documents; raises :class:`SpecError` naming the bad document
    (``sources[i]``, e.g. the file and the document's place in it, when given; else ``document i``)."""
    operator: NUMAResourcesOperator | None = None
    scheduler: NUMAResourcesScheduler | None = None
    policies: list[NodeResourcePolicy] = []
    for i, doc in enumerate(documents):
        kind = doc.get("kind")
        meta = doc.get("metadata")
        name = meta.get("name", "?") if isinstance(meta, Mapping) else "?"
        label = f"{sources[i] if i < len(sources) else f'document {i}'} ({kind}/{name})"
        if doc.get("apiVersion") != API_VERSION:
            raise SpecError([f"{label}: apiVersion must be {API_VERSION}"])
        try:
            if kind == nro_api.KIND:
                if operator is not None:
                    raise SpecError(["only one NUMAResourcesOperator may be given"])
                operator = NUMAResourcesOperator.from_dict(doc)
            elif kind == nrs_api.KIND:
                if scheduler is not None:
                    raise SpecError(["only one NUMAResourcesScheduler may be given"])
                scheduler = NUMAResourcesScheduler.from_dict(doc)
            elif kind == nrp_api.KIND:
                policies.append(NodeResourcePolicy.from_dict(doc))
            else:
                raise SpecError([f"unsupported kind {kind!r}"])
        except SpecError as exc:
            raise SpecError([f"{label}: {p}" for p in exc.problems], exc.reason) from exc
    return Inputs(operator, scheduler, tuple(policies))


class _Dumper(yaml.SafeDumper):
    """Block style; multi-line strings (embedded config files) as literal blocks."""


def _str_presenter(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_Dumper.add_representer(str, _str_presenter)


def to_yaml(objects: Iterable[Mapping[str, Any]], *, header: str | None = None) -> str:
    """Multi-document YAML, keys in insertion order (apiVersion, kind, metadata, spec...)."""
    docs = [yaml.dump(json.loads(json.dumps(o)), Dumper=_Dumper, sort_keys=False, width=120) for o in objects]
    text = "---\n".join(docs)
    return f"{header}\n{text}" if header else text
