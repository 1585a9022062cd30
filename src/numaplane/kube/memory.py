"""An in-memory Kubernetes API: :class:`InMemoryKube` implements :class:`~numaplane.kube.port.KubePort`.

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

import base64
import bisect
import itertools
import json
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping, Sequence
from typing import Any

from numaplane.kube.clock import Clock, SystemClock, format_time
from numaplane.kube.crdschema import CRDSchema, crd_rule_problems
from numaplane.kube.errors import AlreadyExists, Conflict, Invalid, KubeError, NotFound
from numaplane.kube.patch import clone, json_patch, merge_patch
from numaplane.kube.port import (
    EventType,
    JsonObj,
    ObjectList,
    PatchType,
    WatchEvent,
    resolve_namespace,
)
from numaplane.kube.resources import (
    BUILTIN_RESOURCES,
    CRD,
    EVENT,
    NAMESPACE,
    NODE,
    POD,
    Resource,
    resources_from_crd,
)
from numaplane.kube.selectors import FieldSelector, LabelSelector
from numaplane.kube.ssa import apply_config, record_update
from numaplane.kube.watchhub import Change, Watcher, WatchHub, present

__all__ = ["InMemoryKube"]

_StoreKey = tuple[str, str]  # (group, plural)
_ObjKey = tuple[str, str]  # (namespace or "", name)

_Objects = list[JsonObj]

SEED_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def _strip_volatile(obj: Mapping[str, Any]) -> JsonObj:
    out = dict(obj.items())
    meta = dict(out.get("metadata") or {})
    for key in ("resourceVersion", "managedFields"):
        meta.pop(key, None)
    out["metadata"] = meta
    return out


def _ownership(obj: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    """Managed-field owners and their field sets, without timestamps (to detect no-op writes)."""
    entries = (obj.get("metadata") or {}).get("managedFields") or []
    return sorted(
        (str(e.get("manager")), str(e.get("operation")), str(e.get("subresource", "")), repr(e.get("fieldsV1")))
        for e in entries
    )


def _spec_part(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


class InMemoryKube:
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
        self.clock: Clock = clock or SystemClock()
        self.strict_resources = strict_resources
        self._rv = 0
        self._objects: dict[_StoreKey, dict[_ObjKey, JsonObj]] = {}
        self._sorted_keys: dict[_StoreKey, list[_ObjKey]] = {}  # per bucket, dropped when keys change
        self._hub = WatchHub(history_limit, bookmark_interval_seconds)
        self._uids = itertools.count(1)
        self._names = itertools.count(1)
        self._crd_resources: dict[str, list[Resource]] = {}
        self._crd_schemas: dict[tuple[str, str, str], CRDSchema] = {}
        self._admission = True  # CRD schema pruning and validation on every write (off while seeding)
        self.closed = False
        if seed_namespaces:
            for ns in SEED_NAMESPACES:
                self._create(NAMESPACE, {"metadata": {"name": ns}}, None, None)

    # ------------------------------------------------------------------ introspection

    @property
    def resource_version(self) -> str:
        """The store's current ``resourceVersion``."""
        return str(self._rv)

    @property
    def oldest_watchable_version(self) -> int:
        """Watching from a version below this answers 410 Gone."""
        return self._hub.oldest_watchable(self._rv)

    def served_resources(self) -> list[Resource]:
        """Built-in resources plus every version served by a stored CRD."""
        out = list(BUILTIN_RESOURCES)
        for resources in self._crd_resources.values():
            out.extend(resources)
        return out

    def find_resource(self, group: str, version: str, plural: str) -> Resource | None:
        """The served resource at ``/apis/<group>/<version>/<plural>``, if any."""
        for res in self.served_resources():
            if res.group == group and res.version == version and res.plural == plural:
                return res
        return None

    def watcher_count(self) -> int:
        return len(self._hub.watchers)

    # ------------------------------------------------------------------ test controls

    def compact(self) -> None:
        """Forget the whole watch history: every watch from an older version now gets 410."""
        self._hub.compact()

    def send_bookmarks(self) -> None:
        """Send a ``BOOKMARK`` at the current version to every watcher that allows bookmarks."""
        self._hub.send_bookmarks(self._rv)

    def close_watches(self, error: KubeError | None = None) -> None:
        """End every open watch: with ``error`` raised to the consumer, or as a normal end of stream."""
        self._hub.close(error)

    # ------------------------------------------------------------------ internals

    def _check_served(self, res: Resource) -> None:
        if self.strict_resources and self.find_resource(res.group, res.version, res.plural) is None:
            raise NotFound(f"the server could not find the requested resource ({res})")

    def _bucket(self, res: Resource) -> dict[_ObjKey, JsonObj]:
        return self._objects.setdefault((res.group, res.plural), {})

    def _lookup(self, res: Resource, name: str, namespace: str | None) -> JsonObj:
        self._check_served(res)
        obj = self._bucket(res).get((namespace or "", name))
        if obj is None:
            raise NotFound(f'{res.plural}{"." + res.group if res.group else ""} "{name}" not found')
        return obj

    def _now(self) -> str:
        return format_time(self.clock.now())

    def _commit(self, res: Resource, kind: EventType, old: JsonObj | None, new: JsonObj) -> JsonObj:
        if kind is not EventType.DELETED and self._admission:
            new = self._admitted(res, new)
        self._rv += 1
        new.setdefault("metadata", {})["resourceVersion"] = str(self._rv)
        new["apiVersion"] = res.api_version
        new["kind"] = res.kind
        meta = new["metadata"]
        key = (str(meta.get("namespace") or ""), str(meta["name"]))
        bucket = self._bucket(res)
        if kind is EventType.DELETED:
            bucket.pop(key, None)
            self._sorted_keys.pop((res.group, res.plural), None)
        else:
            if key not in bucket:
                self._sorted_keys.pop((res.group, res.plural), None)
            bucket[key] = new
        self._hub.publish(Change(self._rv, kind, (res.group, res.plural), old, new))
        if res.group == CRD.group and res.plural == CRD.plural:
            self._crd_changed(kind, new)
        return present(res, new)

    def _admitted(self, res: Resource, obj: JsonObj) -> JsonObj:
        """``obj`` as the API server stores it: a custom resource pruned and validated by its CRD's schema;
        a CRD refused when kube-apiserver would refuse its CEL rules (see :mod:`numaplane.kube.crdschema`).
        """
        if res.group == CRD.group and res.plural == CRD.plural:
            problems = [
                f"spec.versions[{v.get('name')}].schema.openAPIV3Schema{p}"
                for v in (obj.get("spec") or {}).get("versions") or []
                if isinstance(v, Mapping)
                for p in crd_rule_problems(((v.get("schema") or {}).get("openAPIV3Schema")) or {})
            ]
            if problems:
                raise Invalid(
                    f'CustomResourceDefinition "{obj["metadata"].get("name")}" is invalid: ' + "; ".join(problems)
                )
            return obj
        schema = self._crd_schemas.get((res.group, res.version, res.plural))
        if schema is None:
            return obj
        pruned, violations = schema.admit(obj)
        if violations:
            name = (obj.get("metadata") or {}).get("name")
            raise Invalid(f'{res.kind} "{name}" is invalid: ' + "; ".join(violations[:20]))
        return pruned

    def _crd_changed(self, kind: EventType, crd: JsonObj) -> None:
        name = str(crd["metadata"]["name"])
        spec = crd.get("spec") or {}
        for version in spec.get("versions") or []:
            key = (
                str(spec.get("group", "")),
                str(version.get("name", "")),
                str((spec.get("names") or {}).get("plural", "")),
            )
            schema = (version.get("schema") or {}).get("openAPIV3Schema")
            if kind is EventType.DELETED or not isinstance(schema, Mapping):
                self._crd_schemas.pop(key, None)
            else:
                self._crd_schemas[key] = CRDSchema(schema)
        old = self._crd_resources.pop(name, [])
        if kind is EventType.DELETED:
            # Deleting a CRD deletes its objects (unless another CRD still serves the same store).
            for res in old[:1]:
                for obj in list(self._bucket(res).values()):
                    self._commit(res, EventType.DELETED, obj, clone(obj))
            return
        try:
            self._crd_resources[name] = resources_from_crd(crd)
        except (ValueError, KeyError):
            self._crd_resources[name] = []

    def _create(
        self,
        res: Resource,
        obj: Mapping[str, Any],
        namespace: str | None,
        field_manager: str | None,
        managed_fields: list[JsonObj] | None = None,
    ) -> JsonObj:
        ns = resolve_namespace(res, namespace, obj)
        self._check_served(res)
        body: JsonObj = clone(obj)
        meta = body.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise Invalid("metadata must be an object")
        name = meta.get("name")
        if not name:
            prefix = meta.get("generateName")
            if not prefix:
                raise Invalid(f"{res.kind}: metadata.name or metadata.generateName is required")
            name = f"{prefix}{next(self._names):05x}"
        if not isinstance(name, str):
            raise Invalid("metadata.name must be a string")
        if ns is not None:
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        meta["name"] = name
        if (ns or "", name) in self._bucket(res):
            raise AlreadyExists(
                f'{res.plural}{"." + res.group if res.group else ""} "{name}" already exists',
            )
        for key in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"):
            meta.pop(key, None)
        meta["uid"] = f"00000000-0000-4000-8000-{next(self._uids):012x}"
        meta["creationTimestamp"] = self._now()
        meta["generation"] = 1
        body["apiVersion"] = res.api_version
        body["kind"] = res.kind
        if res.status_subresource and res != NODE:
            body.pop("status", None)
        if res == POD:
            body["status"] = {"phase": "Pending"}
        elif res == NAMESPACE:
            body["status"] = {"phase": "Active"}
            body.setdefault("spec", {"finalizers": ["kubernetes"]})
        if managed_fields is not None:
            meta["managedFields"] = managed_fields
        else:
            record_update(
                None,
                body,
                manager=field_manager,
                api_version=res.api_version,
                now=self._now(),
                status_subresource=res.status_subresource,
            )
        return self._commit(res, EventType.ADDED, None, body)

    def _update(
        self,
        res: Resource,
        current: JsonObj,
        desired: Mapping[str, Any],
        *,
        field_manager: str | None,
        subresource: str = "",
        managed: bool = False,
    ) -> JsonObj:
        """Store ``desired`` as the new state of ``current`` after the server-side rules.

        ``managed``: ``desired`` already carries its managed fields (server-side apply).
        """
        if subresource == "status":
            new: JsonObj = clone(current)
            if "status" in desired:
                new["status"] = clone(desired["status"])
            else:
                new.pop("status", None)
            if managed:
                new["metadata"]["managedFields"] = clone((desired.get("metadata") or {}).get("managedFields", []))
        else:
            new = clone(desired)
            meta = new.setdefault("metadata", {})
            cur_meta = current["metadata"]
            for key in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "generation"):
                if key in cur_meta:
                    meta[key] = cur_meta[key]
                else:
                    meta.pop(key, None)
            if not managed or "managedFields" not in meta:
                if "managedFields" in cur_meta:
                    meta["managedFields"] = clone(cur_meta["managedFields"])
                else:
                    meta.pop("managedFields", None)
            if res.status_subresource:
                if "status" in current:
                    new["status"] = clone(current["status"])
                else:
                    new.pop("status", None)
            if _spec_part(new) != _spec_part(current):
                meta["generation"] = int(cur_meta.get("generation", 1)) + 1
        new["apiVersion"] = res.api_version
        new["kind"] = res.kind
        if _strip_volatile(new) == _strip_volatile(current) and _ownership(new) == _ownership(current):
            return present(res, current)
        if not managed:
            record_update(
                current,
                new,
                manager=field_manager,
                api_version=res.api_version,
                now=self._now(),
                subresource=subresource,
                status_subresource=res.status_subresource,
            )
        meta = new["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return self._commit(res, EventType.DELETED, current, new)
        return self._commit(res, EventType.MODIFIED, current, new)

    @staticmethod
    def _check_version(res: Resource, current: JsonObj, wanted: Any) -> None:
        if wanted and str(wanted) != current["metadata"]["resourceVersion"]:
            raise Conflict(
                f"Operation cannot be fulfilled on {res.plural}{'.' + res.group if res.group else ''} "
                f'"{current["metadata"]["name"]}": the object has been modified; '
                "please apply your changes to the latest version and try again"
            )

    def _name_of(self, obj: Mapping[str, Any]) -> str:
        name = (obj.get("metadata") or {}).get("name")
        if not name or not isinstance(name, str):
            raise Invalid("metadata.name is required")
        return name

    def _patched(
        self,
        res: Resource,
        current: JsonObj,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        patch_type: PatchType,
    ) -> JsonObj:
        if patch_type is PatchType.JSON:
            if isinstance(patch, Mapping):
                raise Invalid("a JSON patch must be a list of operations")
            result = json_patch(current, patch)
            if not isinstance(result, dict):
                raise Invalid("a JSON patch must leave an object")
            return result
        if not isinstance(patch, Mapping):
            raise Invalid("a merge patch must be an object")
        self._check_version(res, current, (patch.get("metadata") or {}).get("resourceVersion"))
        patched: JsonObj = merge_patch(current, patch)
        return patched

    def _patch(
        self,
        res: Resource,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        namespace: str | None,
        patch_type: PatchType,
        field_manager: str | None,
        force: bool,
        subresource: str,
    ) -> JsonObj:
        ns = resolve_namespace(res, namespace)
        if subresource == "status" and not res.status_subresource:
            raise NotFound(f"the server could not find the requested resource ({res}/status)")
        if patch_type is PatchType.APPLY:
            if not field_manager:
                raise Invalid("fieldManager is required for apply patch")
            if not isinstance(patch, Mapping):
                raise Invalid("an apply patch must be an object")
            return self._apply(res, name, ns, patch, field_manager, force, subresource)
        current = self._lookup(res, name, ns)
        desired = self._patched(res, current, patch, patch_type)
        return self._update(res, current, desired, field_manager=field_manager, subresource=subresource)

    def _apply(
        self,
        res: Resource,
        name: str,
        namespace: str | None,
        obj: Mapping[str, Any],
        field_manager: str,
        force: bool,
        subresource: str,
    ) -> JsonObj:
        meta = obj.get("metadata") or {}
        if meta.get("name") not in (None, name):
            raise Invalid(f"metadata.name {meta.get('name')!r} does not match the request name {name!r}")
        self._check_served(res)
        current = self._bucket(res).get((namespace or "", name))
        if current is None:
            if subresource:
                raise NotFound(f'{res.plural} "{name}" not found')
            body = apply_config(
                None,
                obj,
                manager=field_manager,
                force=force,
                api_version=res.api_version,
                now=self._now(),
                status_subresource=res.status_subresource,
            )
            body.setdefault("metadata", {})["name"] = name
            if namespace is not None:
                body["metadata"]["namespace"] = namespace
            managed = body["metadata"].pop("managedFields", None) or []
            return self._create(res, body, namespace, field_manager, managed_fields=managed)
        self._check_version(res, current, meta.get("resourceVersion"))
        desired = apply_config(
            current,
            obj,
            manager=field_manager,
            force=force,
            api_version=res.api_version,
            now=self._now(),
            subresource=subresource,
            status_subresource=res.status_subresource,
        )
        return self._update(res, current, desired, field_manager=field_manager, subresource=subresource, managed=True)

    def _delete(self, res: Resource, name: str, namespace: str | None) -> JsonObj:
        """Delete (or, with finalizers, mark deleted); returns the object's last state."""
        ns = resolve_namespace(res, namespace)
        current = self._lookup(res, name, ns)
        if current["metadata"].get("finalizers"):
            if current["metadata"].get("deletionTimestamp"):
                return present(res, current)
            new = clone(current)
            new["metadata"]["deletionTimestamp"] = self._now()
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            return self._commit(res, EventType.MODIFIED, current, new)
        return self._commit(res, EventType.DELETED, current, clone(current))

    def _list(
        self, res: Resource, namespace: str | None, label_selector: str | None, field_selector: str | None
    ) -> ObjectList:
        if namespace is not None and not res.namespaced:
            raise ValueError(f"{res.kind} is cluster-scoped; no namespace expected, got {namespace!r}")
        self._check_served(res)
        labels = LabelSelector.parse(label_selector)
        fields = FieldSelector.parse(field_selector)
        items = []
        for (ns, _), obj in sorted(self._bucket(res).items()):
            if namespace is not None and ns != namespace:
                continue
            if labels.matches(obj) and fields.matches(obj):
                items.append(present(res, obj))
        return ObjectList(items, str(self._rv))

    def list_page(
        self,
        res: Resource,
        *,
        limit: int,
        continue_token: str | None = None,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[ObjectList, str | None]:
        """One page of ``list``: at most ``limit`` objects after ``continue_token``, and the token of
        the next page (``None`` after the last). Tokens are opaque; a malformed one is ``Invalid``."""
        if namespace is not None and not res.namespaced:
            raise ValueError(f"{res.kind} is cluster-scoped; no namespace expected, got {namespace!r}")
        if limit < 1:
            raise Invalid(f"limit must be positive, got {limit}")
        self._check_served(res)
        labels = LabelSelector.parse(label_selector)
        fields = FieldSelector.parse(field_selector)
        after = _decode_continue(continue_token) if continue_token else None
        store_key = (res.group, res.plural)
        keys = self._sorted_keys.get(store_key)
        if keys is None:
            keys = self._sorted_keys[store_key] = sorted(self._bucket(res))
        bucket = self._bucket(res)
        start = bisect.bisect_right(keys, after) if after is not None else 0
        items: list[JsonObj] = []
        last: _ObjKey | None = None
        for key in itertools.islice(keys, start, None):
            if namespace is not None and key[0] != namespace:
                continue
            obj = bucket.get(key)
            if obj is None or not (labels.matches(obj) and fields.matches(obj)):
                continue
            if len(items) == limit:
                return ObjectList(items, str(self._rv)), _encode_continue(last)
            items.append(present(res, obj))
            last = key
        return ObjectList(items, str(self._rv)), None

    def _subscribe(
        self,
        res: Resource,
        namespace: str | None,
        label_selector: str | None,
        field_selector: str | None,
        resource_version: str | None,
        allow_bookmarks: bool,
    ) -> Watcher:
        if namespace is not None and not res.namespaced:
            raise ValueError(f"{res.kind} is cluster-scoped; no namespace expected, got {namespace!r}")
        self._check_served(res)
        return self._hub.subscribe(
            res,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            resource_version=resource_version,
            allow_bookmarks=allow_bookmarks,
            current_rv=self._rv,
            objects=self._bucket(res).values(),
        )

    def _stream(self, watcher: Watcher) -> AsyncGenerator[WatchEvent, None]:
        return self._hub.stream(watcher, lambda: self._rv)

    # ------------------------------------------------------------------ the port

    async def get(self, res: Resource, name: str, *, namespace: str | None = None) -> JsonObj:
        return present(res, self._lookup(res, name, resolve_namespace(res, namespace)))

    async def list(
        self,
        res: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ObjectList:
        return self._list(res, namespace, label_selector, field_selector)

    async def iter_list(
        self,
        res: Resource,
        *,
        page_size: int = 500,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> AsyncIterator[JsonObj]:
        """:meth:`list` streamed page by page (:meth:`list_page`), like ``LightkubePort.iter_list``."""
        token: str | None = None
        while True:
            page, token = self.list_page(
                res,
                limit=page_size,
                continue_token=token,
                namespace=namespace,
                label_selector=label_selector,
                field_selector=field_selector,
            )
            for item in page.items:
                yield item
            if token is None:
                return

    async def watch(
        self,
        res: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        allow_bookmarks: bool = True,
    ) -> AsyncIterator[WatchEvent]:
        watcher = self._subscribe(res, namespace, label_selector, field_selector, resource_version, allow_bookmarks)
        async for event in self._stream(watcher):
            yield event

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
        watcher = self._subscribe(res, namespace, label_selector, field_selector, resource_version, allow_bookmarks)
        return self._stream(watcher)

    async def create(
        self, res: Resource, obj: Mapping[str, Any], *, namespace: str | None = None, field_manager: str | None = None
    ) -> JsonObj:
        return self._create(res, obj, namespace, field_manager)

    async def replace(self, res: Resource, obj: Mapping[str, Any], *, field_manager: str | None = None) -> JsonObj:
        ns = resolve_namespace(res, None, obj)
        current = self._lookup(res, self._name_of(obj), ns)
        self._check_version(res, current, (obj.get("metadata") or {}).get("resourceVersion"))
        return self._update(res, current, obj, field_manager=field_manager)

    async def patch(
        self,
        res: Resource,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        field_manager: str | None = None,
        force: bool = False,
    ) -> JsonObj:
        return self._patch(res, name, patch, namespace, patch_type, field_manager, force, "")

    async def apply(self, res: Resource, obj: Mapping[str, Any], *, field_manager: str, force: bool = False) -> JsonObj:
        ns = resolve_namespace(res, None, obj)
        return self._patch(res, self._name_of(obj), obj, ns, PatchType.APPLY, field_manager, force, "")

    async def delete(self, res: Resource, name: str, *, namespace: str | None = None) -> None:
        self._delete(res, name, namespace)

    async def update_status(
        self, res: Resource, obj: Mapping[str, Any], *, field_manager: str | None = None
    ) -> JsonObj:
        if not res.status_subresource:
            raise NotFound(f"the server could not find the requested resource ({res}/status)")
        ns = resolve_namespace(res, None, obj)
        current = self._lookup(res, self._name_of(obj), ns)
        self._check_version(res, current, (obj.get("metadata") or {}).get("resourceVersion"))
        return self._update(res, current, obj, field_manager=field_manager, subresource="status")

    async def patch_status(
        self,
        res: Resource,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        field_manager: str | None = None,
        force: bool = False,
    ) -> JsonObj:
        return self._patch(res, name, patch, namespace, patch_type, field_manager, force, "status")

    def _bind(self, pod_name: str, node_name: str, namespace: str | None, pod_uid: str | None) -> JsonObj:
        ns = resolve_namespace(POD, namespace)
        current = self._lookup(POD, pod_name, ns)
        if not node_name:
            raise Invalid("binding target node name is required")
        if pod_uid and current["metadata"].get("uid") != pod_uid:
            raise Conflict(
                f"Precondition failed: UID in precondition: {pod_uid}, UID in object meta: "
                f"{current['metadata'].get('uid')}"
            )
        if current["metadata"].get("deletionTimestamp"):
            raise Conflict(f"pod {pod_name} is being deleted, cannot be assigned to a host")
        assigned = (current.get("spec") or {}).get("nodeName")
        if assigned:
            raise Conflict(f'pod {pod_name} is already assigned to node "{assigned}"')
        new = clone(current)
        new.setdefault("spec", {})["nodeName"] = node_name
        status = new.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        conditions.append(
            {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": self._now()}
        )
        status["conditions"] = conditions
        return self._commit(POD, EventType.MODIFIED, current, new)

    async def bind(
        self, pod_name: str, node_name: str, *, namespace: str | None = None, pod_uid: str | None = None
    ) -> None:
        self._bind(pod_name, node_name, namespace, pod_uid)

    async def create_event(self, event: Mapping[str, Any]) -> JsonObj:
        return self._create(EVENT, event, None, None)

    async def close(self) -> None:
        self.closed = True
        self.close_watches()

    # ------------------------------------------------------------------ seeding helpers

    def seed(self, res: Resource, objects: Iterable[Mapping[str, Any]]) -> _Objects:
        """Create objects synchronously, status included (test setup; bypasses the status rules and the
        CRD schemas, to model objects that got in before a rule existed)."""
        out = []
        self._admission = False
        try:
            for obj in objects:
                created = self._create(res, obj, None, None)
                if "status" in obj and res.status_subresource:
                    current = self._lookup(res, created["metadata"]["name"], created["metadata"].get("namespace"))
                    created = self._update(res, current, obj, field_manager=None, subresource="status")
                out.append(created)
        finally:
            self._admission = True
        return out

    def snapshot(self) -> dict[str, _Objects]:
        """Every stored object by ``<plural>.<group>`` (for debugging and assertions)."""
        return {
            f"{plural}.{group}" if group else plural: [clone(o) for _, o in sorted(bucket.items())]
            for (group, plural), bucket in sorted(self._objects.items())
        }


def _encode_continue(key: _ObjKey | None) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(key or ("", ""))).encode()).decode()


def _decode_continue(token: str) -> _ObjKey:
    try:
        ns, name = json.loads(base64.urlsafe_b64decode(token.encode()))
        return (str(ns), str(name))
    except (ValueError, TypeError) as exc:
        raise Invalid(f"malformed continue token {token!r}") from exc
