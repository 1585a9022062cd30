"""Resource descriptors: which REST collection an object lives in.

A :class:`Resource` names a Kubernetes resource type the way the API paths do (group, version,
plural) plus the facts a client needs to build a request (kind, whether it is namespaced, whether
it has a ``status`` subresource). Descriptors are plain frozen values; the same descriptor works
with every :class:`numaplane.kube.port.KubePort` implementation, for built-in types and custom
resources alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BUILTIN_RESOURCES",
    "CLUSTER_ROLE",
    "CLUSTER_ROLE_BINDING",
    "CONFIG_MAP",
    "CRD",
    "DAEMON_SET",
    "DEPLOYMENT",
    "EVENT",
    "LEASE",
    "NAMESPACE",
    "NETWORK_POLICY",
    "NODE",
    "NODE_RESOURCE_TOPOLOGY",
    "POD",
    "ROLE",
    "ROLE_BINDING",
    "SERVICE",
    "SERVICE_ACCOUNT",
    "Resource",
    "resources_from_crd",
]


@dataclass(frozen=True, slots=True)
class Resource:
    """A Kubernetes resource type: ``/apis/<group>/<version>/[namespaces/<ns>/]<plural>``.

    ``group`` is ``""`` for the core API (``/api/v1``). ``status_subresource`` says whether
    ``<plural>/status`` exists; when it does, writes to the main resource leave ``status`` alone and
    status writes change nothing else (the API server's rule).
    """

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    status_subresource: bool = False
    short_names: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        """``apiVersion`` as written in objects: ``v1`` or ``<group>/<version>``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def group_plural(self) -> str:
        """``<plural>.<group>`` (``<plural>`` in the core group): the name of a CRD for this resource."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def base_path(self) -> str:
        """The group-version prefix: ``/api/v1`` or ``/apis/<group>/<version>``."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """The REST path of the collection, an object or one of its subresources."""
        parts = [self.base_path()]
        if self.namespaced and namespace is not None:
            parts.append(f"namespaces/{namespace}")
        parts.append(self.plural)
        if name is not None:
            parts.append(name)
            if subresource is not None:
                parts.append(subresource)
        return "/".join(parts)

    def __str__(self) -> str:
        return f"{self.plural}.{self.version}.{self.group}" if self.group else f"{self.plural}.{self.version}"


POD = Resource("", "v1", "Pod", "pods", namespaced=True, status_subresource=True, short_names=("po",))
NODE = Resource("", "v1", "Node", "nodes", namespaced=False, status_subresource=True, short_names=("no",))
EVENT = Resource("", "v1", "Event", "events", namespaced=True, short_names=("ev",))
CONFIG_MAP = Resource("", "v1", "ConfigMap", "configmaps", namespaced=True, short_names=("cm",))
NAMESPACE = Resource("", "v1", "Namespace", "namespaces", namespaced=False, status_subresource=True)
SERVICE = Resource("", "v1", "Service", "services", namespaced=True, status_subresource=True)
SERVICE_ACCOUNT = Resource("", "v1", "ServiceAccount", "serviceaccounts", namespaced=True)
LEASE = Resource("coordination.k8s.io", "v1", "Lease", "leases", namespaced=True)
DAEMON_SET = Resource("apps", "v1", "DaemonSet", "daemonsets", namespaced=True, status_subresource=True)
DEPLOYMENT = Resource("apps", "v1", "Deployment", "deployments", namespaced=True, status_subresource=True)
CLUSTER_ROLE = Resource("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", namespaced=False)
CLUSTER_ROLE_BINDING = Resource(
    "rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", namespaced=False
)
ROLE = Resource("rbac.authorization.k8s.io", "v1", "Role", "roles", namespaced=True)
ROLE_BINDING = Resource("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", namespaced=True)
NETWORK_POLICY = Resource("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", namespaced=True)
CRD = Resource(
    "apiextensions.k8s.io",
    "v1",
    "CustomResourceDefinition",
    "customresourcedefinitions",
    namespaced=False,
    status_subresource=True,
    short_names=("crd",),
)
#: ``topology.node.k8s.io/v1alpha2`` NodeResourceTopology: cluster-scoped, no status subresource.
NODE_RESOURCE_TOPOLOGY = Resource(
    "topology.node.k8s.io",
    "v1alpha2",
    "NodeResourceTopology",
    "noderesourcetopologies",
    namespaced=False,
    short_names=("node-res-topo",),
)

#: Dynamic Resource Allocation (``resource.k8s.io/v1``, GA since Kubernetes 1.34).
RESOURCE_CLAIM = Resource(
    "resource.k8s.io", "v1", "ResourceClaim", "resourceclaims", namespaced=True, status_subresource=True
)
RESOURCE_SLICE = Resource("resource.k8s.io", "v1", "ResourceSlice", "resourceslices", namespaced=False)
DEVICE_CLASS = Resource("resource.k8s.io", "v1", "DeviceClass", "deviceclasses", namespaced=False)

#: The built-in types every implementation serves without a CRD.
BUILTIN_RESOURCES: tuple[Resource, ...] = (
    POD,
    NODE,
    EVENT,
    CONFIG_MAP,
    NAMESPACE,
    SERVICE,
    SERVICE_ACCOUNT,
    LEASE,
    DAEMON_SET,
    DEPLOYMENT,
    CLUSTER_ROLE,
    CLUSTER_ROLE_BINDING,
    ROLE,
    ROLE_BINDING,
    NETWORK_POLICY,
    CRD,
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
    DEVICE_CLASS,
)


def resources_from_crd(crd: Mapping[str, Any]) -> list[Resource]:
    """The resources a ``CustomResourceDefinition`` object serves, one per served version.

    Raises ``ValueError`` if the object lacks ``spec.group``, ``spec.names`` or ``spec.scope``.
    """
    spec = crd.get("spec") or {}
    try:
        group = str(spec["group"])
        names = spec["names"]
        kind = str(names["kind"])
        plural = str(names["plural"])
        scope = str(spec["scope"])
    except (KeyError, TypeError) as exc:
        raise ValueError(f"CustomResourceDefinition lacks {exc}") from exc
    if scope not in ("Namespaced", "Cluster"):
        raise ValueError(f"CustomResourceDefinition scope must be Namespaced or Cluster, not {scope!r}")
    short = tuple(str(s) for s in names.get("shortNames") or ())
    result = []
    for version in spec.get("versions") or ():
        if not version.get("served", True):
            continue
        subresources = version.get("subresources") or {}
        result.append(
            Resource(
                group=group,
                version=str(version["name"]),
                kind=kind,
                plural=plural,
                namespaced=scope == "Namespaced",
                status_subresource="status" in subresources,
                short_names=short,
            )
        )
    return result
