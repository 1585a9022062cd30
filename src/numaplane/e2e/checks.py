"""The read-only checks of ``numaplane e2e``: GET and LIST requests only, nothing written.

:func:`~numaplane.e2e.view.gather` reads what the checks look at once (CRDs, the operator's custom
resources, Nodes, NRTs, the workloads and pods of the install and node namespaces); every check is then a function of
that :class:`~numaplane.e2e.view.ClusterView` (and, for the kubelet's configuration, one ``configz`` read per node through the
API server's node proxy). What each check asserts:

``crds``          the four CRDs exist, are ``Established`` with their names accepted, and a LIST on
                  every served version answers (the API server really serves them)
``operator``      the operator Deployment is available and the ``NUMAResourcesOperator`` reports
                  ``Available`` (else its ``Degraded`` / ``Progressing`` message)
``daemonsets``    every node group's exporter (and agent, in agent mode) DaemonSet has all pods ready,
                  every one of its current template (a rollout in progress is a FAIL)
                  (a group that selects no node is a warning: label its nodes)
``nrt/<node>``    per selected node: an NRT exists, is owned by this Node (not a deleted one of the
                  same name), its ``Node`` zones' CPU capacity adds up to the Node's capacity and
                  their allocatable CPUs fit in the Node's allocatable, the topology-manager attributes
                  are present, and it is fresh: the exporter pod on that node is Ready; with the
                  ``single-numa-node`` policy some zone must report memory (memory manager ``None``
                  publishes none, and the NUMA filter then refuses every Guaranteed pod that
                  requests memory: a failure naming the kubelet's or the NodeResourcePolicy's setting)
``scheduler``     the ``NUMAResourcesScheduler`` is ``Available`` and its Deployment has ready pods
``agent/<node>``  per node of an agent-mode group: the agent pod is Ready and has not refused to take
                  over the node (its ``numaplane.io/TakeOver`` condition: a refusal is reported with the
                  condition's reason and message), reports the policy revision as applied, and the
                  kubelet's CPU and memory managers are off (``configz``)
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from numaplane.agent.takeover import CONDITION_TYPE as TAKEOVER_CONDITION
from numaplane.e2e.report import CheckResult, Status
from numaplane.e2e.view import CRD_NAMES, ClusterView, attribute, condition, is_true, pod_ready
from numaplane.kube.client import LightkubePort
from numaplane.kube.errors import KubeError
from numaplane.operator.api import numaresources as nro_api
from numaplane.operator.api import scheduler as nrs_api
from numaplane.operator.api.numaresources import Enforcement, NodeGroup
from numaplane.operator.render import OPERATOR_NAME
from numaplane.operator.render_nodes import agent_name, exporter_name
from numaplane.operator.render_scheduler import NAME as SCHEDULER_DEPLOYMENT
from numaplane.operator.status import POLICY_CONDITION
from numaplane.resources.errors import QuantityError
from numaplane.resources.meta import name_of
from numaplane.resources.quantity import parse_quantity
from numaplane.scheduler.explain import unreported_resource_note

__all__ = ["read_only_checks"]

#: Topology-manager attributes every NRT must carry (the scheduler filters by them).
REQUIRED_ATTRIBUTES = ("topologyManagerPolicy", "topologyManagerScope")
#: The topology-manager policy the NUMA filter checks (the others pass every pod).
FILTERED_POLICY = "single-numa-node"


# ---------------------------------------------------------------- helpers


def _pod_state(pod: Mapping[str, Any]) -> str:
    status = pod.get("status") or {}
    waiting = [
        s["state"]["waiting"].get("reason", "")
        for s in status.get("containerStatuses") or []
        if (s.get("state") or {}).get("waiting")
    ]
    return f"phase {status.get('phase', '?')}" + (f", {', '.join(waiting)}" if waiting else "") + ", not Ready"


def _story(obj: Mapping[str, Any] | None) -> str:
    """The active condition's reason and message (Degraded first)."""
    for kind in ("Degraded", "Progressing", "Available"):
        cond = condition(obj, kind)
        if cond and cond.get("status") == "True":
            text = f"{kind}: {cond.get('reason', '')}"
            return text + (f" — {cond['message']}" if cond.get("message") else "")
    return "no conditions yet (is the operator running?)"


def _quantity(value: Any) -> float | None:
    try:
        return float(parse_quantity(str(value)).amount)
    except (QuantityError, ValueError):
        return None


def _zone_sum(nrt: Mapping[str, Any], resource: str, column: str) -> float | None:
    total, seen = 0.0, False
    for zone in nrt.get("zones") or []:
        if zone.get("type") != "Node":
            continue
        for row in zone.get("resources") or []:
            if row.get("name") == resource:
                amount = _quantity(row.get(column))
                if amount is not None:
                    total += amount
                    seen = True
    return total if seen else None


def _memory_policy_source(view: ClusterView, group: NodeGroup | None) -> str:
    """Which configuration sets this node's memory manager policy, as the e2e checks read it."""
    if group is None or group.enforcement is not Enforcement.AGENT:
        return "the kubelet's memoryManagerPolicy sets it (kubelet mode): set it to Static, with reservedMemory"
    policy = view.policies.get(group.name)
    if policy is None:
        return f"no NodeResourcePolicy for node group {group.name!r}: its agents run memoryManager.policy None"
    config = (policy.get("spec") or {}).get("config") or {}
    value = (config.get("memoryManager") or {}).get("policy") or "None"
    return f"NodeResourcePolicy {policy['metadata']['name']}: memoryManager.policy is {value!r}"


def _timed(name: str, started: float, status: Status, message: str, *details: str) -> CheckResult:
    return CheckResult(name, status, message, time.monotonic() - started, tuple(details))


# ---------------------------------------------------------------- checks


async def check_crds(port: LightkubePort, view: ClusterView) -> list[CheckResult]:
    started = time.monotonic()
    problems: list[str] = []
    for name in CRD_NAMES:
        crd = view.crds.get(name)
        if crd is None:
            problems.append(f"{name}: not installed (kubectl apply -k deploy/crd, or numaplane render | kubectl apply)")
            continue
        for kind in ("Established", "NamesAccepted"):
            if not is_true(crd, kind):
                cond = condition(crd, kind) or {}
                problems.append(f"{name}: {kind} is not True ({cond.get('reason', 'no condition')})")
        spec = crd.get("spec") or {}
        for version in spec.get("versions") or []:
            if not version.get("served"):
                continue
            path = f"/apis/{spec.get('group')}/{version.get('name')}/{(spec.get('names') or {}).get('plural')}"
            try:
                await port.get_path(path + "?limit=1")
            except KubeError as exc:
                problems.append(f"{name}: LIST {path} failed: {exc}")
    if problems:
        return [_timed("crds", started, Status.FAIL, problems[0], *problems[1:])]
    return [_timed("crds", started, Status.PASS, f"{len(CRD_NAMES)} CRDs established and served")]


def check_operator(view: ClusterView) -> list[CheckResult]:
    started = time.monotonic()
    deployment = view.deployments.get(OPERATOR_NAME)
    if deployment is None:
        return [
            _timed(
                "operator",
                started,
                Status.FAIL,
                f"no Deployment {view.namespace}/{OPERATOR_NAME} (wrong --namespace, or not installed)",
            )
        ]
    ready = (deployment.get("status") or {}).get("availableReplicas") or 0
    if not ready:
        return [
            _timed(
                "operator",
                started,
                Status.FAIL,
                f"Deployment {OPERATOR_NAME} has no available replica",
                f"check: kubectl -n {view.namespace} describe deployment {OPERATOR_NAME}",
            )
        ]
    if view.nro is None:
        return [
            _timed(
                "operator",
                started,
                Status.FAIL,
                f"no NUMAResourcesOperator {nro_api.SINGLETON_NAME!r}: nothing is deployed to nodes",
                "fix: kubectl apply -k deploy/samples (then edit its node groups)",
            )
        ]
    if view.nro_problem:
        return [_timed("operator", started, Status.FAIL, f"NUMAResourcesOperator is invalid: {view.nro_problem}")]
    if not is_true(view.nro, "Available"):
        return [_timed("operator", started, Status.FAIL, f"NUMAResourcesOperator is not Available: {_story(view.nro)}")]
    groups = ", ".join(g.name for g in view.groups())
    return [_timed("operator", started, Status.PASS, f"operator available; node groups: {groups or '(none)'}")]


def check_daemon_sets(view: ClusterView) -> list[CheckResult]:
    started = time.monotonic()
    if view.nro_model is None:
        return [_timed("daemonsets", started, Status.SKIP, "no NUMAResourcesOperator to read node groups from")]
    problems: list[str] = []
    notes: list[str] = []
    seen = 0
    for group in view.groups():
        names = [exporter_name(group.name)]
        if group.enforcement is Enforcement.AGENT:
            names.append(agent_name(group.name))
        for name in names:
            ds = view.daemon_sets.get(name)
            if ds is None:
                problems.append(
                    f"DaemonSet {view.node_namespace}/{name} missing (the operator has not rendered it yet,"
                    " or wrong --node-namespace?)"
                )
                continue
            seen += 1
            status = ds.get("status") or {}
            desired = int(status.get("desiredNumberScheduled") or 0)
            ready = int(status.get("numberReady") or 0)
            # the API server omits updatedNumberScheduled when it is 0
            updated = int(status.get("updatedNumberScheduled") or 0)
            generation = int((ds.get("metadata") or {}).get("generation") or 0)
            observed = int(status.get("observedGeneration") or 0)
            if desired == 0:
                notes.append(f"DaemonSet {name} selects no node: label nodes for group {group.name!r}")
            elif ready < desired:
                problems.append(f"DaemonSet {name}: {ready} of {desired} pods ready")
            elif updated < desired or observed < generation:
                # ready pods of an older template: what they publish or enforce is the old configuration
                problems.append(
                    f"DaemonSet {name}: rolling out, {updated} of {desired} pods run the current template"
                    " (re-run when the rollout is done)"
                )
    if problems:
        return [_timed("daemonsets", started, Status.FAIL, problems[0], *problems[1:], *notes)]
    if notes:
        return [_timed("daemonsets", started, Status.WARN, notes[0], *notes[1:])]
    return [_timed("daemonsets", started, Status.PASS, f"{seen} DaemonSets, every pod ready")]


def check_nrt(view: ClusterView, node: Mapping[str, Any]) -> CheckResult:
    started = time.monotonic()
    name = name_of(node)
    check = f"nrt/{name}"
    nrt = view.nrts.get(name)
    group = view.group_of(node)
    exporter = view.component_pod("exporter", name)
    if nrt is None:
        hint = (
            f"exporter pod {exporter['metadata']['name']}: {_pod_state(exporter)}"
            if exporter is not None and not pod_ready(exporter)
            else f"check: kubectl -n {view.node_namespace} get pods -o wide --field-selector spec.nodeName={name}"
        )
        return _timed(check, started, Status.FAIL, "no NodeResourceTopology for this node", hint)
    problems: list[str] = []
    notes: list[str] = []
    owners = [o for o in nrt["metadata"].get("ownerReferences") or [] if o.get("kind") == "Node"]
    if owners and owners[0].get("uid") != node["metadata"].get("uid"):
        problems.append("NRT is owned by an older Node of the same name (stale: its exporter is not updating it)")
    status = node.get("status") or {}
    node_cpu = _quantity((status.get("capacity") or {}).get("cpu"))
    node_alloc = _quantity((status.get("allocatable") or {}).get("cpu"))
    zone_cpu = _zone_sum(nrt, "cpu", "capacity")
    zone_alloc = _zone_sum(nrt, "cpu", "allocatable")
    if zone_cpu is None:
        problems.append("no zone of type Node reports cpu")
    elif node_cpu is not None and zone_cpu != node_cpu:
        problems.append(f"zones' cpu capacity adds up to {zone_cpu:g}, the Node's capacity is {node_cpu:g}")
    if zone_alloc is not None and node_alloc is not None and zone_alloc > node_alloc:
        problems.append(
            f"zones' allocatable cpu ({zone_alloc:g}) exceeds the Node's allocatable ({node_alloc:g}):"
            " the kubelet reserves fewer CPUs than the node's policy (reservedSystemCPUs)"
        )
    zone_mem = _zone_sum(nrt, "memory", "capacity")
    node_mem = _quantity((status.get("capacity") or {}).get("memory"))
    if zone_mem is not None and node_mem and abs(zone_mem - node_mem) > 0.1 * node_mem:
        notes.append(f"zones' memory ({zone_mem / 2**30:.1f} GiB) differs from the Node's ({node_mem / 2**30:.1f} GiB)")
    policy = attribute(nrt, "topologyManagerPolicy")
    if zone_cpu is not None and zone_mem is None and policy == FILTERED_POLICY:
        problems.append(unreported_resource_note("memory"))
        notes.append(f"the NRT's topologyManagerPolicy is {policy}: the NUMA filter checks every Guaranteed pod")
        notes.append(_memory_policy_source(view, group))
    missing = [a for a in REQUIRED_ATTRIBUTES if attribute(nrt, a) is None]
    if missing:
        problems.append(f"attributes missing: {', '.join(missing)} (an exporter older than NRT v1alpha2?)")
    if group is not None:
        if exporter is None:
            problems.append(f"stale: no exporter pod on this node (DaemonSet {exporter_name(group.name)})")
        elif not pod_ready(exporter):
            problems.append(f"stale: exporter pod {exporter['metadata']['name']} is not Ready ({_pod_state(exporter)})")
    summary = f"{len(nrt.get('zones') or [])} zones, {zone_cpu or 0:g} CPUs, policy {policy}"
    if problems:
        return _timed(check, started, Status.FAIL, problems[0], *problems[1:], *notes)
    if notes:
        return _timed(check, started, Status.WARN, f"{summary}; {notes[0]}", *notes[1:])
    return _timed(check, started, Status.PASS, summary + ", exporter ready")


def check_scheduler(view: ClusterView) -> list[CheckResult]:
    started = time.monotonic()
    if view.nrs is None:
        return [
            _timed(
                "scheduler",
                started,
                Status.SKIP,
                "no NUMAResourcesScheduler: pods are placed by the default scheduler only",
            )
        ]
    spec = view.nrs.get("spec") or {}
    mode = spec.get("mode", "standalone")
    deployment = view.deployments.get(SCHEDULER_DEPLOYMENT)
    if deployment is None:
        return [_timed("scheduler", started, Status.FAIL, f"no Deployment {view.namespace}/{SCHEDULER_DEPLOYMENT}")]
    ready = int((deployment.get("status") or {}).get("readyReplicas") or 0)
    if not ready:
        return [
            _timed(
                "scheduler",
                started,
                Status.FAIL,
                f"Deployment {SCHEDULER_DEPLOYMENT} ({mode}) has no ready pod",
                f"check: kubectl -n {view.namespace} logs deploy/{SCHEDULER_DEPLOYMENT} --all-containers",
            )
        ]
    if not is_true(view.nrs, "Available"):
        return [
            _timed("scheduler", started, Status.FAIL, f"NUMAResourcesScheduler is not Available: {_story(view.nrs)}")
        ]
    name = spec.get("schedulerName", nrs_api.DEFAULT_SCHEDULER_NAME)
    return [_timed("scheduler", started, Status.PASS, f"{mode} scheduler {name!r}: {ready} ready")]


async def kubelet_config(port: LightkubePort, node: str) -> dict[str, Any] | None:
    """The kubelet's running configuration (``configz`` through the node proxy), or None if unreadable."""
    try:
        raw = await port.get_path(f"/api/v1/nodes/{node}/proxy/configz", timeout_seconds=5)
        config: dict[str, Any] = json.loads(raw).get("kubeletconfig") or {}
    except (KubeError, ValueError, AttributeError):
        return None
    return config


async def check_agent(port: LightkubePort, view: ClusterView, node: Mapping[str, Any]) -> CheckResult:
    started = time.monotonic()
    name = name_of(node)
    check = f"agent/{name}"
    problems: list[str] = []
    notes: list[str] = []
    pod = view.component_pod("agent", name)
    takeover = condition(pod, TAKEOVER_CONDITION)
    if pod is None:
        problems.append("no agent pod on this node")
    elif takeover is not None and takeover.get("status") == "False":
        problems.append(
            f"agent pod {pod['metadata']['name']} refuses to take over the node"
            f" ({takeover.get('reason') or 'no reason'}): {takeover.get('message') or 'no message'}"
        )
        if not pod_ready(pod):
            notes.append(f"agent pod {pod['metadata']['name']} is {_pod_state(pod)}")
    elif not pod_ready(pod):
        problems.append(f"agent pod {pod['metadata']['name']} is {_pod_state(pod)}")
        if takeover is None:
            notes.append(f"the agent has not reported its take-over verdict (pod condition {TAKEOVER_CONDITION})")
    else:
        cond = condition(pod, POLICY_CONDITION)
        if cond is None:
            notes.append("the agent has not reported a policy revision yet")
        elif cond.get("status") != "True":
            problems.append(f"the agent rejected its policy: {cond.get('message', '')}")
    config = await kubelet_config(port, name)
    if config is None:
        notes.append("kubelet configuration unreadable (GET nodes/proxy/configz): managers not checked")
    else:
        cpu = str(config.get("cpuManagerPolicy") or "none").lower()
        memory = str(config.get("memoryManagerPolicy") or "None").lower()
        if cpu != "none":
            problems.append(
                f"kubelet cpuManagerPolicy is {cpu!r}: with the agent enforcing it must be 'none' (see docs/install.md)"
            )
        if memory != "none":
            problems.append(f"kubelet memoryManagerPolicy is {memory!r}: with the agent enforcing it must be 'None'")
    if problems:
        return _timed(check, started, Status.FAIL, problems[0], *problems[1:], *notes)
    revision = (condition(pod, POLICY_CONDITION) or {}).get("message", "")
    message = "agent ready" + (f", policy {revision} applied" if revision else "")
    if notes:
        return _timed(check, started, Status.WARN, f"{message}; {notes[0]}", *notes[1:])
    return _timed(check, started, Status.PASS, message + ", kubelet managers off")


Check = Callable[[], Awaitable[list[CheckResult]]]


async def read_only_checks(port: LightkubePort, view: ClusterView) -> list[CheckResult]:
    """Every read-only check, in a fixed order."""
    results = await check_crds(port, view)
    results += check_operator(view)
    results += check_daemon_sets(view)
    nodes = view.selected_nodes()
    if not nodes:
        results.append(
            CheckResult(
                "nodes",
                Status.FAIL,
                "no node selected: no node matches a node group's selector"
                if view.node_selector is None
                else f"no node matches --node-selector {view.node_selector!r}",
            )
        )
    results += [check_nrt(view, node) for node in nodes]
    results += check_scheduler(view)
    for node in nodes:
        group = view.group_of(node)
        if group is not None and group.enforcement is Enforcement.AGENT:
            results.append(await check_agent(port, view, node))
    return results


def failed_names(results: Sequence[CheckResult]) -> list[str]:
    return [r.name for r in results if r.status is Status.FAIL]
