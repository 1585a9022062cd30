"""Fault injection for any port: :class:`FaultyKube` wraps a :class:`KubePort` (e.g. the in-memory one).

The faults are the fake server's (:class:`~numaplane.testing.fakeapi.faults.FaultInjector`), matched
on the same verb / resource / URL-path terms, so a test can inject "the next bind answers 409" the
same way whether it runs on :class:`~numaplane.kube.memory.InMemoryKube` or on the fake API server.
A matching fault raises the typed error (:func:`numaplane.kube.errors.from_status`) without calling
the wrapped port.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from numaplane.kube.errors import from_status, status_reason
from numaplane.kube.port import (
    EVENT,
    POD,
    JsonObj,
    KubePort,
    ObjectList,
    PatchType,
    Resource,
    WatchEvent,
    object_namespace,
    resolve_namespace,
)
from numaplane.testing.fakeapi.faults import FaultInjector

__all__ = ["FaultyKube"]


class FaultyKube:
    """A :class:`KubePort` that fails requests on demand (``faulty.faults.add(409, verb="update")``)."""

    def __init__(self, inner: KubePort) -> None:
        self.inner = inner
        self.faults = FaultInjector()

    def _check(self, verb: str, res: Resource, namespace: str | None, name: str | None, sub: str | None = None) -> None:
        resource = f"{res.plural}/{sub}" if sub else res.plural
        method = {"get": "GET", "list": "GET", "watch": "GET", "create": "POST", "update": "PUT", "patch": "PATCH"}
        fault = self.faults.take(
            verb=verb,
            resource=resource,
            method=method.get(verb, "DELETE"),
            path=res.path(namespace, name, sub),
        )
        if fault is not None:
            raise from_status(fault.status, fault.message, fault.reason or status_reason(fault.status))

    @staticmethod
    def _name(obj: Mapping[str, Any]) -> str | None:
        name = (obj.get("metadata") or {}).get("name")
        return str(name) if name else None

    async def get(self, res: Resource, name: str, *, namespace: str | None = None) -> JsonObj:
        self._check("get", res, resolve_namespace(res, namespace), name)
        return await self.inner.get(res, name, namespace=namespace)

    async def list(
        self,
        res: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ObjectList:
        self._check("list", res, namespace, None)
        return await self.inner.list(
            res, namespace=namespace, label_selector=label_selector, field_selector=field_selector
        )

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
        self._check("watch", res, namespace, None)
        stream = self.inner.watch(
            res,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            resource_version=resource_version,
            allow_bookmarks=allow_bookmarks,
        )
        try:
            async for event in stream:
                yield event
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()

    async def create(
        self, res: Resource, obj: Mapping[str, Any], *, namespace: str | None = None, field_manager: str | None = None
    ) -> JsonObj:
        self._check("create", res, resolve_namespace(res, namespace, obj), None)
        return await self.inner.create(res, obj, namespace=namespace, field_manager=field_manager)

    async def replace(self, res: Resource, obj: Mapping[str, Any], *, field_manager: str | None = None) -> JsonObj:
        self._check("update", res, resolve_namespace(res, None, obj), self._name(obj))
        return await self.inner.replace(res, obj, field_manager=field_manager)

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
        self._check("patch", res, resolve_namespace(res, namespace), name)
        return await self.inner.patch(
            res, name, patch, namespace=namespace, patch_type=patch_type, field_manager=field_manager, force=force
        )

    async def apply(self, res: Resource, obj: Mapping[str, Any], *, field_manager: str, force: bool = False) -> JsonObj:
        self._check("patch", res, resolve_namespace(res, None, obj), self._name(obj))
        return await self.inner.apply(res, obj, field_manager=field_manager, force=force)

    async def delete(self, res: Resource, name: str, *, namespace: str | None = None) -> None:
        self._check("delete", res, resolve_namespace(res, namespace), name)
        await self.inner.delete(res, name, namespace=namespace)

    async def update_status(
        self, res: Resource, obj: Mapping[str, Any], *, field_manager: str | None = None
    ) -> JsonObj:
        self._check("update", res, resolve_namespace(res, None, obj), self._name(obj), "status")
        return await self.inner.update_status(res, obj, field_manager=field_manager)

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
        self._check("patch", res, resolve_namespace(res, namespace), name, "status")
        return await self.inner.patch_status(
            res, name, patch, namespace=namespace, patch_type=patch_type, field_manager=field_manager, force=force
        )

    async def bind(
        self, pod_name: str, node_name: str, *, namespace: str | None = None, pod_uid: str | None = None
    ) -> None:
        self._check("create", POD, resolve_namespace(POD, namespace), pod_name, "binding")
        await self.inner.bind(pod_name, node_name, namespace=namespace, pod_uid=pod_uid)

    async def create_event(self, event: Mapping[str, Any]) -> JsonObj:
        self._check("create", EVENT, object_namespace(event) or "default", None)
        return await self.inner.create_event(event)

    async def close(self) -> None:
        await self.inner.close()
