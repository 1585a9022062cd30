"""The real Kubernetes adapter: :class:`LightkubePort` implements the port on lightkube's ``AsyncClient``.

Every resource, built-in or custom, goes through lightkube's *generic resource* classes, so objects
stay plain dicts end to end (lightkube's ``Generic`` objects are ``dict`` subclasses) and a CRD needs
nothing but a :class:`~numaplane.kube.resources.Resource` descriptor. The classes are built here per
descriptor and deliberately *not* registered in lightkube's global resource registry, which would
clash with lightkube's typed core models.

Where lightkube's public ``AsyncClient`` methods take what the port takes (get, create, replace,
patch, delete, subresources) they are used directly. ``list`` and ``watch`` go one level down, to
lightkube's ``GenericAsyncClient`` (``prepare_request`` / ``list`` / ``watch``), because the port
passes selector strings through unchanged and asks for watch bookmarks (``allowWatchBookmarks``),
which lightkube's high-level ``watch`` does not expose. That one private attribute access
(``AsyncClient._client``) is isolated in :meth:`LightkubePort._generic`.

Errors: lightkube's ``ApiError`` (a ``Status`` from the server), httpx status errors and transport
errors are translated to :mod:`numaplane.kube.errors` in :func:`_translate`; nothing else escapes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import httpx2
import msgspec
from lightkube import ApiError as LightkubeApiError
from lightkube import AsyncClient
from lightkube.config.kubeconfig import KubeConfig, SingleConfig
from lightkube.core import resource as lk_res
from lightkube.core.exceptions import ConfigError, NotReadyError
from lightkube.core.generic_client import ALL_NS
from lightkube.generic_resource import (
    Generic,
    GenericGlobalResource,
    GenericGlobalStatus,
    GenericNamespacedResource,
    GenericNamespacedStatus,
    create_api_info,
)
from lightkube.types import PatchType as LkPatchType
from lightkube.types import on_error_raise

from numaplane.kube.errors import KubeError, ServerError, Unavailable, from_status
from numaplane.kube.patch import clone
from numaplane.kube.port import (
    EventType,
    JsonObj,
    ObjectList,
    PatchType,
    WatchEvent,
    resolve_namespace,
)
from numaplane.kube.resources import EVENT, POD, Resource

__all__ = ["LightkubePort", "server_config"]

_PATCH_TYPES = {
    PatchType.MERGE: LkPatchType.MERGE,
    PatchType.JSON: LkPatchType.JSON,
    PatchType.APPLY: LkPatchType.APPLY,
}


class _PodBinding(lk_res.NamespacedSubResource, Generic):  # type: ignore[misc]
    """``pods/<name>/binding`` as a generic lightkube subresource (POST only)."""

    _api_info = lk_res.ApiInfo(
        resource=lk_res.ResourceDef("", "v1", "Binding"),
        parent=lk_res.ResourceDef("", "v1", "Pod"),
        plural="pods",
        verbs=["post"],
        action="binding",
    )


_classes: dict[Resource, tuple[type[Any], type[Any]]] = {}


def _lightkube_classes(res: Resource) -> tuple[type[Any], type[Any]]:
    """The (main, status) generic lightkube classes for ``res``, built once per descriptor."""
    cached = _classes.get(res)
    if cached is not None:
        return cached
    info = create_api_info(res.group, res.version, res.kind, res.plural)
    main_base: type[Any] = GenericNamespacedResource if res.namespaced else GenericGlobalResource
    status_base: type[Any] = GenericNamespacedStatus if res.namespaced else GenericGlobalStatus
    status_info = lk_res.ApiInfo(
        resource=info.resource, parent=info.resource, plural=res.plural, verbs=["get", "patch", "put"], action="status"
    )
    status_cls = type(f"{res.kind}Status", (status_base,), {"_api_info": status_info})
    main_cls = type(res.kind, (main_base,), {"_api_info": info, "Status": status_cls})
    _classes[res] = (main_cls, status_cls)
    return main_cls, status_cls


def _plain(obj: Any) -> JsonObj:
    """A lightkube generic object (a dict subclass) as a plain dict."""
    if obj is None:
        return {}
    if isinstance(obj, Mapping):
        return cast(JsonObj, clone(obj))
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        return cast(JsonObj, to_dict())
    raise ServerError(f"unexpected response object {type(obj).__name__}")


def _translate_exception(exc: BaseException) -> KubeError | None:
    if isinstance(exc, KubeError):
        return exc
    if isinstance(exc, LightkubeApiError):
        status = exc.status
        code = getattr(status, "code", None)
        if code is None and exc.response is not None:
            code = exc.response.status_code
        return from_status(
            int(code or 500), str(getattr(status, "message", "") or ""), str(getattr(status, "reason", "") or "")
        )
    if isinstance(exc, httpx2.HTTPStatusError):
        response = exc.response
        message, reason = f"HTTP {response.status_code} {response.reason_phrase}", ""
        with contextlib.suppress(Exception):  # the body may be unread (streams) or not a Status
            status = response.json()
            if isinstance(status, dict) and status.get("kind") == "Status":
                message = str(status.get("message") or message)
                reason = str(status.get("reason") or "")
        return from_status(response.status_code, message, reason)
    if isinstance(exc, httpx2.TransportError):
        return Unavailable(f"API server unreachable: {type(exc).__name__}: {exc}")
    if isinstance(exc, httpx2.HTTPError):
        return Unavailable(f"HTTP error: {type(exc).__name__}: {exc}")
    if isinstance(exc, msgspec.DecodeError):
        return ServerError(f"undecodable response: {exc}")
    return None


@contextlib.contextmanager
def _translate() -> Iterator[None]:
    """Turn lightkube / httpx failures into numaplane errors."""
    try:
        yield
    except (LightkubeApiError, httpx2.HTTPError, msgspec.DecodeError) as exc:
        mapped = _translate_exception(exc)
        if mapped is None:  # pragma: no cover - the except clause lists only mapped types
            raise
        raise mapped from exc


def _with_type(res: Resource, obj: Mapping[str, Any]) -> JsonObj:
    body: JsonObj = clone(obj)
    body.setdefault("apiVersion", res.api_version)
    body.setdefault("kind", res.kind)
    return body


def server_config(url: str, *, namespace: str | None = None) -> KubeConfig:
    """A lightkube configuration for a bare server URL with an anonymous user.

    (``KubeConfig.from_server`` leaves the user unset, which lightkube's client then rejects.)
    """
    context: dict[str, Any] = {"cluster": "server", "user": "anonymous"}
    if namespace:
        context["namespace"] = namespace
    return KubeConfig.from_dict(
        {
            "clusters": [{"name": "server", "cluster": {"server": url}}],
            "users": [{"name": "anonymous", "user": {}}],
            "contexts": [{"name": "server", "context": context}],
            "current-context": "server",
        }
    )


class LightkubePort:
    """:class:`~numaplane.kube.port.KubePort` on a lightkube ``AsyncClient``.

    ``watch_timeout_seconds`` is sent as ``timeoutSeconds`` on watches (the server then ends the
    stream and lightkube resumes from the last seen version); ``watch_inactivity_seconds`` turns a
    stream that stays silent that long into :class:`~numaplane.kube.errors.Unavailable`
    (protects against half-dead connections; pair it with bookmarks).
    """

    def __init__(
        self,
        client: AsyncClient,
        *,
        watch_timeout_seconds: int | None = 290,
        watch_inactivity_seconds: float | None = None,
    ) -> None:
        self.client = client
        # lightkube's overloads are keyed on its typed resource classes; ours are built at run time.
        self._lk: Any = client
        self.watch_timeout_seconds = watch_timeout_seconds
        self.watch_inactivity_seconds = watch_inactivity_seconds

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_config(
        cls,
        config: KubeConfig | SingleConfig,
        *,
        trust_env: bool = True,
        timeout_seconds: float = 10.0,
        field_manager: str | None = None,
        **kwargs: Any,
    ) -> LightkubePort:
        """A port for an explicit lightkube configuration."""
        client = AsyncClient(
            config, timeout=httpx2.Timeout(timeout_seconds), trust_env=trust_env, field_manager=field_manager
        )
        return cls(client, **kwargs)

    @classmethod
    def from_kubeconfig(
        cls, path: str | Path | None = None, *, context: str | None = None, **kwargs: Any
    ) -> LightkubePort:
        """A port from a kubeconfig file (default: ``$KUBECONFIG`` or ``~/.kube/config``)."""
        try:
            if path is None:
                config = KubeConfig.from_env()
            else:
                config = KubeConfig.from_file(path)
            single = config.get(context_name=context)
        except (ConfigError, OSError, KeyError) as exc:
            raise Unavailable(f"cannot load kubeconfig: {exc}") from exc
        if single is None:
            raise Unavailable("kubeconfig has no usable context")
        return cls.from_config(single, **kwargs)

    @classmethod
    def in_cluster(cls, **kwargs: Any) -> LightkubePort:
        """A port from the pod's service account (``/var/run/secrets/kubernetes.io/serviceaccount``)."""
        try:
            config = KubeConfig.from_service_account()
        except (ConfigError, OSError, KeyError) as exc:
            raise Unavailable(f"not running in a cluster: {exc}") from exc
        return cls.from_config(config, **kwargs)

    @classmethod
    def from_server(cls, url: str, *, namespace: str | None = None, **kwargs: Any) -> LightkubePort:
        """A port for an API server URL without credentials (e.g. the fake API server, a kubectl proxy)."""
        kwargs.setdefault("trust_env", False)
        return cls.from_config(server_config(url, namespace=namespace), **kwargs)

    # ------------------------------------------------------------------ helpers

    def _generic(self) -> Any:
        """lightkube's ``GenericAsyncClient`` behind the public client (for list / watch with raw params)."""
        return self._lk._client

    @staticmethod
    def _collection_namespace(res: Resource, namespace: str | None) -> str | None:
        if not res.namespaced:
            if namespace is not None:
                raise ValueError(f"{res.kind} is cluster-scoped; no namespace expected, got {namespace!r}")
            return None
        return ALL_NS if namespace is None else namespace

    # ------------------------------------------------------------------ the port

    async def get(self, res: Resource, name: str, *, namespace: str | None = None) -> JsonObj:
        cls, _ = _lightkube_classes(res)
        ns = resolve_namespace(res, namespace)
        with _translate():
            return _plain(await self._lk.get(cls, name, namespace=ns))

    async def list(
        self,
        res: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ObjectList:
        cls, _ = _lightkube_classes(res)
        generic = self._generic()
        with _translate():
            request = generic.prepare_request(
                "list",
                res=cls,
                namespace=self._collection_namespace(res, namespace),
                params={"labelSelector": label_selector or None, "fieldSelector": field_selector or None},
            )
            items = []
            listing = generic.list(request)
            async for item in listing:
                items.append(_plain(item))
            try:
                version = str(listing.resourceVersion)
            except NotReadyError:  # the server sent no list version
                version = ""
        for item in items:
            item.setdefault("apiVersion", res.api_version)
            item.setdefault("kind", res.kind)
        return ObjectList(items, version)

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
        cls, _ = _lightkube_classes(res)
        generic = self._generic()
        with _translate():
            request = generic.prepare_request(
                "list",
                res=cls,
                namespace=self._collection_namespace(res, namespace),
                params={
                    "labelSelector": label_selector or None,
                    "fieldSelector": field_selector or None,
                    "limit": page_size,
                },
            )
            chunks = generic.list_chunks(request)
        try:
            while True:
                with _translate():
                    try:
                        _, chunk = await chunks.__anext__()
                    except StopAsyncIteration:
                        return
                for item in chunk:
                    obj = _plain(item)
                    obj.setdefault("apiVersion", res.api_version)
                    obj.setdefault("kind", res.kind)
                    yield obj
        finally:
            with contextlib.suppress(Exception):
                await chunks.aclose()

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
        cls, _ = _lightkube_classes(res)
        generic = self._generic()
        with _translate():
            request = generic.prepare_request(
                "list",
                res=cls,
                namespace=self._collection_namespace(res, namespace),
                watch=True,
                params={
                    "labelSelector": label_selector or None,
                    "fieldSelector": field_selector or None,
                    "resourceVersion": resource_version or None,
                    "allowWatchBookmarks": "true" if allow_bookmarks else None,
                    "timeoutSeconds": self.watch_timeout_seconds,
                },
            )
        stream = generic.watch(request, on_error=on_error_raise)
        try:
            while True:
                try:
                    with _translate():
                        if self.watch_inactivity_seconds is None:
                            kind, obj = await stream.__anext__()
                        else:
                            kind, obj = await asyncio.wait_for(stream.__anext__(), self.watch_inactivity_seconds)
                except StopAsyncIteration:
                    return
                except TimeoutError as exc:
                    raise Unavailable(f"watch silent for {self.watch_inactivity_seconds} s") from exc
                try:
                    event_type = EventType(kind)
                except ValueError as exc:
                    raise ServerError(f"unknown watch event type {kind!r}") from exc
                yield WatchEvent(event_type, _plain(obj))
        finally:
            with contextlib.suppress(Exception):
                await stream.aclose()

    async def create(
        self, res: Resource, obj: Mapping[str, Any], *, namespace: str | None = None, field_manager: str | None = None
    ) -> JsonObj:
        cls, _ = _lightkube_classes(res)
        ns = resolve_namespace(res, namespace, obj)
        body = _with_type(res, obj)
        if ns is not None:
            body.setdefault("metadata", {})["namespace"] = ns
        with _translate():
            if res.namespaced:
                created = await self._lk.create(cls(body), namespace=ns, field_manager=field_manager)
            else:
                created = await self._lk.create(cls(body), field_manager=field_manager)
        return _plain(created)

    async def replace(self, res: Resource, obj: Mapping[str, Any], *, field_manager: str | None = None) -> JsonObj:
        cls, _ = _lightkube_classes(res)
        ns = resolve_namespace(res, None, obj)
        body = _with_type(res, obj)
        if ns is not None:
            body.setdefault("metadata", {})["namespace"] = ns
        with _translate():
            return _plain(await self._lk.replace(cls(body), field_manager=field_manager))

    async def _patch(
        self,
        cls: type[Any],
        res: Resource,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        namespace: str | None,
        patch_type: PatchType,
        field_manager: str | None,
        force: bool,
    ) -> JsonObj:
        ns = resolve_namespace(res, namespace)
        body: Any
        if patch_type is PatchType.APPLY:
            if not field_manager:
                raise ValueError("server-side apply needs a field_manager")
            if not isinstance(patch, Mapping):
                raise ValueError("an apply patch must be an object")
            body = _with_type(res, patch)
        elif isinstance(patch, Mapping):
            body = clone(patch)
        else:
            body = [clone(op) for op in patch]
        with _translate():
            return _plain(
                await self._lk.patch(
                    cls,
                    name,
                    body,
                    namespace=ns,
                    patch_type=_PATCH_TYPES[patch_type],
                    field_manager=field_manager,
                    force=force,
                )
            )

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
        cls, _ = _lightkube_classes(res)
        return await self._patch(cls, res, name, patch, namespace, patch_type, field_manager, force)

    async def apply(self, res: Resource, obj: Mapping[str, Any], *, field_manager: str, force: bool = False) -> JsonObj:
        name = (obj.get("metadata") or {}).get("name")
        if not name:
            raise ValueError("apply needs metadata.name")
        ns = resolve_namespace(res, None, obj)
        return await self.patch(
            res, str(name), obj, namespace=ns, patch_type=PatchType.APPLY, field_manager=field_manager, force=force
        )

    async def delete(self, res: Resource, name: str, *, namespace: str | None = None) -> None:
        cls, _ = _lightkube_classes(res)
        ns = resolve_namespace(res, namespace)
        with _translate():
            if res.namespaced:
                await self._lk.delete(cls, name, namespace=ns)
            else:
                await self._lk.delete(cls, name)

    async def update_status(
        self, res: Resource, obj: Mapping[str, Any], *, field_manager: str | None = None
    ) -> JsonObj:
        _, status_cls = _lightkube_classes(res)
        ns = resolve_namespace(res, None, obj)
        name = (obj.get("metadata") or {}).get("name")
        if not name:
            raise ValueError("update_status needs metadata.name")
        body = _with_type(res, obj)
        if ns is not None:
            body.setdefault("metadata", {})["namespace"] = ns
        with _translate():
            if res.namespaced:
                updated = await self._lk.replace(status_cls(body), str(name), namespace=ns, field_manager=field_manager)
            else:
                updated = await self._lk.replace(status_cls(body), str(name), field_manager=field_manager)
        return _plain(updated)

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
        _, status_cls = _lightkube_classes(res)
        return await self._patch(status_cls, res, name, patch, namespace, patch_type, field_manager, force)

    async def bind(
        self, pod_name: str, node_name: str, *, namespace: str | None = None, pod_uid: str | None = None
    ) -> None:
        ns = resolve_namespace(POD, namespace)
        metadata: JsonObj = {"name": pod_name, "namespace": ns}
        if pod_uid:
            metadata["uid"] = pod_uid
        binding_cls: Any = _PodBinding
        binding = binding_cls(
            {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": metadata,
                "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
            }
        )
        with _translate():
            await self._lk.create(binding, pod_name, namespace=ns)

    async def get_path(self, path: str, *, timeout_seconds: float = 10.0) -> bytes:
        """The raw body of ``GET path`` (an API path such as a node's or pod's ``proxy`` subresource).

        For reads the typed methods cannot express (``/api/v1/nodes/<n>/proxy/configz``); errors are
        mapped as for every other call (a non-2xx answer raises the matching :class:`ApiError`).
        """
        http: Any = self._generic()._client
        with _translate():
            response = await http.get(path, timeout=timeout_seconds)
            response.raise_for_status()
            body: bytes = response.content
            return body

    async def create_event(self, event: Mapping[str, Any]) -> JsonObj:
        return await self.create(EVENT, event)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._lk.close()

    async def __aenter__(self) -> LightkubePort:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
