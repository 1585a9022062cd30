"""The operator's controllers on the project's kube runtime: informers → work queue → reconcile.

Keys in the one work queue: ``"operator"`` (the NUMAResourcesOperator singleton: node objects,
policy ConfigMaps, NRT garbage collection), ``"scheduler"`` (the NUMAResourcesScheduler), and
``"policy/<name>"`` (a NodeResourcePolicy's status). Informers on the custom resources, every owned
kind (DaemonSets, Deployments, ConfigMaps, Services, NetworkPolicies, ServiceAccounts, Roles,
ClusterRoles and their bindings: a deleted or edited one is re-applied within seconds), agent pods and
nodes only *enqueue*; reconcile reads the API directly,
renders the desired state purely (:mod:`.render`), applies and prunes it (:mod:`.apply`), then
writes status (:mod:`.status`) only when it changed.

Rules:

* pause annotation (``numaplane.io/pause-reconciliation: "true"``): nothing is written, not even status;
* an invalid resource → ``Degraded`` with the exact reason and message; nothing is applied or pruned;
  an invalid NodeResourcePolicy leaves its group's last ConfigMap in place;
* an API error → the key is retried with per-key exponential backoff (the queue's rate limiter);
* a deleted resource → everything labelled as owned by it is pruned (a real cluster's garbage
  collector would also do it through ownerReferences; the explicit prune works without one);
* NRT objects whose Node no longer exists are deleted (exporters only ever write their own node's);
  so are NRT objects written by our exporter (``app.kubernetes.io/managed-by: numaplane-exporter``)
  whose node left the stack: no NUMAResourcesOperator (deleted: its DaemonSets are pruned), or a
  Node that no node group's selector selects any more. Nothing republishes such an object, and a
  NUMA-aware scheduler would trust it forever (RTE#203). Objects of other writers are left alone,
  and nothing is collected while the NUMAResourcesOperator is paused or invalid (its group
  membership is then unknown). Collection runs at start, after every operator reconcile, on Node
  deletions and label changes, and when an NRT object appears (an exporter still running on a node
  that has just left republishes until its pod is gone: each such write is collected again).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from numaplane.kube.clock import Clock, SystemClock, format_time
from numaplane.kube.errors import KubeError, NotFound
from numaplane.kube.informer import EventHandlers, Informer
from numaplane.kube.port import JsonObj, KubePort
from numaplane.kube.resources import NAMESPACE, NODE, NODE_RESOURCE_TOPOLOGY, POD, Resource
from numaplane.kube.worker import run_worker
from numaplane.kube.workqueue import WorkQueue
from numaplane.nrt.crd import crd_manifest as nrt_crd_manifest
from numaplane.operator.api import numaresources as nro_api
from numaplane.operator.api import policy as nrp_api
from numaplane.operator.api import scheduler as nrs_api
from numaplane.operator.api.meta import GROUP, VERSION, is_paused, read_meta
from numaplane.operator.api.numaresources import NUMAResourcesOperator
from numaplane.operator.api.policy import NodeResourcePolicy
from numaplane.operator.api.scheduler import NUMAResourcesScheduler
from numaplane.operator.api.selector import NodeSelector
from numaplane.operator.apply import PRUNABLE, Applier, ObjectId, object_id
from numaplane.operator.assignment import assign_policies
from numaplane.operator.errors import SpecError
from numaplane.operator.metrics import Metrics
from numaplane.operator.progress import operator_progress, policy_counts, policy_progress, related_objects
from numaplane.operator.render import Inputs, render_stack
from numaplane.operator.render_common import (
    LABEL_COMPONENT,
    LABEL_MANAGED_BY,
    LABEL_NODE_GROUP,
    LABEL_OWNER,
    LABEL_PART_OF,
    MANAGED_BY,
    Settings,
)
from numaplane.operator.render_nodes import policy_configmap_name
from numaplane.operator.render_scheduler import NAME as SCHEDULER_DEPLOYMENT
from numaplane.operator.status import State, conditions, policy_nodes, same_status
from numaplane.resources.duration import format_duration
from numaplane.resources.meta import labels_of, name_of
from numaplane.supervisor import Supervisor

__all__ = ["NODE_RESOURCE_POLICY", "NUMA_RESOURCES_OPERATOR", "NUMA_RESOURCES_SCHEDULER", "Operator"]

log = logging.getLogger(__name__)

NUMA_RESOURCES_OPERATOR = Resource(GROUP, VERSION, nro_api.KIND, nro_api.PLURAL, False, True, ("numaresop",))
NUMA_RESOURCES_SCHEDULER = Resource(GROUP, VERSION, nrs_api.KIND, nrs_api.PLURAL, False, True, ("numaressched",))
NODE_RESOURCE_POLICY = Resource(GROUP, VERSION, nrp_api.KIND, nrp_api.PLURAL, False, True, ("nrpolicy",))
OPERATOR_KEY = "operator"
SCHEDULER_KEY = "scheduler"
NRT_GC_KEY = "nrt-gc"
#: Objects other tools may own too: created when missing, never re-applied (no fight over fields).
SHARED_OBJECTS: frozenset[ObjectId] = frozenset({("CustomResourceDefinition", "", name_of(nrt_crd_manifest()))})
PROGRESS_REQUEUE_SECONDS = 5.0
#: The label our exporter puts on the NRT objects it writes (``numaplane.exporter.scan``; the
#: operator may not import the exporter, a test checks the two agree).
EXPORTER_MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
EXPORTER_MANAGED_BY = "numaplane-exporter"


class Operator:
    """All three controllers over one :class:`KubePort`. Run with :meth:`run`; test with :meth:`reconcile`."""

    def __init__(
        self,
        kube: KubePort,
        settings: Settings,
        *,
        clock: Clock | None = None,
        metrics: Metrics | None = None,
        workers: int = 1,
        resync_period_seconds: float | None = 300.0,
    ) -> None:
        self.kube = kube
        self.settings = settings
        self.clock: Clock = clock or SystemClock()
        self.metrics = metrics or Metrics.create()
        self.workers = workers
        self.applier = Applier(kube, (settings.namespace, settings.node_namespace))
        self.queue: WorkQueue[str] = WorkQueue(clock=self.clock, name="operator")
        ns = settings.namespace
        self.informers = [
            Informer(kube, NUMA_RESOURCES_OPERATOR, clock=self.clock, resync_period_seconds=resync_period_seconds),
            Informer(kube, NUMA_RESOURCES_SCHEDULER, clock=self.clock, resync_period_seconds=resync_period_seconds),
            Informer(kube, NODE_RESOURCE_POLICY, clock=self.clock),
            Informer(
                kube,
                POD,
                namespace=settings.node_namespace,
                label_selector=f"{LABEL_COMPONENT}=agent",
                clock=self.clock,
            ),
            Informer(kube, NODE, clock=self.clock),
            Informer(kube, NODE_RESOURCE_TOPOLOGY, clock=self.clock),
        ]
        # Every kind the operator owns (and prunes), ours only: a deleted or edited object brings its
        # owner's reconcile back at once, which re-applies it (issue 25 item 15).
        owned = f"{LABEL_MANAGED_BY}={MANAGED_BY}"
        # Namespaced kinds are watched in both namespaces (the operator's Roles are per namespace).
        self.owned_informers = [
            Informer(
                kube,
                res,
                namespace=where,
                label_selector=owned,
                clock=self.clock,
                name=f"{res.plural}-{where}" if where else res.plural,
            )
            for res in PRUNABLE
            for where in ((ns, settings.node_namespace) if res.namespaced else (None,))
        ]
        # The two namespaces too (never pruned, so not PRUNABLE): their Pod Security labels are what keeps
        # privileged pods out of the install namespace, so a change to them is undone at once.
        self.namespace_informer = Informer(
            kube,
            NAMESPACE,
            label_selector=f"{LABEL_COMPONENT}=namespace,{LABEL_PART_OF}=numaplane",
            clock=self.clock,
        )
        self.owned_informers.append(self.namespace_informer)
        self._wire()

    # ------------------------------------------------------------------ wiring

    @staticmethod
    def _handlers(enqueue: Callable[[JsonObj], None]) -> EventHandlers:
        return EventHandlers(
            on_add=enqueue,
            on_update=lambda _old, new: enqueue(new),
            on_delete=enqueue,
        )

    def _wire(self) -> None:
        nro_inf, nrs_inf, nrp_inf, pod_inf, node_inf, nrt_inf = self.informers
        self._policies = nrp_inf
        nro_inf.add_handler(self._handlers(lambda _o: self.queue.add(OPERATOR_KEY)))
        nrs_inf.add_handler(self._handlers(lambda _o: self.queue.add(SCHEDULER_KEY)))

        def on_policy(obj: JsonObj) -> None:
            self.queue.add(OPERATOR_KEY)
            self.queue.add(f"policy/{obj['metadata']['name']}")

        nrp_inf.add_handler(self._handlers(on_policy))
        for informer in self.owned_informers:
            if informer is self.namespace_informer:
                informer.add_handler(self._handlers(self._namespace_changed))
            else:
                informer.add_handler(self._handlers(self._owned_changed))
        pod_inf.add_handler(self._handlers(lambda _o: self._enqueue_policies()))
        # Nothing the operator renders depends on Nodes (DaemonSets select them; their status says how
        # many are ready): a Node event only matters for NRT collection, when a Node goes or its
        # labels change (it may have left every node group).
        node_inf.add_handler(
            EventHandlers(
                on_update=self._node_labels_changed,
                on_delete=lambda _o: self.queue.add(NRT_GC_KEY),
            )
        )
        # An NRT object that appears may belong to a node outside the stack (module docstring);
        # updates are not watched for: an object of a node outside the stack was collected when it
        # appeared or when its node left.
        nrt_inf.add_handler(EventHandlers(on_add=lambda _o: self.queue.add(NRT_GC_KEY)))

    def _owned_changed(self, obj: JsonObj) -> None:
        """An owned object appeared, changed or went: reconcile its owner (its ``numaplane.io/owner`` label)."""
        owner = ((obj.get("metadata") or {}).get("labels") or {}).get(LABEL_OWNER)
        if owner == nrs_api.KIND.lower():
            self.queue.add(SCHEDULER_KEY)
        elif owner == nro_api.KIND.lower():
            self.queue.add(OPERATOR_KEY)

    def _namespace_changed(self, obj: JsonObj) -> None:
        """One of our two namespaces changed or went: both controllers render it, both re-apply it."""
        if (obj.get("metadata") or {}).get("name") in (self.settings.namespace, self.settings.node_namespace):
            self.queue.add(OPERATOR_KEY)
            self.queue.add(SCHEDULER_KEY)

    def _node_labels_changed(self, old: JsonObj, new: JsonObj) -> None:
        if (old.get("metadata") or {}).get("labels") != (new.get("metadata") or {}).get("labels"):
            self.queue.add(NRT_GC_KEY)

    def _enqueue_policies(self) -> None:
        for obj in self._policies.store.list_objects():
            self.queue.add(f"policy/{obj['metadata']['name']}")

    @property
    def synced(self) -> bool:
        return all(i.has_synced for i in (*self.informers, *self.owned_informers))

    # ------------------------------------------------------------------ running

    async def run(self) -> None:
        """Run informers and workers under one :class:`~numaplane.supervisor.Supervisor`; return only
        when cancelled (then every task is stopped and awaited). A task that fails stops the others
        and raises :class:`~numaplane.supervisor.TaskFailed` (reconcile errors are retried, not fatal)."""
        async with Supervisor("operator") as tasks:
            for informer in (*self.informers, *self.owned_informers):
                tasks.spawn(informer.run(), f"informer-{informer.name}")
            self.queue.add(NRT_GC_KEY)  # nodes deleted while no operator ran
            for number in range(self.workers):
                tasks.spawn(self._worker(), f"worker-{number}")
            try:
                await tasks.wait()
            finally:
                self.queue.shutdown()

    async def _worker(self) -> None:
        await run_worker(self.queue, self._reconcile_and_requeue, self._reconcile_failed)

    async def _reconcile_and_requeue(self, key: str) -> None:
        requeue = await self.reconcile(key)
        self.queue.forget(key)
        if requeue is not None:
            self.queue.add_after(key, requeue)

    def _reconcile_failed(self, key: str, exc: Exception) -> None:
        """Called inside the worker's ``except`` block: a failed reconcile is retried with backoff."""
        if isinstance(exc, KubeError):
            log.warning("reconcile %s failed: %s; retrying with backoff", key, exc)
        else:
            log.exception("reconcile %s crashed; retrying with backoff", key)
        self.queue.add_rate_limited(key)

    async def reconcile(self, key: str) -> float | None:
        """Reconcile one key; returns seconds until it should run again (``None``: on events only)."""
        controller = key.split("/", 1)[0]
        started = time.perf_counter()
        result = "error"
        try:
            if key == OPERATOR_KEY:
                out = await self.reconcile_operator()
            elif key == SCHEDULER_KEY:
                out = await self.reconcile_scheduler()
            elif key == NRT_GC_KEY:
                await self._collect_nrt_garbage()
                out = None
            elif key.startswith("policy/"):
                out = await self.reconcile_policy(key.split("/", 1)[1])
            else:
                raise ValueError(f"unknown key {key!r}")
            result = "success"
            return out
        finally:
            self.metrics.reconciles.labels(controller, result).inc()
            self.metrics.duration.labels(controller).observe(time.perf_counter() - started)

    # ------------------------------------------------------------------ helpers

    def _now(self) -> str:
        return format_time(self.clock.now())

    async def _get(self, res: Resource, name: str) -> JsonObj | None:
        try:
            return await self.kube.get(res, name)
        except NotFound:
            return None

    async def _write_status(self, res: Resource, live: JsonObj, status: dict[str, Any]) -> bool:
        if same_status(live.get("status"), status):
            return False
        await self.kube.update_status(res, {**live, "status": status})
        return True

    def _count(self, applied: list[ObjectId], pruned: list[ObjectId]) -> None:
        for kind, namespace, name in applied:
            self.metrics.applied.labels(kind).inc()
            log.info(
                "applied %s %s%s: missing or differing from the rendering",
                kind,
                f"{namespace}/" if namespace else "",
                name,
            )
        for kind, namespace, name in pruned:
            self.metrics.pruned.labels(kind).inc()
            log.info("deleted %s %s%s: no longer rendered", kind, f"{namespace}/" if namespace else "", name)

    async def _degrade(
        self, res: Resource, live: JsonObj, exc: SpecError, extra: Mapping[str, Any] | None = None
    ) -> None:
        meta = read_meta(live)
        previous = dict(live.get("status") or {})
        status = {
            **previous,
            **(extra or {}),
            "observedGeneration": meta.generation,
            "conditions": conditions(
                previous.get("conditions") or [], State.degraded(exc.reason, str(exc)), meta.generation, self._now()
            ),
        }
        await self._write_status(res, live, status)

    async def _policies_parsed(self) -> tuple[list[NodeResourcePolicy], set[str]]:
        """Valid policies, and the node groups targeted by invalid ones (their ConfigMaps are frozen)."""
        valid: list[NodeResourcePolicy] = []
        frozen: set[str] = set()
        for obj in (await self.kube.list(NODE_RESOURCE_POLICY)).items:
            try:
                valid.append(NodeResourcePolicy.from_dict(obj))
            except SpecError:
                frozen.add(str((obj.get("spec") or {}).get("nodeGroup", "")))
        return valid, frozen

    # ------------------------------------------------------------------ NUMAResourcesOperator

    async def reconcile_operator(self) -> float | None:
        owner_label = nro_api.KIND.lower()
        live = await self._get(NUMA_RESOURCES_OPERATOR, nro_api.SINGLETON_NAME)
        if live is None:
            # deleted (or never created): remove everything it owned; keep the namespace and the CRD
            pruned = await self.applier.prune(owner_label, set())
            self._count([], pruned)
            self.queue.add(NRT_GC_KEY)  # its nodes left the stack: their NRT objects go too
            return None
        meta = read_meta(live)
        if is_paused(meta):
            return None
        try:
            nro = NUMAResourcesOperator.from_dict(live)
        except SpecError as exc:
            await self._degrade(NUMA_RESOURCES_OPERATOR, live, exc)
            return None
        policies, frozen = await self._policies_parsed()
        desired = render_stack(Inputs(nro, None, tuple(policies)), self.settings)
        assignment = assign_policies(nro, policies)
        keep: set[ObjectId] = set()
        for group in frozen:
            if group not in assignment.by_group:
                cm = ("ConfigMap", self.settings.node_namespace, policy_configmap_name(group))
                desired = [o for o in desired if object_id(o) != cm]
                keep.add(cm)
        result = await self.applier.sync(desired, owner_label=owner_label, keep=keep, create_only=SHARED_OBJECTS)
        self._count(result.applied, result.pruned)
        state, groups, ready = operator_progress(nro, result.live, self.settings.node_namespace)
        status: dict[str, Any] = {
            "observedGeneration": meta.generation,
            "conditions": conditions(
                (live.get("status") or {}).get("conditions") or [], state, meta.generation, self._now()
            ),
            "nodeGroups": groups,
            "daemonSets": ready,
            "relatedObjects": related_objects(desired, self.settings.namespace),
        }
        await self._write_status(NUMA_RESOURCES_OPERATOR, live, status)
        self.queue.add(NRT_GC_KEY)  # a node group's selector may have changed
        return PROGRESS_REQUEUE_SECONDS if state.reason.endswith("IsUpdating") else None

    async def _stack_selectors(self) -> list[NodeSelector] | None:
        """The node groups' selectors (``[]``: no NUMAResourcesOperator, no node is in the stack);
        ``None`` when membership is unknown (the resource is paused or invalid)."""
        live = await self._get(NUMA_RESOURCES_OPERATOR, nro_api.SINGLETON_NAME)
        if live is None:
            return []
        if is_paused(read_meta(live)):
            return None
        try:
            nro = NUMAResourcesOperator.from_dict(live)
        except SpecError:
            return None
        return [group.node_selector for group in nro.node_groups]

    async def _collect_nrt_garbage(self) -> None:
        """Delete the NRT objects of nodes gone or outside the stack (module docstring)."""
        try:
            nrts = (await self.kube.list(NODE_RESOURCE_TOPOLOGY)).items
        except NotFound:  # the NRT CRD is not served (yet)
            return
        if not nrts:
            return
        node_labels: dict[str, Mapping[str, str]] = {
            name_of(o): labels_of(o) for o in (await self.kube.list(NODE)).items
        }
        selectors = await self._stack_selectors()
        for nrt in nrts:
            meta = nrt.get("metadata") or {}
            name = meta["name"]
            labels = node_labels.get(name)
            if labels is None:
                why = "its node is gone"
            elif selectors is None or (meta.get("labels") or {}).get(EXPORTER_MANAGED_BY_LABEL) != EXPORTER_MANAGED_BY:
                continue
            elif not selectors:
                why = "no NUMAResourcesOperator: its node left the stack"
            elif not any(selector.matches(labels) for selector in selectors):
                why = "no node group selects its node any more"
            else:
                continue
            with contextlib.suppress(NotFound):
                await self.kube.delete(NODE_RESOURCE_TOPOLOGY, name)
                self.metrics.nrt_collected.inc()
                log.info("deleted NodeResourceTopology %s: %s", name, why)

    # ------------------------------------------------------------------ NUMAResourcesScheduler

    async def reconcile_scheduler(self) -> float | None:
        owner_label = nrs_api.KIND.lower()
        live = await self._get(NUMA_RESOURCES_SCHEDULER, nrs_api.SINGLETON_NAME)
        if live is None:
            self._count([], await self.applier.prune(owner_label, set()))
            return None
        meta = read_meta(live)
        if is_paused(meta):
            return None
        try:
            nrs = NUMAResourcesScheduler.from_dict(live)
        except SpecError as exc:
            await self._degrade(NUMA_RESOURCES_SCHEDULER, live, exc)
            return None
        desired = render_stack(Inputs(None, nrs, ()), self.settings)
        result = await self.applier.sync(desired, owner_label=owner_label)
        self._count(result.applied, result.pruned)
        ns = self.settings.namespace
        dep = result.live.get(("Deployment", ns, SCHEDULER_DEPLOYMENT)) or {}
        st = dep.get("status") or {}
        generation = int((dep.get("metadata") or {}).get("generation") or 0)
        available = (
            int(st.get("observedGeneration") or 0) >= generation
            and int(st.get("availableReplicas") or 0) >= nrs.replicas
        )
        state = (
            State.available(f"{nrs.scheduler_name} is available")
            if available
            else State.progressing("DeploymentIsUpdating", f"{SCHEDULER_DEPLOYMENT} is updating")
        )
        status = {
            "observedGeneration": meta.generation,
            "conditions": conditions(
                (live.get("status") or {}).get("conditions") or [], state, meta.generation, self._now()
            ),
            "deployment": {"namespace": ns, "name": SCHEDULER_DEPLOYMENT},
            "schedulerName": nrs.scheduler_name,
            "cacheResyncPeriod": format_duration(nrs.cache_resync_period_seconds),
            "relatedObjects": related_objects(desired, self.settings.namespace),
        }
        await self._write_status(NUMA_RESOURCES_SCHEDULER, live, status)
        return None if available else PROGRESS_REQUEUE_SECONDS

    # ------------------------------------------------------------------ NodeResourcePolicy

    async def reconcile_policy(self, name: str) -> float | None:
        live = await self._get(NODE_RESOURCE_POLICY, name)
        if live is None:
            return None
        meta = read_meta(live)
        if is_paused(meta):
            return None
        try:
            policy = NodeResourcePolicy.from_dict(live)
        except SpecError as exc:
            await self._degrade(NODE_RESOURCE_POLICY, live, exc)
            return None
        nro_obj = await self._get(NUMA_RESOURCES_OPERATOR, nro_api.SINGLETON_NAME)
        nro: NUMAResourcesOperator | None = None
        if nro_obj is not None:
            with contextlib.suppress(SpecError):
                nro = NUMAResourcesOperator.from_dict(nro_obj)
        policies, _ = await self._policies_parsed()
        assignment = assign_policies(nro, policies)
        previous = dict(live.get("status") or {})
        status: dict[str, Any] = {"observedGeneration": meta.generation, "revision": policy.revision}
        if name in assignment.rejected:
            reason, message = assignment.rejected[name]
            state = State.degraded(reason, message)
            nodes: list[dict[str, Any]] = []
        else:
            selector = f"{LABEL_COMPONENT}=agent,{LABEL_NODE_GROUP}={policy.node_group}"
            pods = (await self.kube.list(POD, namespace=self.settings.node_namespace, label_selector=selector)).items
            nodes = policy_nodes(pods, policy.revision)
            state = policy_progress(nodes)
        status.update(
            {
                "conditions": conditions(previous.get("conditions") or [], state, meta.generation, self._now()),
                "nodes": nodes,
                **policy_counts(nodes),
            }
        )
        await self._write_status(NODE_RESOURCE_POLICY, live, status)
        return None
