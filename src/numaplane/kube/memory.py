"""An in-memory Kubernetes API: :class:`InMemoryKube` implements :class:`~numaplane.kube.port.KubePort`.

It answers each :class:`~numaplane.kube.port.Request` from an
:class:`~numaplane.kube.objectstore.ObjectStore` (objects, versions, writes; the pure write rules
are :mod:`numaplane.kube.writes`, CRD serving :mod:`numaplane.kube.crdserving`).

It is the Python analogue of controller-runtime's fake client, and it is also the store behind the
project's fake API server (``numaplane.testing.fakeapi``), so both fakes share one set of semantics:

* one global ``resourceVersion`` counter (decimal strings), bumped by every write; no-op updates do
  not bump it; ``uid``, ``creationTimestamp`` and ``generation`` are set by the store; ``generation``
  grows when anything outside ``metadata`` and ``status`` changes;
* ``replace`` / ``update_status`` / a merge patch carrying ``metadata.resourceVersion`` are
  conditional: a stale version is a 409 :class:`~numaplane.kube.errors.Conflict`;
* status subresource (for resources that have one): main writes keep ``status``, status writes
  change only ``status``; on create ``status`` is dropped (pods start ``Pending``, namespaces
  ``Active``, nodes keep what they register with);
* server-side apply approximated by :mod:`numaplane.kube.ssa` (managed fields, conflicts, force);
* ``pods/binding`` sets ``spec.nodeName`` (and the ``PodScheduled`` condition) once, then 409;
* objects with ``metadata.finalizers`` are only marked deleted (``deletionTimestamp``) and go away
  when the last finalizer is removed; everything else is deleted at once (no grace periods);
* creating a CRD serves its resources (see :meth:`served_resources`); deleting it deletes its objects;
  custom resources are pruned and validated against their CRD's schema and CEL rules, and a CRD whose
  rules kube-apiserver would refuse is refused (:mod:`numaplane.kube.crdschema`);
* watches: each change is kept in a bounded history (``history_limit`` events); watching from a
  version older than the history is a 410 :class:`~numaplane.kube.errors.Gone`, as is watching
  from a version the store has never reached (state was lost, e.g. a restarted fake server) —
  a real server would wait or answer 504; relisting is the right reaction in both cases;
  bookmarks are sent by :meth:`send_bookmarks` (and every ``bookmark_interval_seconds`` if set).

Not modelled: namespace deletion cascading to its contents, garbage collection by owner
references, admission, validation of built-in kinds against their schemas, list at an older ``resourceVersion`` (a continued list,
:meth:`InMemoryKube.list_page`, resumes after the last key it returned, in the *current* state:
objects created behind that key during the listing are not returned, as they would not be by a
real server's consistent snapshot, but objects changed ahead of it are seen in their new state), strategic merge patch (callers of the fake server get merge semantics).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterable, Mapping
from typing import Any

from numaplane.kube.clock import Clock, SystemClock
from numaplane.kube.errors import KubeError, NotFound
from numaplane.kube.objectstore import ObjectStore
from numaplane.kube.patch import clone
from numaplane.kube.port import JsonObj, KubePort, ObjectList, Request, Response, Verb, WatchEvent
from numaplane.kube.resources import NAMESPACE, Resource
from numaplane.kube.watchhub import present
from numaplane.kube.writes import check_version, name_of

__all__ = ["SEED_NAMESPACES", "InMemoryKube"]

#: The namespaces a new cluster starts with.
SEED_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class InMemoryKube(KubePort):
    """An in-process Kubernetes API store implementing the port (see the module docstring).

    ``strict_resources``: when true, resource types that are neither built in nor defined by a
    stored CRD answer 404 (as a real server does); by default any :class:`Resource` is accepted.
    """

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        history_limit: int = 1000,
        seed_namespaces: bool = True,
        strict_resources: bool = False,
        bookmark_interval_seconds: float | None = None,
    ) -> None:
        self.store = ObjectStore(
            clock=clock or SystemClock(),
            history_limit=history_limit,
            strict_resources=strict_resources,
            bookmark_interval_seconds=bookmark_interval_seconds,
        )
        self.closed = False
        if seed_namespaces:
            for ns in SEED_NAMESPACES:
                self.store.create(NAMESPACE, {"metadata": {"name": ns}}, None, None)

    # ------------------------------------------------------------------ introspection

    @property
    def clock(self) -> Clock:
        """The clock behind timestamps (``creationTimestamp``, managed fields, bindings)."""
        return self.store.clock

    @property
    def resource_version(self) -> str:
        """The store's current ``resourceVersion``."""
        return str(self.store.rv)

    @property
    def oldest_watchable_version(self) -> int:
        """Watching from a version below this answers 410 Gone."""
        return self.store.hub.oldest_watchable(self.store.rv)

    def served_resources(self) -> list[Resource]:
        """Built-in resources plus every version served by a stored CRD."""
        return self.store.served_resources()

    def find_resource(self, group: str, version: str, plural: str) -> Resource | None:
        """The served resource at ``/apis/<group>/<version>/<plural>``, if any."""
        return self.store.find_resource(group, version, plural)

    def watcher_count(self) -> int:
        return len(self.store.hub.watchers)

    # ------------------------------------------------------------------ test controls

    def compact(self) -> None:
        """Forget the whole watch history: every watch from an older version now gets 410."""
        self.store.hub.compact()

    def send_bookmarks(self) -> None:
        """Send a ``BOOKMARK`` at the current version to every watcher that allows bookmarks."""
        self.store.hub.send_bookmarks(self.store.rv)

    def close_watches(self, error: KubeError | None = None) -> None:
        """End every open watch: with ``error`` raised to the consumer, or as a normal end of stream."""
        self.store.hub.close(error)

    # ------------------------------------------------------------------ the port

    async def send(self, request: Request) -> Response:
        """Answer one request against the store (no I/O: the store changes before this returns)."""
        store = self.store
        res, ns, name, body = request.resource, request.namespace, request.name or "", request.body
        verb, sub = request.verb, request.subresource
        if verb is Verb.GET:
            return present(res, store.lookup(res, name, ns))
        if verb is Verb.LIST:
            return self.list_page(
                res,
                limit=request.limit,
                continue_token=request.continue_token,
                namespace=ns,
                label_selector=request.label_selector,
                field_selector=request.field_selector,
            )
        if verb is Verb.CREATE:
            if sub == "binding":
                return store.bind(name, ns, body or {})
            return store.create(res, body, ns, request.field_manager)
        if verb is Verb.UPDATE:
            if sub == "status" and not res.status_subresource:
                raise NotFound(f"the server could not find the requested resource ({res}/status)")
            current = store.lookup(res, name_of(body), ns)
            check_version(res, current, (body.get("metadata") or {}).get("resourceVersion"))
            return store.update(res, current, body, field_manager=request.field_manager, subresource=sub)
        if verb is Verb.PATCH:
            return store.patch(res, name, body, ns, request.patch_type, request.field_manager, request.force, sub)
        if verb is Verb.DELETE:
            return store.delete(res, name, ns)
        raise ValueError(f"verb {verb} is not a unary request")

    def list_page(
        self,
        res: Resource,
        *,
        limit: int | None = None,
        continue_token: str | None = None,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ObjectList:
        """One page of ``list``: at most ``limit`` objects (``None``: all) after ``continue_token``; the
        listing carries the token of the next page (``None`` after the last). Tokens are opaque; a
        malformed one is ``Invalid``."""
        return self.store.list_page(
            res,
            limit=limit,
            continue_token=continue_token,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
        )

    def stream(self, request: Request) -> AsyncGenerator[WatchEvent, None]:
        """The watch, subscribed now: a refused version or resource raises here, not on first read."""
        return self.open_watch(
            request.resource,
            namespace=request.namespace,
            label_selector=request.label_selector,
            field_selector=request.field_selector,
            resource_version=request.resource_version,
            allow_bookmarks=request.allow_bookmarks,
        )

    def open_watch(
        self,
        res: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        allow_bookmarks: bool = True,
    ) -> AsyncGenerator[WatchEvent, None]:
        """Like :meth:`watch`, but validates and subscribes now (errors raise here, not on first read)."""
        if namespace is not None and not res.namespaced:
            raise ValueError(f"{res.kind} is cluster-scoped; no namespace expected, got {namespace!r}")
        store = self.store
        store.check_served(res)
        watcher = store.hub.subscribe(
            res,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            resource_version=resource_version,
            allow_bookmarks=allow_bookmarks,
            current_rv=store.rv,
            objects=store.bucket(res).values(),
        )
        return store.hub.stream(watcher, lambda: store.rv)

    async def close(self) -> None:
        self.closed = True
        self.close_watches()

    # ------------------------------------------------------------------ seeding helpers

    def seed(self, res: Resource, objects: Iterable[Mapping[str, Any]]) -> list[JsonObj]:
        """Create objects synchronously, status included (test setup; bypasses the status rules and the
        CRD schemas, to model objects that got in before a rule existed)."""
        store = self.store
        out = []
        store.admission = False
        try:
            for obj in objects:
                created = store.create(res, obj, None, None)
                if "status" in obj and res.status_subresource:
                    current = store.lookup(res, name_of(created), created["metadata"].get("namespace"))
                    created = store.update(res, current, obj, field_manager=None, subresource="status")
                out.append(created)
        finally:
            store.admission = True
        return out

    def snapshot(self) -> dict[str, list[JsonObj]]:
        """Every stored object by ``<plural>.<group>`` (for debugging and assertions)."""
        return {
            f"{plural}.{group}" if group else plural: [clone(o) for _, o in sorted(bucket.items())]
            for (group, plural), bucket in sorted(self.store.objects.items())
        }
