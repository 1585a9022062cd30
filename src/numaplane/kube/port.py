"""The Kubernetes port: the few API verbs numaplane's components use, on plain JSON-ready dicts.

Components talk to Kubernetes only through :class:`KubePort`. An implementation provides one narrow
request method (:meth:`KubePort.send` for a :class:`Request` — verb, resource, namespace, name,
subresource, body, query parameters — and :meth:`KubePort.stream` for a watch); the typed verbs
(``get``, ``list``, ``patch``, ``bind``...) are written once, in :class:`KubePort`, on top of them.
Two implementations ship:
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

import abc
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from typing import Any

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
from numaplane.kube.values import (
    DEFAULT_NAMESPACE,
    HTTP_METHODS,
    EventType,
    JsonObj,
    ObjectList,
    PatchType,
    Request,
    Response,
    Verb,
    WatchEvent,
    object_key,
    object_namespace,
    resolve_namespace,
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
    "HTTP_METHODS",
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
    "Request",
    "Resource",
    "Response",
    "Verb",
    "WatchEvent",
    "object_key",
    "object_namespace",
    "resolve_namespace",
    "resources_from_crd",
]


def _object(response: Response) -> JsonObj:
    if isinstance(response, ObjectList):
        raise TypeError("expected an object, got a list")
    return response


def _name_of(obj: Mapping[str, Any]) -> str | None:
    name = (obj.get("metadata") or {}).get("name")
    return str(name) if name else None


def _collection_namespace(res: Resource, namespace: str | None) -> str | None:
    if namespace is not None and not res.namespaced:
        raise ValueError(f"{res.kind} is cluster-scoped; no namespace expected, got {namespace!r}")
    return namespace


class KubePort(abc.ABC):
    """The Kubernetes API as numaplane uses it. See the module docstring for shared conventions.

    An implementation provides three methods: :meth:`send` (one unary request), :meth:`stream`
    (one watch request) and :meth:`close`. The typed verbs below are built on them once: they
    resolve the namespace (raising ``ValueError`` on a programming error, before any I/O) and
    shape the :class:`Request`; they hold no state.
    """

    @abc.abstractmethod
    async def send(self, request: Request) -> Response:
        """Perform one unary request (every verb but ``watch``); errors are :mod:`numaplane.kube.errors`."""

    @abc.abstractmethod
    def stream(self, request: Request) -> AsyncGenerator[WatchEvent, None]:
        """The events of one ``watch`` request (see the module docstring for the stream's rules)."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release connections; the port is unusable afterwards."""

    async def get(self, res: Resource, name: str, *, namespace: str | None = None) -> JsonObj:
        """The object ``name``; :class:`NotFound` if absent."""
        ns = resolve_namespace(res, namespace)
        return _object(await self.send(Request(Verb.GET, res, ns, name)))

    async def list(
        self,
        res: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ObjectList:
        """Objects matching the selectors (Kubernetes selector syntax) and the list's version."""
        request = Request(
            Verb.LIST,
            res,
            _collection_namespace(res, namespace),
            label_selector=label_selector,
            field_selector=field_selector,
        )
        response = await self.send(request)
        if not isinstance(response, ObjectList):
            raise TypeError("expected a list, got an object")
        return response

    async def iter_list(
        self,
        res: Resource,
        *,
        page_size: int = 500,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> AsyncIterator[JsonObj]:
        """The objects ``list`` returns, streamed page by page (``limit`` / ``continue``).

        At most one page of ``page_size`` objects is held at a time, so a 100,000-pod listing runs
        in bounded memory. The pages are consistent (one ``resourceVersion``) as the API server
        guarantees for continued lists; an expired continue token raises
        :class:`~numaplane.kube.errors.Gone`.
        """
        if page_size < 1:
            raise ValueError(f"page_size must be positive, got {page_size}")
        ns = _collection_namespace(res, namespace)
        token: str | None = None
        while True:
            request = Request(
                Verb.LIST,
                res,
                ns,
                label_selector=label_selector,
                field_selector=field_selector,
                limit=page_size,
                continue_token=token,
            )
            page = await self.send(request)
            if not isinstance(page, ObjectList):
                raise TypeError("expected a list, got an object")
            for item in page.items:
                yield item
            token = page.continue_token
            if not token:
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
        """Changes after ``resource_version``; raises :class:`Gone` when that version has expired."""
        request = Request(
            Verb.WATCH,
            res,
            _collection_namespace(res, namespace),
            label_selector=label_selector,
            field_selector=field_selector,
            resource_version=resource_version,
            allow_bookmarks=allow_bookmarks,
        )
        async with contextlib.aclosing(self.stream(request)) as events:
            async for event in events:
                yield event

    async def create(
        self, res: Resource, obj: Mapping[str, Any], *, namespace: str | None = None, field_manager: str | None = None
    ) -> JsonObj:
        """Create ``obj``; :class:`AlreadyExists` if the name is taken. Returns the stored object."""
        ns = resolve_namespace(res, namespace, obj)
        return _object(await self.send(Request(Verb.CREATE, res, ns, body=obj, field_manager=field_manager)))

    async def replace(self, res: Resource, obj: Mapping[str, Any], *, field_manager: str | None = None) -> JsonObj:
        """Replace the whole object (PUT); conditional on ``metadata.resourceVersion`` when set."""
        ns = resolve_namespace(res, None, obj)
        request = Request(Verb.UPDATE, res, ns, _name_of(obj), body=obj, field_manager=field_manager)
        return _object(await self.send(request))

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
        ns = resolve_namespace(res, namespace)
        request = Request(
            Verb.PATCH, res, ns, name, body=patch, patch_type=patch_type, field_manager=field_manager, force=force
        )
        return _object(await self.send(request))

    async def apply(self, res: Resource, obj: Mapping[str, Any], *, field_manager: str, force: bool = False) -> JsonObj:
        """Server-side apply of ``obj`` (creates it when absent); :class:`Conflict` on a field conflict."""
        name = _name_of(obj)
        if name is None:
            raise ValueError("apply needs metadata.name")
        ns = resolve_namespace(res, None, obj)
        return await self.patch(
            res, name, obj, namespace=ns, patch_type=PatchType.APPLY, field_manager=field_manager, force=force
        )

    async def delete(self, res: Resource, name: str, *, namespace: str | None = None) -> None:
        """Delete the object (objects with finalizers only get ``deletionTimestamp``)."""
        await self.send(Request(Verb.DELETE, res, resolve_namespace(res, namespace), name))

    async def update_status(
        self, res: Resource, obj: Mapping[str, Any], *, field_manager: str | None = None
    ) -> JsonObj:
        """Replace ``status`` through the status subresource; conditional like :meth:`replace`."""
        ns = resolve_namespace(res, None, obj)
        request = Request(Verb.UPDATE, res, ns, _name_of(obj), "status", body=obj, field_manager=field_manager)
        return _object(await self.send(request))

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
        ns = resolve_namespace(res, namespace)
        request = Request(
            Verb.PATCH,
            res,
            ns,
            name,
            "status",
            body=patch,
            patch_type=patch_type,
            field_manager=field_manager,
            force=force,
        )
        return _object(await self.send(request))

    async def bind(
        self, pod_name: str, node_name: str, *, namespace: str | None = None, pod_uid: str | None = None
    ) -> None:
        """``pods/binding``: set ``spec.nodeName``; :class:`Conflict` if the pod is already bound."""
        ns = resolve_namespace(POD, namespace)
        metadata: JsonObj = {"name": pod_name, "namespace": ns}
        if pod_uid:
            metadata["uid"] = pod_uid
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": metadata,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
        await self.send(Request(Verb.CREATE, POD, ns, pod_name, "binding", body=binding))

    async def create_event(self, event: Mapping[str, Any]) -> JsonObj:
        """Create a core/v1 ``Event`` (see :func:`numaplane.kube.events.make_event`)."""
        return await self.create(EVENT, event)
