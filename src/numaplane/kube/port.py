"""The Kubernetes port: the few API verbs numaplane's components use, on plain JSON-ready dicts.

Components talk to Kubernetes only through :class:`KubePort`. Two implementations ship:
:class:`numaplane.kube.client.LightkubePort` (a real API server, via lightkube's ``AsyncClient``)
and :class:`numaplane.kube.memory.InMemoryKube` (an in-process store with the API server's
semantics). The contract tests in ``tests/kube`` run the same assertions against both, the first
one through the project's fake API server (``numaplane.testing.fakeapi``).

Conventions shared by every implementation:

* Objects are plain ``dict`` trees exactly as the API serves them (``apiVersion``, ``kind``,
  ``metadata``, ...). Returned objects are fresh copies; mutating them changes nothing.
* ``namespace`` selects the namespace of a namespaced resource. When it is ``None``, ``get`` /
  ``delete`` / ``patch`` use ``"default"``; ``list`` / ``watch`` cover all namespaces; writes of a
  whole object use ``metadata.namespace`` (or ``"default"``). Passing a namespace for a
  cluster-scoped resource, or one that contradicts ``metadata.namespace``, is a ``ValueError``
  (a programming error, raised before any I/O).
* ``resourceVersion`` strings are opaque. ``replace`` and ``update_status`` are conditional when
  the object carries ``metadata.resourceVersion`` (stale → :class:`~numaplane.kube.errors.Conflict`).
* Errors are the types of :mod:`numaplane.kube.errors`.
* ``watch`` returns an endless async iterator: it ends only when the caller closes it (use
  ``contextlib.aclosing``) and raises :class:`~numaplane.kube.errors.Gone` when the requested
  version is too old, or another :class:`~numaplane.kube.errors.KubeError` when the stream breaks.
  Server-side stream timeouts are handled inside the implementation by resuming from the last seen
  version. Starting without a version (``None`` or ``"0"``) first yields a synthetic ``ADDED`` for
  every existing object. Objects that stop matching the selectors arrive as ``DELETED``.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from numaplane.kube.resources import (
    BUILTIN_RESOURCES,
    CLUSTER_ROLE,
    CLUSTER_ROLE_BINDING,
    CONFIG_MAP,
    CRD,
    DAEMON_SET,
    DEPLOYMENT,
    EVENT,
    LEASE,
    NAMESPACE,
    NETWORK_POLICY,
    NODE,
    NODE_RESOURCE_TOPOLOGY,
    POD,
    ROLE,
    ROLE_BINDING,
    SERVICE,
    SERVICE_ACCOUNT,
    Resource,
    resources_from_crd,
)

__all__ = [
    "BUILTIN_RESOURCES",
    "CLUSTER_ROLE",
    "CLUSTER_ROLE_BINDING",
    "CONFIG_MAP",
    "CRD",
    "DAEMON_SET",
    "DEFAULT_NAMESPACE",
    "DEPLOYMENT",
    "EVENT",
    "LEASE",
    "NAMESPACE",
    "NETWORK_POLICY",
    "NODE",
    "NODE_RESOURCE_TOPOLOGY",
    "POD",
    "ROLE",
    "ROLE_BINDING",
    "SERVICE",
    "SERVICE_ACCOUNT",
    "EventType",
    "JsonObj",
    "KubePort",
    "ObjectList",
    "PatchType",
    "Resource",
    "WatchEvent",
    "object_key",
    "object_namespace",
    "resolve_namespace",
    "resources_from_crd",
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


@runtime_checkable
class KubePort(Protocol):
    """The Kubernetes API as numaplane uses it. See the module docstring for shared conventions."""

    async def get(self, res: Resource, name: str, *, namespace: str | None = None) -> JsonObj:
        """The object ``name``; :class:`NotFound` if absent."""
        ...

    async def list(
        self,
        res: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ObjectList:
        """Objects matching the selectors (Kubernetes selector syntax) and the list's version."""
        ...

    def watch(
        self,
        res: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        allow_bookmarks: bool = True,
    ) -> AsyncIterator[WatchEvent]:
        """Changes after ``resource_version``; raises :class:`Gone` when that version has expired."""
        ...

    async def create(
        self, res: Resource, obj: Mapping[str, Any], *, namespace: str | None = None, field_manager: str | None = None
    ) -> JsonObj:
        """Create ``obj``; :class:`AlreadyExists` if the name is taken. Returns the stored object."""
        ...

    async def replace(self, res: Resource, obj: Mapping[str, Any], *, field_manager: str | None = None) -> JsonObj:
        """Replace the whole object (PUT); conditional on ``metadata.resourceVersion`` when set."""
        ...

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
        """Patch the object: JSON merge patch, JSON patch, or server-side apply (needs ``field_manager``)."""
        ...

    async def apply(self, res: Resource, obj: Mapping[str, Any], *, field_manager: str, force: bool = False) -> JsonObj:
        """Server-side apply of ``obj`` (creates it when absent); :class:`Conflict` on a field conflict."""
        ...

    async def delete(self, res: Resource, name: str, *, namespace: str | None = None) -> None:
        """Delete the object (objects with finalizers only get ``deletionTimestamp``)."""
        ...

    async def update_status(
        self, res: Resource, obj: Mapping[str, Any], *, field_manager: str | None = None
    ) -> JsonObj:
        """Replace ``status`` through the status subresource; conditional like :meth:`replace`."""
        ...

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
        """Patch through the status subresource (only ``status`` changes)."""
        ...

    async def bind(
        self, pod_name: str, node_name: str, *, namespace: str | None = None, pod_uid: str | None = None
    ) -> None:
        """``pods/binding``: set ``spec.nodeName``; :class:`Conflict` if the pod is already bound."""
        ...

    async def create_event(self, event: Mapping[str, Any]) -> JsonObj:
        """Create a core/v1 ``Event`` (see :func:`numaplane.kube.events.make_event`)."""
        ...

    async def close(self) -> None:
        """Release connections; the port is unusable afterwards."""
        ...


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
