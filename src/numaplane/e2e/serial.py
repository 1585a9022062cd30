"""The disruptive checks of ``numaplane e2e --serial``: they create pods and change policies.

Run one at a time (hence "serial"), on the first selected node of each node group, in a namespace
of their own (``numaplane-e2e-<random>``) that is deleted at the end whatever happened:

``canary/<node>``          first the node's NRT must agree with its pods (the exclusive CPUs its zones
                           show in use are those the node's Guaranteed pods hold, no pod is being
                           deleted): the NRT the canary is judged against is current. Then a
                           Guaranteed pod (integer CPUs, memory request = limit) for the NUMA-aware
                           scheduler, pinned to the node by ``nodeSelector``, must be Running within
                           the timeout, and the node's NRT must show its CPUs taken from exactly one
                           NUMA zone (the zone's CPUs in use, allocatable - available, rise by the
                           whole request; no other zone changes): NUMA-aligned, as the cluster reports it
``agent-restart/<node>``   (agent mode) the agent pod is deleted; its DaemonSet's new pod must be Ready,
                           the canary still Running and the NRT's zones unchanged — nothing lost
``policy-change/<group>``  (agent mode, with a NodeResourcePolicy) the policy's topology-manager policy
                           is changed live; the agent must report the new revision applied and the NRT
                           carry the new policy, without restarting the agent; then it is restored
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from numaplane.e2e.report import CheckResult, Status
from numaplane.e2e.view import ClusterView, attribute, condition, pod_ready
from numaplane.exporter.options import ExporterOptions
from numaplane.kube.client import LightkubePort
from numaplane.kube.errors import KubeError, NotFound
from numaplane.kube.resources import NAMESPACE, NODE_RESOURCE_TOPOLOGY, POD
from numaplane.operator.api import scheduler as nrs_api
from numaplane.operator.api.numaresources import Enforcement, NodeGroup
from numaplane.operator.api.policy import config_revision
from numaplane.operator.controller import NODE_RESOURCE_POLICY
from numaplane.operator.status import POLICY_CONDITION
from numaplane.placement.model.requests import is_exclusive
from numaplane.resources.errors import PodSpecError, QuantityError
from numaplane.resources.meta import labels_of, name_of
from numaplane.resources.pod import parse_pod
from numaplane.resources.quantity import parse_quantity

__all__ = ["SerialOptions", "serial_checks"]

T = TypeVar("T")
E2E_LABEL = "numaplane.io/e2e"


@dataclass(frozen=True, slots=True)
class SerialOptions:
    canary_image: str = "registry.k8s.io/pause:3.10"
    canary_cpus: int = 2
    canary_memory: str = "64Mi"
    timeout_seconds: float = 120.0
    interval_seconds: float = 1.0


async def _wait(what: str, check: Callable[[], Awaitable[T | None]], opts: SerialOptions) -> T:
    """Poll ``check`` until it returns something; ``TimeoutError(what)`` otherwise."""
    deadline = time.monotonic() + opts.timeout_seconds
    while True:
        try:
            got = await check()
        except NotFound:
            got = None
        if got:
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {opts.timeout_seconds:g} s")
        await asyncio.sleep(opts.interval_seconds)


def _node_zone_cpu_rows(nrt: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """``(zone name, its cpu resource row)`` for every ``Node`` zone of ``nrt`` that lists CPUs."""
    for zone in nrt.get("zones") or []:
        if zone.get("type") != "Node":
            continue
        for row in zone.get("resources") or []:
            if row.get("name") == "cpu":
                yield str(zone.get("name")), row


def _cpus(row: Mapping[str, Any], field: str) -> float:
    """A cpu row's ``field`` (``available``, ``allocatable``) in CPUs; :class:`QuantityError` if it is not one."""
    return float(parse_quantity(str(row.get(field))).amount)


def zone_cpus(nrt: Mapping[str, Any]) -> dict[str, float]:
    """Available CPUs per ``Node`` zone."""
    out: dict[str, float] = {}
    for name, row in _node_zone_cpu_rows(nrt):
        with contextlib.suppress(QuantityError):
            out[name] = _cpus(row, "available")
    return out


def zone_cpus_in_use(nrt: Mapping[str, Any]) -> dict[str, float]:
    """Exclusive CPUs in use per ``Node`` zone: ``allocatable - available`` (unlike ``available``, this
    does not move when the zone's allocatable CPUs change, e.g. an exporter of another mode replaced)."""
    out: dict[str, float] = {}
    for name, row in _node_zone_cpu_rows(nrt):
        with contextlib.suppress(QuantityError):
            out[name] = _cpus(row, "allocatable") - _cpus(row, "available")
    return out


def zone_cpus_used(nrt: Mapping[str, Any]) -> float:
    """Exclusive CPUs in use as the NRT says, over every ``Node`` zone."""
    return sum(zone_cpus_in_use(nrt).values())


def pods_exclusive_cpus(pods: Iterable[Mapping[str, Any]], excluded: Callable[[str, str], bool]) -> float:
    """Exclusive CPUs the node's pods hold, as the kubelet (or the agent) gives them and the exporter
    counts them: integral CPUs of the app and sidecar containers of Guaranteed pods, pods that are not
    terminal, not being deleted and not excluded from the exporter's accounting."""
    total = 0.0
    for doc in pods:
        meta = doc.get("metadata") or {}
        if meta.get("deletionTimestamp") or (doc.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        try:
            pod = parse_pod(doc)
        except PodSpecError:
            continue
        if excluded(pod.namespace, pod.name) or pod.qos_class != "Guaranteed":
            continue
        for container in (*(c for c in pod.init_containers if c.sidecar), *pod.containers):
            cpu = container.request("cpu")
            if cpu is not None and is_exclusive(pod.qos_class, "cpu", cpu, frozenset()):
                total += float(cpu.amount)
    return total


def canary_pod(name: str, node: str, scheduler: str, opts: SerialOptions) -> dict[str, Any]:
    resources = {"cpu": str(opts.canary_cpus), "memory": opts.canary_memory}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {E2E_LABEL: "canary"}},
        "spec": {
            "schedulerName": scheduler,
            "nodeSelector": {"kubernetes.io/hostname": node},
            "tolerations": [{"operator": "Exists"}],
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "canary",
                    "image": opts.canary_image,
                    "resources": {"requests": resources, "limits": resources},
                }
            ],
        },
    }


class SerialRun:
    """The state of one ``--serial`` run: its namespace and what to restore."""

    def __init__(self, port: LightkubePort, view: ClusterView, opts: SerialOptions) -> None:
        self.port = port
        self.view = view
        self.opts = opts
        self.namespace = f"numaplane-e2e-{secrets.token_hex(3)}"
        self.restore: list[Callable[[], Awaitable[None]]] = []

    async def nrt(self, node: str) -> dict[str, Any]:
        return await self.port.get(NODE_RESOURCE_TOPOLOGY, node)

    async def held_cpus(self, node: str) -> tuple[float, bool]:
        """``(exclusive CPUs the node's pods hold, whether a pod on the node is being deleted)``."""
        pods = (await self.port.list(POD, field_selector=f"spec.nodeName={node}")).items
        rules = (
            ExporterOptions.parse_excludes(p.flag_value for p in self.view.nro_model.pod_excludes)
            if self.view.nro_model
            else ()
        )
        deleting = any((p.get("metadata") or {}).get("deletionTimestamp") for p in pods)
        return pods_exclusive_cpus(pods, lambda ns, name: any(r.matches(ns, name) for r in rules)), deleting

    async def settled(self, node: str) -> dict[str, float]:
        """The exclusive CPUs in use per zone once the NRT agrees with the node's pods (``TimeoutError``
        saying how it differs).

        The canary is judged by what it changes in the NRT, so the NRT it starts from must be current:
        a pod that was just deleted (a previous canary, whose namespace is still going), or an exporter
        being replaced (its DaemonSet rolled) leaves an NRT that still counts CPUs no pod holds; the
        canary taking those CPUs then changes nothing in it, and the canary's CPUs never show.
        """
        seen: list[str] = []

        async def agrees() -> dict[str, float] | None:
            nrt = await self.nrt(node)
            held, deleting = await self.held_cpus(node)
            used = zone_cpus_used(nrt)
            seen[:] = [
                f"its zones show {used:g} exclusive CPUs in use, the node's Guaranteed pods hold {held:g}"
                + (" (a pod on the node is being deleted)" if deleting else "")
            ]
            return zone_cpus_in_use(nrt) if abs(used - held) < 1e-9 and not deleting else None

        try:
            return await _wait("the NRT to agree with the node's pods before the canary", agrees, self.opts)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}: {seen[0] if seen else 'nothing read'}") from exc

    async def canary(self, group: NodeGroup, node: str) -> tuple[CheckResult, str | None]:
        started = time.monotonic()
        check = f"canary/{node}"
        scheduler = str(((self.view.nrs or {}).get("spec") or {}).get("schedulerName") or "")
        if not scheduler:
            scheduler = nrs_api.DEFAULT_SCHEDULER_NAME if self.view.nrs else "default-scheduler"
        try:
            before = await self.settled(node)
        except TimeoutError as exc:
            return CheckResult(check, Status.FAIL, str(exc), time.monotonic() - started), None
        name = f"canary-{group.name}"[:63]
        await self.port.create(POD, canary_pod(name, node, scheduler, self.opts), namespace=self.namespace)

        async def running() -> dict[str, Any] | None:
            pod = await self.port.get(POD, name, namespace=self.namespace)
            return pod if (pod.get("status") or {}).get("phase") == "Running" else None

        try:
            await _wait("canary Running", running, self.opts)
        except TimeoutError as exc:
            pod = await self.port.get(POD, name, namespace=self.namespace)
            sched = condition(pod, "PodScheduled") or {}
            why = sched.get("message") or (pod.get("status") or {}).get("reason") or ""
            return CheckResult(
                check,
                Status.FAIL,
                f"{exc} (phase {(pod.get('status') or {}).get('phase')}; {why})".rstrip("; )") + ")",
                time.monotonic() - started,
            ), None
        want = float(self.opts.canary_cpus)

        async def aligned() -> dict[str, float] | None:
            after = zone_cpus_in_use(await self.nrt(node))
            drops = {z: v - before.get(z, 0.0) for z, v in after.items() if before.get(z, 0.0) != v}
            return drops if abs(sum(drops.values()) - want) < 1e-9 else None

        try:
            drops = await _wait("the NRT to show the canary's CPUs", aligned, self.opts)
        except TimeoutError as exc:
            held, _ = await self.held_cpus(node)
            used = zone_cpus_used(await self.nrt(node))
            return CheckResult(
                check,
                Status.FAIL,
                f"canary Running but {exc}: the exporter does not see its exclusive CPUs",
                time.monotonic() - started,
                (
                    f"the NRT's zones show {used:g} exclusive CPUs in use, the node's Guaranteed pods hold {held:g}",
                    f"exclusive CPUs in use per zone before the canary: {before}",
                ),
            ), name
        if len(drops) != 1:
            spread = ", ".join(f"{z}: {d:g}" for z, d in sorted(drops.items()))
            return CheckResult(
                check, Status.FAIL, f"canary not NUMA-aligned: CPUs taken from {spread}", time.monotonic() - started
            ), name
        zone = next(iter(drops))
        return CheckResult(
            check,
            Status.PASS,
            f"Guaranteed canary ({self.opts.canary_cpus} CPUs) Running, all CPUs from {zone}",
            time.monotonic() - started,
        ), name

    async def agent_restart(self, node: str, canary: str | None) -> CheckResult:
        started = time.monotonic()
        check = f"agent-restart/{node}"
        old = self.view.component_pod("agent", node)
        if old is None:
            return CheckResult(check, Status.FAIL, "no agent pod on this node", 0.0)
        before = zone_cpus(await self.nrt(node))
        await self.port.delete(POD, name_of(old), namespace=self.view.node_namespace)
        old_uid = old["metadata"].get("uid")

        async def replaced() -> dict[str, Any] | None:
            pods = await self.port.list(POD, namespace=self.view.node_namespace, field_selector=f"spec.nodeName={node}")
            for pod in pods.items:
                labels = labels_of(pod)
                if labels.get("app.kubernetes.io/component") == "agent" and pod["metadata"].get("uid") != old_uid:
                    return pod if pod_ready(pod) else None
            return None

        try:
            await _wait("a new agent pod Ready", replaced, self.opts)
        except TimeoutError as exc:
            return CheckResult(check, Status.FAIL, str(exc), time.monotonic() - started)
        problems: list[str] = []
        if canary is not None:
            pod = await self.port.get(POD, canary, namespace=self.namespace)
            if (pod.get("status") or {}).get("phase") != "Running":
                problems.append(f"the canary is {(pod.get('status') or {}).get('phase')} after the restart")
        await asyncio.sleep(min(5.0, self.opts.timeout_seconds / 10))
        after = zone_cpus(await self.nrt(node))
        if after != before:
            problems.append(f"NRT zones changed across the restart: {before} → {after}")
        if problems:
            return CheckResult(check, Status.FAIL, problems[0], time.monotonic() - started, tuple(problems[1:]))
        return CheckResult(
            check, Status.PASS, "agent restarted; allocations and NRT unchanged", time.monotonic() - started
        )

    async def policy_change(self, group: NodeGroup, node: str) -> CheckResult:
        started = time.monotonic()
        check = f"policy-change/{group.name}"
        policies = (await self.port.list(NODE_RESOURCE_POLICY)).items
        policy = next((p for p in policies if (p.get("spec") or {}).get("nodeGroup") == group.name), None)
        if policy is None:
            return CheckResult(check, Status.SKIP, f"no NodeResourcePolicy for group {group.name!r}", 0.0)
        original = copy.deepcopy((policy.get("spec") or {}).get("config") or {})
        current = str((original.get("topologyManager") or {}).get("policy") or "none")
        target = "restricted" if current == "single-numa-node" else "single-numa-node"
        changed = copy.deepcopy(original)
        changed.setdefault("topologyManager", {})["policy"] = target
        name = name_of(policy)
        agent = self.view.component_pod("agent", node)
        agent_uid = (agent or {}).get("metadata", {}).get("uid")

        async def put(config: Mapping[str, Any]) -> None:
            await self.port.patch(NODE_RESOURCE_POLICY, name, {"spec": {"config": dict(config)}})

        async def restore() -> None:
            await put(original)

        self.restore.append(restore)
        await put(changed)
        revision = config_revision(changed)

        async def applied() -> bool:
            pods = await self.port.list(POD, namespace=self.view.node_namespace, field_selector=f"spec.nodeName={node}")
            for pod in pods.items:
                cond = condition(pod, POLICY_CONDITION)
                if cond and cond.get("status") == "True" and cond.get("message") == f"revision {revision}":
                    return attribute(await self.nrt(node), "topologyManagerPolicy") == target
            return False

        try:
            await _wait(f"policy {target} applied and published", applied, self.opts)
        except TimeoutError as exc:
            return CheckResult(check, Status.FAIL, str(exc), time.monotonic() - started)
        finally:
            await restore()
            self.restore.remove(restore)
        now = self.view.component_pod("agent", node)
        restarted = agent_uid is not None and (now or {}).get("metadata", {}).get("uid") != agent_uid
        return CheckResult(
            check,
            Status.PASS,
            f"{current} → {target} applied live on {node} (revision {revision}), restored"
            + (" (the agent pod was replaced meanwhile)" if restarted else ""),
            time.monotonic() - started,
        )

    async def cleanup(self) -> list[str]:
        problems: list[str] = []
        for undo in reversed(self.restore):
            try:
                await undo()
            except KubeError as exc:
                problems.append(f"restoring a policy failed: {exc}")
        try:
            await self.port.delete(NAMESPACE, self.namespace)
        except NotFound:
            pass
        except KubeError as exc:
            problems.append(f"namespace {self.namespace} not deleted: {exc}")
        return problems


async def serial_checks(
    port: LightkubePort, view: ClusterView, opts: SerialOptions
) -> tuple[list[CheckResult], list[str]]:
    """Every disruptive check, and the clean-up's problems (empty when everything was removed)."""
    run = SerialRun(port, view, opts)
    results: list[CheckResult] = []
    await port.create(
        NAMESPACE,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": run.namespace, "labels": {E2E_LABEL: "run"}}},
    )
    try:
        done: set[str] = set()
        for node in view.selected_nodes():
            group = view.group_of(node)
            if group is None or group.name in done:
                continue
            done.add(group.name)
            name = name_of(node)
            result, canary = await run.canary(group, name)
            results.append(result)
            if group.enforcement is Enforcement.AGENT:
                results.append(await run.agent_restart(name, canary))
                results.append(await run.policy_change(group, name))
        if not done:
            results.append(CheckResult("canary", Status.SKIP, "no node of a node group selected", 0.0))
    except KubeError as exc:
        results.append(CheckResult("serial", Status.FAIL, f"API error: {exc}", 0.0))
    finally:
        problems = await run.cleanup()
    return results, problems
