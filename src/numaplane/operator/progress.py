"""What a NUMAResourcesOperator's status reports about its operands, computed purely.

:func:`operator_progress` reads the node groups' live DaemonSets into the operator's state
(``Available`` once every DaemonSet is ready at its current generation, else ``Progressing`` with
``DaemonSetIsUpdating``) and the ``nodeGroups`` status; :func:`related_objects` lists the objects
the install consists of (``status.relatedObjects``); :func:`policy_progress` and
:func:`policy_counts` turn a NodeResourcePolicy's per-node states (from its agents' reports,
:func:`~numaplane.operator.status.policy_nodes`) into its state and counters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from numaplane.kube.port import JsonObj
from numaplane.operator.api.numaresources import Enforcement, NUMAResourcesOperator
from numaplane.operator.apply import ObjectId
from numaplane.operator.render_nodes import agent_name, exporter_name
from numaplane.operator.status import NodePolicyState, State
from numaplane.resources.meta import name_of, namespace_of

__all__ = ["operator_progress", "policy_counts", "policy_progress", "related_objects"]


def operator_progress(
    nro: NUMAResourcesOperator, live: Mapping[ObjectId, JsonObj], ns: str
) -> tuple[State, list[dict[str, Any]], list[dict[str, str]]]:
    """The operator's state, its ``nodeGroups`` status and the ready DaemonSets, from the live
    DaemonSets of namespace ``ns``: a group is ready when every one of its DaemonSets has as many
    ready pods as it wants, all of the current template (``updatedNumberScheduled``, which the API
    server omits when 0), and its controller has observed the current generation. Ready pods of an
    older template are a rollout still to come, not an available stack."""
    groups, ready, updating = [], [], []
    for group in nro.node_groups:
        names = [exporter_name(group.name)]
        if group.enforcement is Enforcement.AGENT:
            names.insert(0, agent_name(group.name))
        desired_nodes = ready_nodes = 0
        for name in names:
            ds = live.get(("DaemonSet", ns, name)) or {}
            st = ds.get("status") or {}
            want, have = int(st.get("desiredNumberScheduled") or 0), int(st.get("numberReady") or 0)
            updated = int(st.get("updatedNumberScheduled") or 0)
            current = int(st.get("observedGeneration") or 0) >= int((ds.get("metadata") or {}).get("generation") or 0)
            if name == exporter_name(group.name):
                desired_nodes, ready_nodes = want, have
            if not st or (want == have and updated >= want and current):
                ready.append({"namespace": ns, "name": name})
            else:
                updating.append(name)
        groups.append(
            {
                "name": group.name,
                "selector": group.node_selector.describe(),
                "enforcement": group.enforcement.value,
                "config": group.config.to_dict(),
                "daemonSets": [{"namespace": ns, "name": n} for n in names],
                "desiredNodes": desired_nodes,
                "readyNodes": ready_nodes,
            }
        )
    if updating:
        return State.progressing("DaemonSetIsUpdating", f"{', '.join(updating)} is updating"), groups, ready
    return State.available(f"{len(nro.node_groups)} node groups ready"), groups, ready


def related_objects(desired: list[dict[str, Any]], namespace: str) -> list[dict[str, str]]:
    """``status.relatedObjects`` for the rendered objects ``desired``: the namespaces (``namespace`` first,
    then every other rendered one), NRTs, workloads (each in its own namespace)."""
    out = [{"group": "", "resource": "namespaces", "name": namespace}]
    for o in desired:
        if o["kind"] == "Namespace" and name_of(o) != namespace:
            out.append({"group": "", "resource": "namespaces", "name": name_of(o)})
    if any(o["kind"] == "CustomResourceDefinition" for o in desired):
        out.append({"group": "topology.node.k8s.io", "resource": "noderesourcetopologies", "name": ""})
    for o in desired:
        if o["kind"] in ("DaemonSet", "Deployment"):
            out.append(
                {
                    "group": "apps",
                    "resource": o["kind"].lower() + "s",
                    "namespace": namespace_of(o) or namespace,
                    "name": name_of(o),
                }
            )
    return out


def policy_progress(nodes: list[dict[str, Any]]) -> State:
    """A policy's state: ``Degraded`` when a node rejected it, ``Progressing`` while one has not applied
    it yet, else ``Available``."""
    rejected = [n for n in nodes if n["state"] == NodePolicyState.REJECTED.value]
    pending = [n for n in nodes if n["state"] == NodePolicyState.PENDING.value]
    if rejected:
        why = "; ".join(f"{n['name']}: {n.get('message', '')}" for n in rejected)
        return State.degraded("PolicyRejected", f"rejected on {len(rejected)} of {len(nodes)} nodes: {why}")
    if pending:
        return State.progressing("PolicyPending", f"{len(pending)} of {len(nodes)} nodes have not applied it yet")
    return State.available(f"applied on {len(nodes)} nodes")


def policy_counts(nodes: list[dict[str, Any]]) -> dict[str, int]:
    """``appliedNodes`` / ``pendingNodes`` / ``rejectedNodes`` of a policy's status."""
    return {
        "appliedNodes": sum(n["state"] == "Applied" for n in nodes),
        "pendingNodes": sum(n["state"] == "Pending" for n in nodes),
        "rejectedNodes": sum(n["state"] == "Rejected" for n in nodes),
    }
