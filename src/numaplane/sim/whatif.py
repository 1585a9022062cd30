"""What-if on a captured cluster: rebuild it from a snapshot, replay a scenario, say what changes.

Steps (:func:`run_whatif`):

1. :func:`load_cluster` — every snapshot node becomes a :class:`~numaplane.sim.rebuild.NodeModel`;
   bound pods are grouped by node in creation order; pods bound to a node the snapshot lacks are
   reported (``unknown_node``), never dropped silently.
2. *Baseline* — each node's manager with the captured policy re-admits its pods in creation order.
   Pods it cannot re-admit are reported with the reason; the per-zone available resources are the
   "before" headroom, compared zone by zone with the captured NRTs (``baseline_matches_nrt``).
3. Per scheduler of the scenario (the default scheduler when none is given): fresh managers with the
   scenario's policy changes re-admit the same pods in the same order (pods admitted in the
   baseline but refused now are *pods that would now fail at the node*), then the discrete-event
   engine (:mod:`numaplane.sim.engine`, the same scheduling and admission code as ``simulate``)
   schedules the snapshot's pending pods (arriving at 0 s) and the scenario's added workload;
   placements of pending pods are reported with their node, and per-zone headroom "after". Every
   pending and added pod's fate comes from the run's admissions: placed (on which node), rejected at
   the node on every attempt (with each attempt's reason), or pending (no node fits).

Node allocatable for NodeResourcesFit is the captured Node's ``status.allocatable``; node
selectors, affinity and taints are kept in the snapshot but not evaluated by the engine (it
models resource fit only).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from numaplane.nrt.from_manager import node_nrt
from numaplane.policy.errors import PolicyConfigError
from numaplane.policy.manager import ResourceManager
from numaplane.resources.errors import PodSpecError
from numaplane.resources.pod import Pod, parse_pod
from numaplane.sim.cluster import NodeTemplate, instantiate
from numaplane.sim.engine import Run, cyclic_gc_paused
from numaplane.sim.errors import ScenarioError, SnapshotFormatError
from numaplane.sim.rebuild import NodeModel, NodeRebuildError, check_model, creation_order, model_node, zone_available
from numaplane.sim.scenario import Scenario
from numaplane.sim.snapshot import Snapshot
from numaplane.sim.spec import RunResult, SchedulerSpec, SimConfig
from numaplane.sim.workload import PodArrival

__all__ = ["ClusterModel", "NodeOutcome", "WhatIfResult", "load_cluster", "run_whatif"]

Zones = dict[str, dict[str, int]]
_RECREATED = re.compile(r"-r[0-9]+\Z")


@dataclass
class ClusterModel:
    """A snapshot rebuilt: node models, bound pods per node (creation order), pending pods."""

    nodes: list[NodeModel]
    bound: dict[str, list[Pod]]
    pending: list[Pod]
    unknown_node: list[Pod]
    model_notes: dict[str, list[str]]
    #: nodes that cannot be modelled at all, with why (left out of the run; their pods too)
    skipped: dict[str, str] = field(default_factory=dict)
    #: pods bound to a skipped node (not simulated)
    on_skipped: list[Pod] = field(default_factory=list)

    @property
    def nodes_compared_with_nrt(self) -> int:
        """Nodes whose model comes from their NRT (the per-zone comparison covers these only)."""
        return sum(1 for n in self.nodes if n.nrt is not None)


def _pod(doc: Mapping[str, Any], i: int, source: str) -> Pod:
    try:
        return parse_pod(doc)
    except PodSpecError as exc:
        raise SnapshotFormatError(source, f"pods[{i}].{exc.path}", exc.reason) from exc


def load_cluster(snapshot: Snapshot) -> ClusterModel:
    """Node models and pods of ``snapshot`` (see the module docstring)."""
    source = snapshot.source or "<snapshot>"
    nrts = {str(n.get("name")): n for n in snapshot.nrts}
    nodes: list[NodeModel] = []
    checks: dict[str, list[str]] = {}
    skipped: dict[str, str] = {}
    for doc in snapshot.nodes:
        name = str(doc.get("name"))
        try:
            model = model_node(doc, nrts.get(name))
            checks[name] = check_model(model)
        except (NodeRebuildError, PolicyConfigError, ValueError) as exc:  # named and left out, never the run
            skipped[name] = exc.reason if isinstance(exc, NodeRebuildError) else str(exc)
            continue
        nodes.append(model)
    names = {n.name for n in nodes}
    bound: dict[str, list[Pod]] = {n.name: [] for n in nodes}
    pending: list[Pod] = []
    unknown: list[Pod] = []
    on_skipped: list[Pod] = []
    for i, doc in enumerate(snapshot.pods):
        pod = _pod(doc, i, source)
        if not pod.node_name:
            pending.append(pod)
        elif pod.node_name in skipped:
            on_skipped.append(pod)
        elif pod.node_name in names:
            bound[pod.node_name].append(pod)
        else:
            unknown.append(pod)
    bound = {name: creation_order(pods) for name, pods in bound.items()}
    notes = {n.name: [*n.notes, *checks[n.name]] for n in nodes if n.notes or checks[n.name]}
    return ClusterModel(nodes, bound, creation_order(pending), unknown, notes, skipped, on_skipped)


@dataclass
class NodeOutcome:
    """One node after re-admission: what it refused (``(pod key, reason)``) and its zones' headroom."""

    refused: list[tuple[str, str]] = field(default_factory=list)
    zones: Zones = field(default_factory=dict)


def _readmit(manager: ResourceManager, pods: Sequence[Pod]) -> list[tuple[str, str]]:
    refused = []
    for pod in pods:
        admission = manager.admit(pod)
        if not admission.admitted:
            refused.append((pod.key, admission.reason or "UnexpectedAdmissionError"))
    return refused


def _config(model: NodeModel, scenario: Scenario) -> Any:
    try:
        return model.config(scenario.overrides(model.labels))
    except PolicyConfigError as exc:  # valid alone, not with this node's configuration: name both
        changes = ", ".join(c.where for c in scenario.policies if c.matches(model.labels))
        raise ScenarioError(f"{changes or 'policy change'} on node {model.name}", str(exc)) from exc


class _SeededRun(Run):
    """The engine's run over nodes that already hold the snapshot's pods (admitted at construction)."""

    def __init__(
        self,
        spec: SchedulerSpec,
        cluster: ClusterModel,
        scenario: Scenario,
        arrivals: Sequence[PodArrival],
        config: SimConfig,
        progress: Callable[[float], None] | None,
    ) -> None:
        templates = [NodeTemplate(m.name, m.topology, _config(m, scenario)) for m in cluster.nodes]
        nodes = [instantiate(t) for t in templates]
        for node, model in zip(nodes, cluster.nodes, strict=True):
            node.allocatable = dict(model.allocatable)
            node.node_doc = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": model.name, "labels": dict(model.labels)},
                "status": {k: {r: str(q) for r, q in model.allocatable.items()} for k in ("capacity", "allocatable")},
            }
        super().__init__(spec, templates, arrivals, config, progress, nodes)
        self.refused: dict[str, list[tuple[str, str]]] = {}
        for row, node in enumerate(self.nodes):
            pods = cluster.bound.get(node.name, [])
            self.refused[node.name] = _readmit(node.manager, pods)
            for pod in pods:
                if pod.uid in node.manager.pods:
                    node.bound[pod.uid] = pod
                    self.fit.add_vector(row, self.fit.vector_of(pod))


@dataclass
class SchedulerOutcome:
    """One scheduler's run over the scenario."""

    scheduler: str
    result: RunResult
    now_failing: list[dict[str, str]]
    pending_placed: list[dict[str, str]]
    pending_still: list[str]
    #: the added workload's tally: pods, placed, rejected, pending, rejectedAtNode {reason: attempts}
    workload: dict[str, Any]
    zones: dict[str, Zones]
    #: where each added pod went: {pod, outcome: placed|rejected|pending, node?, rejections: [{node, reason}]}
    added: list[dict[str, Any]] = field(default_factory=list)
    #: the same for the snapshot's pending pods
    pending: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class WhatIfResult:
    """Baseline and per-scheduler outcomes (see :func:`run_whatif`)."""

    cluster: ClusterModel
    baseline: dict[str, NodeOutcome]
    nrt_mismatches: dict[str, list[str]]
    outcomes: list[SchedulerOutcome]


def _zone_diff(model: NodeModel, zones: Zones) -> list[str]:
    if model.nrt is None:
        return []
    want = zone_available(model.nrt)
    return [
        f"{zone} {res}: simulated {zones.get(zone, {}).get(res)} vs NRT {amount}"
        for zone, rows in sorted(want.items())
        for res, amount in sorted(rows.items())
        if zones.get(zone, {}).get(res) != amount
    ]


def baseline(cluster: ClusterModel) -> tuple[dict[str, NodeOutcome], dict[str, list[str]]]:
    """Every node with its captured policy re-admitting its pods; mismatches with the captured NRTs."""
    out: dict[str, NodeOutcome] = {}
    mismatches: dict[str, list[str]] = {}
    for model in cluster.nodes:
        manager = ResourceManager(model.topology, model.config())
        refused = _readmit(manager, cluster.bound.get(model.name, []))
        zones = zone_available(node_nrt(manager, model.name)) if model.nrt is not None else {}
        out[model.name] = NodeOutcome(refused, zones)
        diff = _zone_diff(model, zones)
        if diff:
            mismatches[model.name] = diff
    return out, mismatches


def _base_uid(uid: str) -> str:
    return _RECREATED.sub("", uid)


def run_whatif(
    cluster: ClusterModel,
    scenario: Scenario,
    config: SimConfig | None = None,
    progress: Callable[[str, float], None] | None = None,
) -> WhatIfResult:
    """Baseline, then each scheduler of ``scenario`` over the changed cluster (module docstring)."""
    config = config or SimConfig(samples=4, sample_zones=False, percentage_of_nodes_to_score=100)
    scenario.check_selectors([m.labels for m in cluster.nodes])
    before, mismatches = baseline(cluster)
    pending_arrivals = [PodArrival(0.0, None, pod.with_changes(phase=""), "pending") for pod in cluster.pending]
    arrivals = [*pending_arrivals, *scenario.workload]
    was_refused = {key for o in before.values() for key, _ in o.refused}
    outcomes = []
    for spec in scenario.schedulers or (SchedulerSpec("default"),):
        report = None if progress is None else (lambda f, name=spec.name: progress(name, f))
        with cyclic_gc_paused():
            run = _SeededRun(spec, cluster, scenario, arrivals, config, report)
            result = run.run()
        now_failing = [
            {"pod": key, "node": node, "reason": reason}
            for node, refused in run.refused.items()
            for key, reason in refused
            if key not in was_refused
        ]
        pending = _pod_outcomes(pending_arrivals, result)
        added = _pod_outcomes(scenario.workload, result)
        outcomes.append(
            SchedulerOutcome(
                spec.name,
                result,
                now_failing,
                [{"pod": p["pod"], "node": p["node"]} for p in pending if p["outcome"] == "placed"],
                [p["pod"] for p in pending if p["outcome"] != "placed"],
                _added_tally(added),
                _zones_after(run, cluster),
                added,
                pending,
            )
        )
    return WhatIfResult(cluster, before, mismatches, outcomes)


def _zones_after(run: _SeededRun, cluster: ClusterModel) -> dict[str, Zones]:
    return {
        node.name: zone_available(node_nrt(node.manager, node.name))
        for node, model in zip(run.nodes, cluster.nodes, strict=True)
        if model.nrt is not None
    }


def _pod_outcomes(workload: Sequence[PodArrival], result: RunResult) -> list[dict[str, Any]]:
    """Where each pod of ``workload`` (added or pending) went, from the run's admissions (every node
    attempt, recreated pods included): ``placed`` (admitted on ``node``; earlier rejections kept),
    ``rejected`` (refused at a node on every attempt) or ``pending`` (the scheduler found no node)."""
    attempts: dict[str, list[tuple[str, bool, str]]] = {}
    for uid, node, admitted, reason in result.admissions:
        attempts.setdefault(_base_uid(uid), []).append((node, admitted, reason or "UnexpectedAdmissionError"))
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for arrival in workload:
        uid = arrival.pod.uid
        if uid in seen:
            continue
        seen.add(uid)
        tries = attempts.get(uid, [])
        rejections = [{"node": node, "reason": reason} for node, admitted, reason in tries if not admitted]
        admitted_on = [node for node, admitted, _ in tries if admitted]
        item: dict[str, Any] = {"pod": arrival.pod.key}
        if admitted_on:
            item.update(outcome="placed", node=admitted_on[-1])
        else:
            item["outcome"] = "rejected" if rejections else "pending"
        item["rejections"] = rejections
        out.append(item)
    return out


def _added_tally(added: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    reasons: dict[str, int] = {}
    for item in added:
        for rejection in item["rejections"]:
            reasons[rejection["reason"]] = reasons.get(rejection["reason"], 0) + 1
    return {
        "pods": len(added),
        **{outcome: sum(1 for i in added if i["outcome"] == outcome) for outcome in ("placed", "rejected", "pending")},
        "rejectedAtNode": dict(sorted(reasons.items())),
    }
