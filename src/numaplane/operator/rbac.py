"""Least-privilege RBAC for every component, as data.

Invariants (tested): no ``*`` in verbs, API groups, resources or resource names; the exporter
writes nothing but ``noderesourcetopologies``; the operator holds every permission it grants
(the API server refuses to create a Role granting more than its creator holds, and we grant no
``escalate``/``bind``), computed as the union of the operand rules so the two cannot drift;
namespaced permissions live in Roles of the namespace they concern, not in ClusterRoles: the install
namespace (operator, scheduler) and the node namespace (exporter and agent DaemonSets, issue 25 item 13).
The operator may create workloads only where it runs them: Deployments in the install namespace,
DaemonSets in the node namespace (and read and delete the other kind, to prune what an earlier layout
left there).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from numaplane.operator.api import numaresources as nro
from numaplane.operator.api import policy as nrp
from numaplane.operator.api import scheduler as nrs
from numaplane.operator.api.meta import GROUP
from numaplane.operator.render_common import Owner, Settings, meta

__all__ = [
    "AGENT_CLUSTER_RULES",
    "AGENT_NAMESPACE_RULES",
    "EXPORTER_CLUSTER_RULES",
    "KUBE_SCHEDULER_CLUSTER_RULES",
    "Rule",
    "binding",
    "merge_rules",
    "operator_cluster_rules",
    "operator_namespace_rules",
    "operator_node_namespace_rules",
    "role",
    "scheduler_cluster_rules",
    "scheduler_namespace_rules",
]

READ = ("get", "list", "watch")
WRITE = ("create", "update", "patch", "delete")
NRT_GROUP = "topology.node.k8s.io"
SCHEDULER_LEASE = "numaplane-scheduler"
OPERATOR_LEASE = "numaplane-operator"


@dataclass(frozen=True, slots=True, order=True)
class Rule:
    """One PolicyRule; tuples kept sorted so equal rules compare equal."""

    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    resource_names: tuple[str, ...] = ()

    @classmethod
    def of(
        cls, groups: Iterable[str], resources: Iterable[str], verbs: Iterable[str], names: Iterable[str] = ()
    ) -> Rule:
        return cls(
            tuple(sorted(set(groups))),
            tuple(sorted(set(resources))),
            tuple(sorted(set(verbs))),
            tuple(sorted(set(names))),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"apiGroups": list(self.api_groups), "resources": list(self.resources)}
        if self.resource_names:
            out["resourceNames"] = list(self.resource_names)
        out["verbs"] = list(self.verbs)
        return out


def merge_rules(*groups: Iterable[Rule]) -> tuple[Rule, ...]:
    """Union of rules, merged per (api group, resource, resource names); sorted and stable."""
    verbs: dict[tuple[str, str, tuple[str, ...]], set[str]] = {}
    for rules in groups:
        for r in rules:
            for g in r.api_groups:
                for res in r.resources:
                    verbs.setdefault((g, res, r.resource_names), set()).update(r.verbs)
    # regroup resources of one api group with identical verbs and names into one rule
    grouped: dict[tuple[str, tuple[str, ...], tuple[str, ...]], set[str]] = {}
    for (g, res, names), vs in verbs.items():
        grouped.setdefault((g, tuple(sorted(vs)), names), set()).add(res)
    return tuple(sorted(Rule.of([g], res, vs, names) for (g, vs, names), res in grouped.items()))


EXPORTER_CLUSTER_RULES: tuple[Rule, ...] = (
    Rule.of([NRT_GROUP], ["noderesourcetopologies"], ["get", "list", "watch", "create", "update", "patch"]),
    Rule.of([""], ["nodes", "pods"], READ),
    # ``--dra``: the node's ResourceSlices, DeviceClasses and allocated claims make the DRA rows
    Rule.of(["resource.k8s.io"], ["deviceclasses", "resourceclaims", "resourceslices"], READ),
)
AGENT_CLUSTER_RULES: tuple[Rule, ...] = (
    Rule.of([""], ["pods"], READ),
    Rule.of([""], ["nodes"], ["get"]),
    # the DRA hint provider (node config ``dra.enabled``): a pod's claims and the node's devices
    Rule.of(["resource.k8s.io"], ["resourceclaims", "resourceslices"], READ),
    # a container that waits in the shared pool for CPUs, and its pinning, as Events on its pod
    # (agent/waitreport.py), and a take-over verdict as an Event on the agent's own pod: core/v1 Events
    # only (the agent never uses events.k8s.io), create only; the admission policy
    # ``numaplane-agent-events-own-node`` keeps them to pods and to the token's node
    Rule.of([""], ["events"], ["create"]),
)
#: The agent reports whether it applied its policy as a condition on its own pod (in the node
#: namespace; the admission policy ``numaplane-agent-own-pod`` keeps it to that pod).
AGENT_NAMESPACE_RULES: tuple[Rule, ...] = (Rule.of([""], ["pods/status"], ["get", "patch", "update"]),)

_EVENTS = (Rule.of(["", "events.k8s.io"], ["events"], ["create", "patch", "update"]),)
STANDALONE_SCHEDULER_CLUSTER_RULES: tuple[Rule, ...] = (
    Rule.of([""], ["pods", "nodes"], READ),
    Rule.of([""], ["pods/binding"], ["create"]),
    Rule.of([""], ["pods/status"], ["patch", "update"]),
    Rule.of([NRT_GROUP], ["noderesourcetopologies"], READ),
    # ``scheduler run --dra``: it reads devices and claims and writes the claims' allocation; v1.36's
    # API server also asks for ``update`` on ``resourceclaims/binding`` to change status.allocation or
    # status.reservedFor (found on the real v1.36.2 control plane)
    Rule.of(["resource.k8s.io"], ["deviceclasses", "resourceclaims", "resourceslices"], READ),
    Rule.of(["resource.k8s.io"], ["resourceclaims/status", "resourceclaims/binding"], ["update"]),
    *_EVENTS,
)
#: What the stock kube-scheduler reads and writes (its informers, binding, preemption, delegated
#: authentication of its secure port); the extender sidecar shares the service account.
KUBE_SCHEDULER_CLUSTER_RULES: tuple[Rule, ...] = (
    Rule.of(
        [""],
        [
            "pods",
            "nodes",
            "namespaces",
            "services",
            "replicationcontrollers",
            "persistentvolumeclaims",
            "persistentvolumes",
        ],
        READ,
    ),
    Rule.of([""], ["pods"], ["delete"]),
    Rule.of([""], ["pods/binding"], ["create"]),
    Rule.of([""], ["pods/status"], ["patch", "update"]),
    Rule.of(["apps"], ["replicasets", "statefulsets"], READ),
    Rule.of(["policy"], ["poddisruptionbudgets"], READ),
    Rule.of(
        ["storage.k8s.io"],
        ["storageclasses", "csinodes", "csidrivers", "csistoragecapacities", "volumeattachments"],
        READ,
    ),
    Rule.of(["authentication.k8s.io"], ["tokenreviews"], ["create"]),
    Rule.of(["authorization.k8s.io"], ["subjectaccessreviews"], ["create"]),
    Rule.of([NRT_GROUP], ["noderesourcetopologies"], READ),
    # kube-scheduler v1.36 starts these informers even with the DynamicResources plugin disabled, and
    # schedules nothing until they have synced (found on a real v1.36.2 control plane).
    Rule.of(["resource.k8s.io"], ["deviceclasses", "resourceclaims", "resourceslices"], READ),
    *_EVENTS,
)


def _leases(name: str) -> tuple[Rule, ...]:
    # create cannot be restricted by name; get/update can
    return (
        Rule.of(["coordination.k8s.io"], ["leases"], ["create"]),
        Rule.of(["coordination.k8s.io"], ["leases"], ["get", "update"], [name]),
    )


#: kube-scheduler's ``DynamicResources`` plugin, enabled in extender mode with ``spec.dra: Enabled``: it writes the
#: claims' allocation and reservation (v1.36 also asks for ``resourceclaims/binding`` to change them, as for the
#: standalone scheduler) and, in PreBind, adds its finalizer to the claim itself (``update`` on
#: ``resourceclaims``: found on the real v1.36.2 control plane).
KUBE_SCHEDULER_DRA_RULES: tuple[Rule, ...] = (
    Rule.of(["resource.k8s.io"], ["resourceclaims"], ["update"]),
    Rule.of(["resource.k8s.io"], ["resourceclaims/status", "resourceclaims/binding"], ["update"]),
)


def scheduler_cluster_rules(mode: nrs.SchedulerMode, dra: bool = False) -> tuple[Rule, ...]:
    if mode is nrs.SchedulerMode.EXTENDER:
        return merge_rules(KUBE_SCHEDULER_CLUSTER_RULES + (KUBE_SCHEDULER_DRA_RULES if dra else ()))
    return merge_rules(STANDALONE_SCHEDULER_CLUSTER_RULES)


def scheduler_namespace_rules() -> tuple[Rule, ...]:
    return merge_rules(_leases(SCHEDULER_LEASE))


#: ClusterRoles and ClusterRoleBindings the operator renders (its update/delete rights are limited to these).
OPERAND_CLUSTER_ROLE_NAMES = ("numaplane-exporter", "numaplane-agent", "numaplane-scheduler")
_COMMON_MANAGED = (
    ("", ("configmaps", "services", "serviceaccounts")),
    ("networking.k8s.io", ("networkpolicies",)),
    ("rbac.authorization.k8s.io", ("roles", "rolebindings")),
)
#: What the operator writes in the install namespace (the scheduler's objects) ...
INSTALL_NAMESPACE_MANAGED = (*_COMMON_MANAGED, ("apps", ("deployments",)))
#: ... and in the node namespace (the exporters' and agents' objects).
NODE_NAMESPACE_MANAGED = (*_COMMON_MANAGED, ("apps", ("daemonsets",)))


def operator_cluster_rules(settings: Settings) -> tuple[Rule, ...]:
    """The operator's cluster-wide rights: its CRs, the NRT CRD, cluster RBAC of operands, NRT GC,
    plus every cluster-wide right it grants to operands."""
    crs = [nro.PLURAL, nrs.PLURAL, nrp.PLURAL]
    own = [
        Rule.of([GROUP], crs, READ),
        Rule.of([GROUP], [f"{p}/status" for p in crs], ["get", "update", "patch"]),
        # ownerReferences with blockOwnerDeletion need update on the owner's finalizers
        Rule.of([GROUP], [f"{p}/finalizers" for p in crs], ["update"]),
        Rule.of(["apiextensions.k8s.io"], ["customresourcedefinitions"], [*READ, "create"]),
        Rule.of(
            ["apiextensions.k8s.io"],
            ["customresourcedefinitions"],
            ["update", "patch"],
            ["noderesourcetopologies.topology.node.k8s.io"],
        ),
        Rule.of([""], ["namespaces"], [*READ, "create"]),
        Rule.of([""], ["namespaces"], ["update", "patch"], [settings.namespace, settings.node_namespace]),
        Rule.of(["rbac.authorization.k8s.io"], ["clusterroles", "clusterrolebindings"], [*READ, "create"]),
        Rule.of(
            ["rbac.authorization.k8s.io"],
            ["clusterroles", "clusterrolebindings"],
            ["update", "patch", "delete"],
            OPERAND_CLUSTER_ROLE_NAMES,
        ),
        Rule.of([NRT_GROUP], ["noderesourcetopologies"], ["delete"]),  # garbage collection
        Rule.of([""], ["nodes"], READ),
    ]
    return merge_rules(
        own,
        EXPORTER_CLUSTER_RULES,
        AGENT_CLUSTER_RULES,
        STANDALONE_SCHEDULER_CLUSTER_RULES,
        KUBE_SCHEDULER_CLUSTER_RULES,
        KUBE_SCHEDULER_DRA_RULES,  # the operator grants them (extender mode with spec.dra)
    )


def operator_namespace_rules() -> tuple[Rule, ...]:
    """Rights in the install namespace: the scheduler's objects, leader election, the scheduler's Role
    rules; DaemonSets only read and deleted (pruning those of the layout before the node namespace)."""
    managed = [Rule.of([g], res, [*READ, *WRITE]) for g, res in INSTALL_NAMESPACE_MANAGED]
    return merge_rules(
        managed,
        [Rule.of(["apps"], ["daemonsets"], [*READ, "delete"])],
        _leases(OPERATOR_LEASE),
        [Rule.of([""], ["pods"], READ)],
        [Rule.of(["", "events.k8s.io"], ["events"], ["create", "patch"])],
        scheduler_namespace_rules(),
    )


def operator_node_namespace_rules() -> tuple[Rule, ...]:
    """Rights in the node namespace: the node components' objects (the only place it creates DaemonSets),
    their pods (read: the agents report their policy there), the agent's Role rules; Deployments only
    read and deleted (the operator prunes every kind it owns in both namespaces)."""
    managed = [Rule.of([g], res, [*READ, *WRITE]) for g, res in NODE_NAMESPACE_MANAGED]
    return merge_rules(
        managed,
        [Rule.of(["apps"], ["deployments"], [*READ, "delete"])],
        [Rule.of([""], ["pods"], READ)],
        AGENT_NAMESPACE_RULES,
    )


def role(
    kind: str, name: str, component: str, rules: Iterable[Rule], settings: Settings, owner: Owner | None
) -> dict[str, Any]:
    """A ``Role`` (in the install namespace) or ``ClusterRole``."""
    namespace = settings.namespace if kind == "Role" else None
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": meta(name, component, namespace=namespace, owner=owner),
        "rules": [r.to_dict() for r in rules],
    }


def binding(
    kind: str,
    name: str,
    component: str,
    role_name: str,
    service_account: str,
    settings: Settings,
    owner: Owner | None,
    *,
    subject_namespace: str | None = None,
) -> dict[str, Any]:
    """A ``RoleBinding`` (in ``settings.namespace``) or ``ClusterRoleBinding`` of ``role_name`` to one
    service account, of ``subject_namespace`` (default: ``settings.namespace``)."""
    namespace = settings.namespace if kind == "RoleBinding" else None
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": meta(name, component, namespace=namespace, owner=owner),
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role" if kind == "RoleBinding" else "ClusterRole",
            "name": role_name,
        },
        "subjects": [
            {"kind": "ServiceAccount", "name": service_account, "namespace": subject_namespace or settings.namespace}
        ],
    }
