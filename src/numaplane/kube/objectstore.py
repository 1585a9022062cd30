"""The object store behind :class:`~numaplane.kube.memory.InMemoryKube`: objects, versions, writes.

:class:`ObjectStore` holds every object by resource and key, the global ``resourceVersion``
counter and the watch hub; its methods are the API server's writes (create, update, patch,
server-side apply, delete, ``pods/binding``) and paged reads, synchronous and on plain dicts.
Invariants: ``rv`` grows by one per committed change and is the ``resourceVersion`` of the last
one; every change reaches :class:`~numaplane.kube.watchhub.WatchHub` in commit order; stored objects
are never handed out (callers get copies from :func:`~numaplane.kube.watchhub.present`). The
semantics are listed in :mod:`numaplane.kube.memory`; the pure rules are :mod:`numaplane.kube.writes`.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from numaplane.kube.clock import Clock, format_time
from numaplane.kube.crdserving import CRDServing, is_crd
from numaplane.kube.errors import AlreadyExists, Invalid, NotFound
from numaplane.kube.patch import clone
from numaplane.kube.port import EventType, JsonObj, ObjectList, PatchType, resolve_namespace
from numaplane.kube.resources import BUILTIN_RESOURCES, NAMESPACE, NODE, POD, Resource
from numaplane.kube.selectors import FieldSelector, LabelSelector
from numaplane.kube.ssa import apply_config, record_update
from numaplane.kube.watchhub import Change, WatchHub, present
from numaplane.kube.writes import (
    ObjKey,
    bound_pod,
    check_version,
    decode_continue,
    encode_continue,
    is_noop,
    patched,
    updated_object,
)

__all__ = ["ObjectStore", "StoreKey"]

#: A resource's bucket: (group, plural) — every version of a resource shares one.
StoreKey = tuple[str, str]


class ObjectStore:
    """Every stored object, the version counter and the watch hub (see the module docstring).

    ``strict_resources``: resource types neither built in nor served by a stored CRD answer 404.
    ``admission``: CRD schema pruning and validation on every write (switched off while seeding).
    """

    def __init__(
        self,
        *,
        clock: Clock,
        history_limit: int,
        strict_resources: bool,
        bookmark_interval_seconds: float | None,
    ) -> None:
        self.clock = clock
        self.strict_resources = strict_resources
        self.rv = 0
        self.objects: dict[StoreKey, dict[ObjKey, JsonObj]] = {}
        self._sorted_keys: dict[StoreKey, list[ObjKey]] = {}  # per bucket, dropped when keys change
        self.hub = WatchHub(history_limit, bookmark_interval_seconds)
        self._uids = itertools.count(1)
        self._names = itertools.count(1)
        self.crds = CRDServing()
        self.admission = True

    def served_resources(self) -> list[Resource]:
        """Built-in resources plus every version served by a stored CRD."""
        return [*BUILTIN_RESOURCES, *self.crds.served()]

    def find_resource(self, group: str, version: str, plural: str) -> Resource | None:
        """The served resource at ``/apis/<group>/<version>/<plural>``, if any."""
        for res in self.served_resources():
            if res.group == group and res.version == version and res.plural == plural:
                return res
        return None

    def check_served(self, res: Resource) -> None:
        if self.strict_resources and self.find_resource(res.group, res.version, res.plural) is None:
            raise NotFound(f"the server could not find the requested resource ({res})")

    def bucket(self, res: Resource) -> dict[ObjKey, JsonObj]:
        return self.objects.setdefault((res.group, res.plural), {})

    def lookup(self, res: Resource, name: str, namespace: str | None) -> JsonObj:
        self.check_served(res)
        obj = self.bucket(res).get((namespace or "", name))
        if obj is None:
            raise NotFound(f'{res.plural}{"." + res.group if res.group else ""} "{name}" not found')
        return obj

    def now(self) -> str:
        return format_time(self.clock.now())

    def commit(self, res: Resource, kind: EventType, old: JsonObj | None, new: JsonObj) -> JsonObj:
        if kind is not EventType.DELETED and self.admission:
            new = self.crds.admit(res, new)
        self.rv += 1
        new.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        new["apiVersion"] = res.api_version
        new["kind"] = res.kind
        meta = new["metadata"]
        key = (str(meta.get("namespace") or ""), str(meta["name"]))
        bucket = self.bucket(res)
        if kind is EventType.DELETED:
            bucket.pop(key, None)
            self._sorted_keys.pop((res.group, res.plural), None)
        else:
            if key not in bucket:
                self._sorted_keys.pop((res.group, res.plural), None)
            bucket[key] = new
        self.hub.publish(Change(self.rv, kind, (res.group, res.plural), old, new))
        if is_crd(res):
            # Deleting a CRD deletes its objects (unless another CRD still serves the same store).
            for served in self.crds.changed(kind, new)[:1]:
                for obj in list(self.bucket(served).values()):
                    self.commit(served, EventType.DELETED, obj, clone(obj))
        return present(res, new)

    def create(
        self,
        res: Resource,
        obj: Mapping[str, Any],
        namespace: str | None,
        field_manager: str | None,
        managed_fields: list[JsonObj] | None = None,
    ) -> JsonObj:
        ns = resolve_namespace(res, namespace, obj)
        self.check_served(res)
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
        if (ns or "", name) in self.bucket(res):
            raise AlreadyExists(
                f'{res.plural}{"." + res.group if res.group else ""} "{name}" already exists',
            )
        for key in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"):
            meta.pop(key, None)
        meta["uid"] = f"00000000-0000-4000-8000-{next(self._uids):012x}"
        meta["creationTimestamp"] = self.now()
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
                now=self.now(),
                status_subresource=res.status_subresource,
            )
        return self.commit(res, EventType.ADDED, None, body)

    def update(
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
        new = updated_object(res, current, desired, subresource=subresource, managed=managed)
        if is_noop(new, current):
            return present(res, current)
        if not managed:
            record_update(
                current,
                new,
                manager=field_manager,
                api_version=res.api_version,
                now=self.now(),
                subresource=subresource,
                status_subresource=res.status_subresource,
            )
        meta = new["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return self.commit(res, EventType.DELETED, current, new)
        return self.commit(res, EventType.MODIFIED, current, new)

    def patch(
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
            return self.apply(res, name, ns, patch, field_manager, force, subresource)
        current = self.lookup(res, name, ns)
        desired = patched(res, current, patch, patch_type)
        return self.update(res, current, desired, field_manager=field_manager, subresource=subresource)

    def apply(
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
        self.check_served(res)
        current = self.bucket(res).get((namespace or "", name))
        if current is None:
            if subresource:
                raise NotFound(f'{res.plural} "{name}" not found')
            body = apply_config(
                None,
                obj,
                manager=field_manager,
                force=force,
                api_version=res.api_version,
                now=self.now(),
                status_subresource=res.status_subresource,
            )
            body.setdefault("metadata", {})["name"] = name
            if namespace is not None:
                body["metadata"]["namespace"] = namespace
            managed = body["metadata"].pop("managedFields", None) or []
            return self.create(res, body, namespace, field_manager, managed_fields=managed)
        check_version(res, current, meta.get("resourceVersion"))
        desired = apply_config(
            current,
            obj,
            manager=field_manager,
            force=force,
            api_version=res.api_version,
            now=self.now(),
            subresource=subresource,
            status_subresource=res.status_subresource,
        )
        return self.update(res, current, desired, field_manager=field_manager, subresource=subresource, managed=True)

    def delete(self, res: Resource, name: str, namespace: str | None) -> JsonObj:
        """Delete (or, with finalizers, mark deleted); returns the object's last state."""
        ns = resolve_namespace(res, namespace)
        current = self.lookup(res, name, ns)
        if current["metadata"].get("finalizers"):
            if current["metadata"].get("deletionTimestamp"):
                return present(res, current)
            new = clone(current)
            new["metadata"]["deletionTimestamp"] = self.now()
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            return self.commit(res, EventType.MODIFIED, current, new)
        return self.commit(res, EventType.DELETED, current, clone(current))

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
        if namespace is not None and not res.namespaced:
            raise ValueError(f"{res.kind} is cluster-scoped; no namespace expected, got {namespace!r}")
        if limit is not None and limit < 1:
            raise Invalid(f"limit must be positive, got {limit}")
        self.check_served(res)
        labels = LabelSelector.parse(label_selector)
        fields = FieldSelector.parse(field_selector)
        after = decode_continue(continue_token) if continue_token else None
        store_key = (res.group, res.plural)
        keys = self._sorted_keys.get(store_key)
        if keys is None:
            keys = self._sorted_keys[store_key] = sorted(self.bucket(res))
        bucket = self.bucket(res)
        start = bisect.bisect_right(keys, after) if after is not None else 0
        items: list[JsonObj] = []
        last: ObjKey | None = None
        for key in itertools.islice(keys, start, None):
            if namespace is not None and key[0] != namespace:
                continue
            obj = bucket.get(key)
            if obj is None or not (labels.matches(obj) and fields.matches(obj)):
                continue
            if len(items) == limit:
                return ObjectList(items, str(self.rv), encode_continue(last))
            items.append(present(res, obj))
            last = key
        return ObjectList(items, str(self.rv))

    def bind(self, pod_name: str, namespace: str | None, binding: Mapping[str, Any]) -> JsonObj:
        """``pods/binding`` with a ``Binding`` object: the pod's ``spec.nodeName`` is set once."""
        target = str((binding.get("target") or {}).get("name", ""))
        uid = (binding.get("metadata") or {}).get("uid")
        current = self.lookup(POD, pod_name, namespace)
        return self.commit(POD, EventType.MODIFIED, current, bound_pod(current, target, uid, self.now()))
