"""Shared pieces of the desired-state rendering: settings, names, labels, metadata, small builders.

Pure: values in, JSON-ready dicts out. Label contract (what pruning relies on):

* every object the operator creates carries ``app.kubernetes.io/part-of=numaplane`` and
  ``app.kubernetes.io/component``;
* objects the operator may prune also carry ``app.kubernetes.io/managed-by=numaplane-operator`` and
  ``numaplane.io/owner=<numaresourcesoperator|numaresourcesscheduler>`` — the controller deletes
  objects with these two labels that the current rendering no longer contains;
* the namespace and the NRT CRD carry neither (never pruned: deleting them would delete data).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from numaplane import __version__
from numaplane.operator.api.meta import API_VERSION, GROUP, valid_dns_label

__all__ = [
    "DEFAULT_NODE_NAMESPACE",
    "LABEL_COMPONENT",
    "LABEL_MANAGED_BY",
    "LABEL_NODE_GROUP",
    "LABEL_OWNER",
    "MANAGED_BY",
    "Owner",
    "Settings",
    "image_problem",
    "meta",
    "namespace_problem",
]

DEFAULT_IMAGE = f"ghcr.io/numaplane/numaplane:v{__version__}"
DEFAULT_NAMESPACE = "numaplane-system"
#: Where the node components that run as root (exporter, agent) live, apart from the install namespace
#: (issue 25 item 13): only this namespace allows ``privileged`` pods, and only the operator creates
#: workloads in it.
DEFAULT_NODE_NAMESPACE = "numaplane-node"

LABEL_NAME = "app.kubernetes.io/name"
LABEL_PART_OF = "app.kubernetes.io/part-of"
LABEL_COMPONENT = "app.kubernetes.io/component"
LABEL_INSTANCE = "app.kubernetes.io/instance"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_VERSION = "app.kubernetes.io/version"
LABEL_OWNER = f"{GROUP}/owner"
LABEL_NODE_GROUP = f"{GROUP}/node-group"
MANAGED_BY = "numaplane-operator"
#: Pod-template annotation whose change rolls a workload (hash of the config it mounts).
CONFIG_HASH_ANNOTATION = f"{GROUP}/config-hash"

#: In the rendered pods, ``--metrics-address=:METRICS_PORT`` and ``--health-address=:HEALTH_PORT`` listen on
#: every interface of the pod (not the daemons' loopback defaults, ``numaplane.listeners``): Prometheus
#: scrapes the metrics port at the pod's IP, and the kubelet's probes reach the health port there too.
#: Each pod has its own network namespace (no rendered pod uses ``hostNetwork``), so the ports never meet.
METRICS_PORT = 8080
HEALTH_PORT = 8081
#: Only pods of namespaces carrying this label (value ``"true"``) may reach a rendered metrics port: label
#: the namespace Prometheus runs in (``kubectl label namespace monitoring numaplane.io/scrape-metrics=true``).
METRICS_SCRAPER_LABEL = f"{GROUP}/scrape-metrics"
EXTENDER_PORT = 8888
KUBE_SCHEDULER_SECURE_PORT = 10259
NONROOT_UID = 65532


#: A container image reference as the runtimes parse it (github.com/distribution/reference):
#: ``[registry[:port]/]path[:tag][@digest]``, path components lower case.
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE_REFERENCE = re.compile(
    rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*(?::[0-9]+)?/)?{_PATH_PART}(?:/{_PATH_PART})*"
    r"(?::[\w][\w.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?"
)
#: Longest image reference accepted (distribution's name limit plus tag and digest).
MAX_IMAGE_REFERENCE = 512


def image_problem(image: str) -> str | None:
    """Why ``image`` is not a usable container image reference (``None``: it is)."""
    if not image:
        return "an image reference is required (e.g. registry.example.com/numaplane:v1)"
    if len(image) > MAX_IMAGE_REFERENCE or not _IMAGE_REFERENCE.fullmatch(image):
        return f"{image[:80]!r} is not a container image reference ([registry/]name[:tag][@digest])"
    return None


def namespace_problem(namespace: str) -> str | None:
    """Why ``namespace`` is not a namespace name, a DNS-1123 label (``None``: it is)."""
    if not valid_dns_label(namespace):
        return (
            f"{namespace[:80]!r} is not a namespace name (at most 63 characters: lower case letters, digits and "
            "'-', starting and ending with a letter or digit)"
        )
    return None


@dataclass(frozen=True, slots=True)
class Settings:
    """Install-wide settings (operator flags, ``numaplane render`` options), not part of any CR.

    ``namespace`` is the install namespace (operator, scheduler: Pod Security ``restricted``);
    ``node_namespace`` holds the node components' DaemonSets and what they use (Pod Security
    ``privileged``); the two always differ. Paths are host paths on the nodes. ``api_server_ports`` are
    the TCP ports the network policies allow egress to (the ``kubernetes`` Service port and the usual
    apiserver endpoint port).
    """

    namespace: str = DEFAULT_NAMESPACE
    node_namespace: str = DEFAULT_NODE_NAMESPACE
    image: str = DEFAULT_IMAGE
    image_pull_policy: str = "IfNotPresent"
    kubelet_podresources_dir: str = "/var/lib/kubelet/pod-resources"
    kubelet_config_file: str = "/var/lib/kubelet/config.yaml"
    kubelet_state_dir: str = "/var/lib/kubelet"
    nri_socket_dir: str = "/var/run/nri"
    state_dir: str = "/var/lib/numaplane"
    run_dir: str = "/run/numaplane"
    api_server_ports: tuple[int, ...] = (443, 6443)

    def for_nodes(self) -> Settings:
        """These settings with ``namespace`` set to the node namespace: what the node objects render with."""
        return dataclasses.replace(self, namespace=self.node_namespace)


#: Host paths on the nodes that differ between distributions: (Settings field, operator/render flag, help).
NODE_PATH_OPTIONS: tuple[tuple[str, str, str], ...] = (
    (
        "kubelet_podresources_dir",
        "--kubelet-podresources-dir",
        "The kubelet's PodResources folder (kubelet-mode exporters mount it).",
    ),
    (
        "kubelet_config_file",
        "--kubelet-config-file",
        "The kubelet's configuration file (kubelet-mode exporters read its policies).",
    ),
    (
        "kubelet_state_dir",
        "--kubelet-state-dir",
        "The kubelet's root folder (kubelet-mode exporters watch its managers' checkpoints there).",
    ),
    ("nri_socket_dir", "--nri-socket-dir", "The folder of the runtime's NRI socket nri.sock (agents mount it)."),
    ("state_dir", "--agent-state-dir", "The agents' checkpoint folder (kept across agent restarts)."),
    (
        "run_dir",
        "--agent-run-dir",
        "The folder of the agent's notify and applied policy files, shared with the exporter.",
    ),
)


def node_path_args(settings: Settings) -> list[str]:
    """``--flag=value`` for every node path of ``settings`` that is not the default (the operator's args)."""
    default = Settings()
    return [
        f"{flag}={getattr(settings, name)}"
        for name, flag, _ in NODE_PATH_OPTIONS
        if getattr(settings, name) != getattr(default, name)
    ]


@dataclass(frozen=True, slots=True)
class Owner:
    """The custom resource that owns rendered objects (``uid`` empty: no ownerReference, e.g. GitOps)."""

    kind: str
    name: str
    uid: str = ""

    @property
    def label(self) -> str:
        return self.kind.lower()

    def reference(self) -> dict[str, Any]:
        return {
            "apiVersion": API_VERSION,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


def component_labels(component: str, *, instance: str | None = None) -> dict[str, str]:
    """Labels identifying a component's pods (stable: used in immutable workload selectors)."""
    labels = {LABEL_NAME: "numaplane", LABEL_COMPONENT: component}
    if instance:
        labels[LABEL_INSTANCE] = instance
    return labels


def meta(
    name: str,
    component: str,
    *,
    namespace: str | None = None,
    owner: Owner | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """``metadata`` with the label contract of the module docstring (``owner=None``: unmanaged)."""
    all_labels = {LABEL_NAME: "numaplane", LABEL_PART_OF: "numaplane", LABEL_COMPONENT: component}
    all_labels[LABEL_VERSION] = __version__
    if owner is not None:
        all_labels[LABEL_MANAGED_BY] = MANAGED_BY
        all_labels[LABEL_OWNER] = owner.label
    all_labels.update(labels or {})
    out: dict[str, Any] = {"name": name}
    if namespace is not None:
        out["namespace"] = namespace
    out["labels"] = all_labels
    if annotations:
        out["annotations"] = dict(annotations)
    if owner is not None and owner.uid:
        out["ownerReferences"] = [owner.reference()]
    return out


def service_account(name: str, component: str, settings: Settings, owner: Owner | None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": meta(name, component, namespace=settings.namespace, owner=owner),
    }


def metrics_service(
    name: str, component: str, selector: Mapping[str, str], settings: Settings, owner: Owner | None
) -> dict[str, Any]:
    """A ClusterIP Service in front of a component's ``metrics`` port (Prometheus scrapes endpoints)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(name, component, namespace=settings.namespace, owner=owner),
        "spec": {
            "type": "ClusterIP",
            "selector": dict(selector),
            "ports": [{"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"}],
        },
    }


def network_policy(
    name: str,
    component: str,
    pod_selector: Mapping[str, Any],
    settings: Settings,
    owner: Owner | None,
    *,
    ingress_ports: Sequence[int] = (METRICS_PORT,),
) -> dict[str, Any]:
    """Deny everything for the selected pods except egress to the API server and ingress to metrics
    from the scrapers' namespaces (labelled :data:`METRICS_SCRAPER_LABEL`, issue 25 item 8).

    Selecting pods with both policy types makes every other flow denied, so no namespace-wide
    default-deny policy is needed (and none can break unrelated pods). Kubelet probes come from the
    node and are allowed by every conformant network plugin.
    """
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": meta(name, component, namespace=settings.namespace, owner=owner),
        "spec": {
            "podSelector": dict(pod_selector),
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [
                {
                    "from": [{"namespaceSelector": {"matchLabels": {METRICS_SCRAPER_LABEL: "true"}}}],
                    "ports": [{"protocol": "TCP", "port": p} for p in ingress_ports],
                }
            ],
            "egress": [{"ports": [{"protocol": "TCP", "port": p} for p in settings.api_server_ports]}],
        },
    }


def env_from_field(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}}


def probe(path: str, port: int | str = "health", *, scheme: str = "HTTP", period_seconds: int = 10) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": port, "scheme": scheme},
        "periodSeconds": period_seconds,
        "timeoutSeconds": 5,
        "failureThreshold": 3,
    }


def container_ports(*, metrics: bool = True) -> list[dict[str, Any]]:
    ports = [{"name": "health", "containerPort": HEALTH_PORT, "protocol": "TCP"}]
    if metrics:
        ports.insert(0, {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"})
    return ports


def restricted_security_context(*, uid: int = NONROOT_UID) -> dict[str, Any]:
    """Pod Security "restricted"-compliant container settings for a non-root process."""
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def root_security_context() -> dict[str, Any]:
    """Root, but not privileged: no capabilities, no escalation, read-only root filesystem.

    Node components run as uid 0 only because the kubelet's and the runtime's sockets are owned by
    root with mode 0600/0660; they need no capability beyond matching that owner.
    """
    return {
        "runAsUser": 0,
        "runAsGroup": 0,
        "privileged": False,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def host_path_volume(name: str, path: str, kind: str) -> dict[str, Any]:
    return {"name": name, "hostPath": {"path": path, "type": kind}}


def resources(cpu: str, memory: str, *, memory_limit: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"requests": {"cpu": cpu, "memory": memory}}
    if memory_limit:
        out["limits"] = {"memory": memory_limit}
    return out
