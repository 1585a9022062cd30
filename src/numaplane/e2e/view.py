"""What ``numaplane e2e`` reads from the cluster, once, and how it reads objects' status fields.

:func:`gather` issues the GET and LIST requests (nothing is written) and returns a :class:`ClusterView`:
the CRDs, the operator's custom resources (the ``NodeResourcePolicy`` objects by node group), the Nodes
(those ``node_selector`` picks), the NRTs, the pods of the install and node namespaces, the node
namespace's DaemonSets (exporters, agents) and the install namespace's Deployments (operator,
scheduler). An object that does not exist is ``None`` (or absent from its map); the operator's
resource is read only when its CRD exists. The small readers below (:func:`condition`, :func:`is_true`, :func:`pod_ready`, :func:`attribute`) read the raw JSON objects.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Any

from numaplane.kube.client import LightkubePort
from numaplane.kube.errors import NotFound
from numaplane.kube.resources import CRD, DAEMON_SET, DEPLOYMENT, NODE, NODE_RESOURCE_TOPOLOGY, POD
from numaplane.operator.api import numaresources as nro_api
from numaplane.operator.api import scheduler as nrs_api
from numaplane.operator.api.numaresources import NodeGroup, NUMAResourcesOperator
from numaplane.operator.controller import NODE_RESOURCE_POLICY, NUMA_RESOURCES_OPERATOR, NUMA_RESOURCES_SCHEDULER
from numaplane.operator.errors import SpecError
from numaplane.operator.render_common import DEFAULT_NODE_NAMESPACE, LABEL_COMPONENT
from numaplane.resources.meta import name_of

__all__ = ["CRD_NAMES", "ClusterView", "attribute", "condition", "gather", "is_true", "pod_ready"]

CRD_NAMES = (
    "noderesourcetopologies.topology.node.k8s.io",
    "numaresourcesoperators.numaplane.io",
    "numaresourcesschedulers.numaplane.io",
    "noderesourcepolicies.numaplane.io",
)


@dataclass
class ClusterView:
    """What the checks read, fetched once by :func:`gather`."""

    namespace: str
    #: where the exporter and agent DaemonSets and pods are (``--node-namespace``)
    node_namespace: str = DEFAULT_NODE_NAMESPACE
    crds: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    nro: dict[str, Any] | None = None
    nro_model: NUMAResourcesOperator | None = None
    nro_problem: str = ""
    nrs: dict[str, Any] | None = None
    #: ``NodeResourcePolicy`` objects by ``spec.nodeGroup`` (the agents' configuration)
    policies: dict[str, dict[str, Any]] = field(default_factory=dict)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    nrts: dict[str, dict[str, Any]] = field(default_factory=dict)
    pods: list[dict[str, Any]] = field(default_factory=list)
    daemon_sets: dict[str, dict[str, Any]] = field(default_factory=dict)
    deployments: dict[str, dict[str, Any]] = field(default_factory=dict)
    node_selector: str | None = None

    def groups(self) -> tuple[NodeGroup, ...]:
        return self.nro_model.node_groups if self.nro_model else ()

    def group_of(self, node: Mapping[str, Any]) -> NodeGroup | None:
        labels = node.get("metadata", {}).get("labels") or {}
        return next((g for g in self.groups() if g.node_selector.matches(labels)), None)

    def selected_nodes(self) -> list[dict[str, Any]]:
        """``--node-selector``'s nodes if given, else every node some node group selects."""
        if self.node_selector is not None:
            return self.nodes
        return [n for n in self.nodes if self.group_of(n) is not None]

    def component_pod(self, component: str, node: str) -> dict[str, Any] | None:
        for pod in self.pods:
            labels = pod.get("metadata", {}).get("labels") or {}
            if labels.get(LABEL_COMPONENT) == component and pod.get("spec", {}).get("nodeName") == node:
                return pod
        return None


async def _optional(call: Awaitable[dict[str, Any]]) -> dict[str, Any] | None:
    try:
        return await call
    except NotFound:
        return None


async def gather(
    port: LightkubePort, namespace: str, node_selector: str | None, node_namespace: str = DEFAULT_NODE_NAMESPACE
) -> ClusterView:
    """Read everything the checks need (raises :class:`KubeError` when the cluster cannot be read)."""
    view = ClusterView(namespace=namespace, node_namespace=node_namespace, node_selector=node_selector)
    for name in CRD_NAMES:
        view.crds[name] = await _optional(port.get(CRD, name))
    if view.crds.get(CRD_NAMES[1]):
        view.nro = await _optional(port.get(NUMA_RESOURCES_OPERATOR, nro_api.SINGLETON_NAME))
        if view.nro is not None:
            try:
                view.nro_model = NUMAResourcesOperator.from_dict(view.nro)
            except SpecError as exc:
                view.nro_problem = str(exc)
    if view.crds.get(CRD_NAMES[2]):
        view.nrs = await _optional(port.get(NUMA_RESOURCES_SCHEDULER, nrs_api.SINGLETON_NAME))
    if view.crds.get(CRD_NAMES[3]):
        for policy in (await port.list(NODE_RESOURCE_POLICY)).items:
            view.policies.setdefault(str((policy.get("spec") or {}).get("nodeGroup") or ""), policy)
    view.nodes = (await port.list(NODE, label_selector=node_selector)).items
    if view.crds.get(CRD_NAMES[0]):
        view.nrts = {name_of(o): o for o in (await port.list(NODE_RESOURCE_TOPOLOGY)).items}
    view.pods = (await port.list(POD, namespace=node_namespace)).items
    if namespace != node_namespace:
        view.pods += (await port.list(POD, namespace=namespace)).items
    daemon_sets = (await port.list(DAEMON_SET, namespace=node_namespace)).items
    view.daemon_sets = {name_of(d): d for d in daemon_sets}
    view.deployments = {name_of(d): d for d in (await port.list(DEPLOYMENT, namespace=namespace)).items}
    return view


def condition(obj: Mapping[str, Any] | None, kind: str) -> dict[str, Any] | None:
    """The ``status.conditions`` entry of type ``kind`` (a copy), or ``None``."""
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return dict(cond)
    return None


def is_true(obj: Mapping[str, Any] | None, kind: str) -> bool:
    """Whether condition ``kind`` has status ``"True"``."""
    cond = condition(obj, kind)
    return cond is not None and cond.get("status") == "True"


def pod_ready(pod: Mapping[str, Any] | None) -> bool:
    """Whether ``pod`` exists and its ``Ready`` condition is ``True``."""
    return pod is not None and is_true(pod, "Ready")


def attribute(nrt: Mapping[str, Any], name: str) -> str | None:
    """The value of the NRT attribute ``name`` (as a string), or ``None``."""
    return next((str(a.get("value")) for a in nrt.get("attributes") or [] if a.get("name") == name), None)
