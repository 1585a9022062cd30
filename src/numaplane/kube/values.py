"""The values that cross the Kubernetes port: objects, requests, lists, watch events, namespaces.

Pure data (no I/O). :mod:`numaplane.kube.port` re-exports every name; import them from there.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from numaplane.kube.resources import Resource

__all__ = [
    "DEFAULT_NAMESPACE",
    "HTTP_METHODS",
    "EventType",
    "JsonObj",
    "ObjectList",
    "PatchType",
    "Request",
    "Response",
    "Verb",
    "WatchEvent",
    "object_key",
    "object_namespace",
    "resolve_namespace",
]

#: A Kubernetes object (or patch) as a JSON-ready dict.
JsonObj = dict[str, Any]

DEFAULT_NAMESPACE = "default"


class EventType(enum.StrEnum):
    """Watch event types (``ERROR`` events are raised as exceptions instead)."""

    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    BOOKMARK = "BOOKMARK"


class PatchType(enum.StrEnum):
    """Patch flavours; the values are the HTTP content types."""

    MERGE = "application/merge-patch+json"
    JSON = "application/json-patch+json"
    APPLY = "application/apply-patch+yaml"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One watch event. For ``BOOKMARK`` the object carries only ``metadata.resourceVersion``."""

    type: EventType
    object: JsonObj

    @property
    def resource_version(self) -> str:
        return str(self.object.get("metadata", {}).get("resourceVersion", ""))


@dataclass(frozen=True, slots=True)
class ObjectList:
    """The result of ``list``: the matching objects and the collection's ``resourceVersion``.

    Watching from ``resource_version`` continues exactly after this snapshot.
    """

    items: list[JsonObj] = field(default_factory=list)
    resource_version: str = ""
    #: The token of the next page of a paged list (``None``: this was the last, or only, page).
    continue_token: str | None = None


class Verb(enum.StrEnum):
    """The Kubernetes API verbs a :class:`Request` carries (the names RBAC and audit logs use)."""

    GET = "get"
    LIST = "list"
    WATCH = "watch"
    CREATE = "create"
    UPDATE = "update"
    PATCH = "patch"
    DELETE = "delete"


#: The HTTP method of each verb.
HTTP_METHODS: Mapping[Verb, str] = {
    Verb.GET: "GET",
    Verb.LIST: "GET",
    Verb.WATCH: "GET",
    Verb.CREATE: "POST",
    Verb.UPDATE: "PUT",
    Verb.PATCH: "PATCH",
    Verb.DELETE: "DELETE",
}


@dataclass(frozen=True, slots=True)
class Request:
    """One API request, as narrow as the REST call it stands for.

    ``namespace`` is already resolved by :class:`KubePort` (``None``: a cluster-scoped resource, or
    every namespace for ``list`` / ``watch``). ``body`` is the object (create, update, bind: the
    ``Binding``), the patch (a mapping, or a list of JSON-patch operations) or ``None``. The query
    parameters that apply to the verb are the remaining fields; the others keep their defaults.
    ``limit`` / ``continue_token`` page a ``list`` (``None``: one unpaged list).
    """

    verb: Verb
    resource: Resource
    namespace: str | None = None
    name: str | None = None
    subresource: str = ""
    body: Any = None
    label_selector: str | None = None
    field_selector: str | None = None
    resource_version: str | None = None
    allow_bookmarks: bool = True
    limit: int | None = None
    continue_token: str | None = None
    patch_type: PatchType = PatchType.MERGE
    field_manager: str | None = None
    force: bool = False

    @property
    def path(self) -> str:
        """The REST path the request addresses (collection, object or subresource)."""
        return self.resource.path(self.namespace, self.name, self.subresource or None)

    @property
    def resource_name(self) -> str:
        """The resource as RBAC names it: ``pods``, ``pods/status``, ``pods/binding``."""
        return f"{self.resource.plural}/{self.subresource}" if self.subresource else self.resource.plural


#: What :meth:`KubePort.send` answers: the object (get and writes; for delete the object's last
#: state, or ``{}`` when the server does not return it), or the listing.
Response = JsonObj | ObjectList


def object_namespace(obj: Mapping[str, Any]) -> str | None:
    """``metadata.namespace`` of ``obj`` (``None`` when absent or empty)."""
    ns = (obj.get("metadata") or {}).get("namespace")
    return str(ns) if ns else None


def object_key(obj: Mapping[str, Any]) -> str:
    """The cache key client-go uses: ``<namespace>/<name>``, or ``<name>`` when cluster-scoped."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    name = str(meta.get("name", ""))
    return f"{ns}/{name}" if ns else name


def resolve_namespace(res: Resource, namespace: str | None, obj: Mapping[str, Any] | None = None) -> str | None:
    """The namespace a single-object request addresses (``None`` for cluster-scoped resources).

    Raises ``ValueError`` on a namespace for a cluster-scoped resource or a mismatch with ``obj``.
    """
    from_obj = object_namespace(obj) if obj is not None else None
    if not res.namespaced:
        if namespace is not None:
            raise ValueError(f"{res.kind} is cluster-scoped; no namespace expected, got {namespace!r}")
        return None
    if namespace is not None and from_obj is not None and namespace != from_obj:
        raise ValueError(f"namespace {namespace!r} differs from metadata.namespace {from_obj!r}")
    return namespace or from_obj or DEFAULT_NAMESPACE
