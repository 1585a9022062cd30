"""The real Kubernetes adapter: :class:`LightkubePort` implements the port on lightkube's ``AsyncClient``.

Every resource, built-in or custom, goes through lightkube's *generic resource* classes, so objects
stay plain dicts end to end (lightkube's ``Generic`` objects are ``dict`` subclasses) and a CRD needs
nothing but a :class:`~numaplane.kube.resources.Resource` descriptor. The classes are built here per
descriptor and deliberately *not* registered in lightkube's global resource registry, which would
clash with lightkube's typed core models.

The port's typed verbs come from :class:`~numaplane.kube.port.KubePort`; this class answers its
:class:`~numaplane.kube.port.Request` in :meth:`LightkubePort.send` and :meth:`LightkubePort.stream`.
Where lightkube's public ``AsyncClient`` methods take what a request carries (get, create, replace,
patch, delete, subresources) they are used directly. ``list`` and ``watch`` go one level down, to
lightkube's ``GenericAsyncClient`` (``prepare_request`` / ``send`` / ``handle_response`` /
``watch``), because the port passes selector strings and ``limit`` / ``continue`` through unchanged
(one request, one page) and asks for watch bookmarks (``allowWatchBookmarks``), which lightkube's
high-level ``watch`` does not expose. That one private attribute access
(``AsyncClient._client``) is isolated in :meth:`LightkubePort._generic`.

Errors: lightkube's ``ApiError`` (a ``Status`` from the server), httpx status errors and transport
errors are translated to :mod:`numaplane.kube.errors` (:mod:`numaplane.kube.lightkube_errors`); nothing else escapes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import urllib.parse
from collections.abc import AsyncGenerator, Mapping
from pathlib import Path
from typing import Any, cast

import httpx2
from lightkube import AsyncClient
from lightkube.config.kubeconfig import KubeConfig, SingleConfig
from lightkube.core import resource as lk_res
from lightkube.core.exceptions import ConfigError
from lightkube.core.generic_client import ALL_NS
from lightkube.generic_resource import (
    GenericGlobalResource,
    GenericGlobalStatus,
    GenericNamespacedResource,
    GenericNamespacedStatus,
    create_api_info,
)
from lightkube.types import PatchType as LkPatchType
from lightkube.types import on_error_raise

from numaplane.kube.errors import ServerError, Unavailable
from numaplane.kube.leanpost import LeanPoster
from numaplane.kube.lightkube_errors import translated
from numaplane.kube.patch import clone
from numaplane.kube.port import (
    EventType,
    JsonObj,
    KubePort,
    ObjectList,
    PatchType,
    Request,
    Response,
    Verb,
    WatchEvent,
)
from numaplane.kube.resources import Resource

__all__ = ["LightkubePort", "server_config"]

_PATCH_TYPES = {
    PatchType.MERGE: LkPatchType.MERGE,
    PatchType.JSON: LkPatchType.JSON,
    PatchType.APPLY: LkPatchType.APPLY,
}


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


def _owned(obj: Any) -> JsonObj:
    """A lightkube generic object freshly decoded from a response, as a plain dict, without a deep copy.

    Invariant: lightkube's generic objects are ``dict`` subclasses wrapping the decoded JSON as is
    (``cls(decoded)``), so below the top level every value is already a plain dict, list or scalar that
    nothing else references; a shallow copy makes it plain. Only for objects nobody else holds (watch
    events, list items); anything else goes through :func:`_plain`.
    """
    if isinstance(obj, dict):
        return dict(obj)
    return _plain(obj)


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


class LightkubePort(KubePort):
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
        self._lean: LeanPoster | None = None
        self._lean_checked = False

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

    # ------------------------------------------------------------------ the port

    async def send(self, request: Request) -> Response:
        res = request.resource
        with translated():
            if request.verb is Verb.LIST:
                return await self._list(request)
            if request.verb is Verb.GET:
                return _plain(await self._lk.get(_lightkube_classes(res)[0], request.name, namespace=request.namespace))
            if request.verb is Verb.CREATE:
                return await self._create(request)
            if request.verb is Verb.UPDATE:
                return await self._replace(request)
            if request.verb is Verb.PATCH:
                return await self._patch(request)
            if request.verb is Verb.DELETE:
                cls = _lightkube_classes(res)[0]
                if res.namespaced:
                    await self._lk.delete(cls, request.name, namespace=request.namespace)
                else:
                    await self._lk.delete(cls, request.name)
                return {}
        raise ValueError(f"verb {request.verb} is not a unary request")

    async def _list(self, request: Request) -> ObjectList:
        """One list request (one page when ``request.limit`` is set); lightkube does not follow ``continue``."""
        res = request.resource
        generic = self._generic()
        prepared = generic.prepare_request(
            "list",
            res=_lightkube_classes(res)[0],
            namespace=ALL_NS if res.namespaced and request.namespace is None else request.namespace,
            params={
                "labelSelector": request.label_selector or None,
                "fieldSelector": request.field_selector or None,
                "limit": request.limit,
                "continue": request.continue_token,
            },
        )
        response = await generic.send(generic.build_adapter_request(prepared))
        more, version, chunk = generic.handle_response("list", response, prepared)
        items = []
        for item in chunk:
            obj = _owned(item)
            obj.setdefault("apiVersion", res.api_version)
            obj.setdefault("kind", res.kind)
            items.append(obj)
        token = str(prepared.params.get("continue") or "") if more else ""
        return ObjectList(items, str(version or ""), token or None)

    async def _create(self, request: Request) -> JsonObj:
        res, ns = request.resource, request.namespace
        if request.subresource == "binding":
            # the scheduler's hot path: straight to the HTTP client (lightkube's model round trip
            # costs as much CPU as the request itself), the answer (a Status) is not read
            await self._post(f"/api/v1/namespaces/{ns}/pods/{request.name}/binding", request.body, None)
            return {}
        if res.kind == "Event" and res.group == "" and ns is not None:
            # one per scheduled pod: the same direct path
            body = {**request.body, "apiVersion": res.api_version, "kind": res.kind}
            body["metadata"] = {**(body.get("metadata") or {}), "namespace": ns}
            created: JsonObj = json.loads(
                (await self._post(f"/api/v1/namespaces/{ns}/events", body, request.field_manager)).content
            )
            return created
        cls = _lightkube_classes(res)[0]
        body = _with_type(res, request.body)
        if ns is not None:
            body.setdefault("metadata", {})["namespace"] = ns
        if res.namespaced:
            created = await self._lk.create(cls(body), namespace=ns, field_manager=request.field_manager)
        else:
            created = await self._lk.create(cls(body), field_manager=request.field_manager)
        return _plain(created)

    def _lean_poster(self) -> LeanPoster | None:
        """The lean client for the per-pod POSTs (:mod:`numaplane.kube.leanpost`), built at first use;
        ``None`` when lightkube's HTTP client has more to it (a proxy, HTTP/2 ...)."""
        if not self._lean_checked:
            self._lean_checked = True
            self._lean = LeanPoster.for_client(self._generic()._client)
        return self._lean

    async def _post(self, path: str, body: Mapping[str, Any], field_manager: str | None) -> httpx2.Response:
        """``POST path`` with the JSON ``body`` with lightkube's HTTP client's credentials, base URL, TLS
        and timeout (the client's field manager unless ``field_manager``): through the lean client
        (:mod:`numaplane.kube.leanpost`) when it can send it, through the httpx client otherwise and
        after a ``401`` (its auth flow re-reads a rotated token). A non-2xx answer raises
        ``httpx2.HTTPStatusError`` (translated by the caller's ``translated()``)."""
        generic = self._generic()
        manager = field_manager or generic._field_manager
        content = json.dumps(body, separators=(",", ":")).encode()
        lean = self._lean_poster()
        if lean is not None:
            query = "?" + urllib.parse.urlencode({"fieldManager": manager}) if manager else ""
            response = await lean.post(path + query, content)
            if response.status_code != 401:
                response.raise_for_status()
                return response
        http: Any = generic._client
        response = cast(
            httpx2.Response,
            await http.post(
                path,
                content=content,
                params={"fieldManager": manager} if manager else None,
                headers={"Content-Type": "application/json", "Accept": "application/json"},
            ),
        )
        response.raise_for_status()
        return response

    async def _replace(self, request: Request) -> JsonObj:
        res, ns = request.resource, request.namespace
        main_cls, status_cls = _lightkube_classes(res)
        body = _with_type(res, request.body)
        if ns is not None:
            body.setdefault("metadata", {})["namespace"] = ns
        manager = request.field_manager
        if request.subresource != "status":
            return _plain(await self._lk.replace(main_cls(body), field_manager=manager))
        if not request.name:
            raise ValueError("update_status needs metadata.name")
        if res.namespaced:
            return _plain(await self._lk.replace(status_cls(body), request.name, namespace=ns, field_manager=manager))
        return _plain(await self._lk.replace(status_cls(body), request.name, field_manager=manager))

    async def _patch(self, request: Request) -> JsonObj:
        res, patch = request.resource, request.body
        main_cls, status_cls = _lightkube_classes(res)
        body: Any
        if request.patch_type is PatchType.APPLY:
            if not request.field_manager:
                raise ValueError("server-side apply needs a field_manager")
            if not isinstance(patch, Mapping):
                raise ValueError("an apply patch must be an object")
            body = _with_type(res, patch)
        elif isinstance(patch, Mapping):
            body = clone(patch)
        else:
            body = [clone(op) for op in patch]
        return _plain(
            await self._lk.patch(
                status_cls if request.subresource == "status" else main_cls,
                request.name,
                body,
                namespace=request.namespace,
                patch_type=_PATCH_TYPES[request.patch_type],
                field_manager=request.field_manager,
                force=request.force,
            )
        )

    async def stream(self, request: Request) -> AsyncGenerator[WatchEvent, None]:
        res = request.resource
        generic = self._generic()
        with translated():
            prepared = generic.prepare_request(
                "list",
                res=_lightkube_classes(res)[0],
                namespace=ALL_NS if res.namespaced and request.namespace is None else request.namespace,
                watch=True,
                params={
                    "labelSelector": request.label_selector or None,
                    "fieldSelector": request.field_selector or None,
                    "resourceVersion": request.resource_version or None,
                    "allowWatchBookmarks": "true" if request.allow_bookmarks else None,
                    "timeoutSeconds": self.watch_timeout_seconds,
                },
            )
        events = generic.watch(prepared, on_error=on_error_raise)
        try:
            while True:
                try:
                    with translated():
                        if self.watch_inactivity_seconds is None:
                            kind, obj = await events.__anext__()
                        else:
                            kind, obj = await asyncio.wait_for(events.__anext__(), self.watch_inactivity_seconds)
                except StopAsyncIteration:
                    return
                except TimeoutError as exc:
                    raise Unavailable(f"watch silent for {self.watch_inactivity_seconds} s") from exc
                try:
                    event_type = EventType(kind)
                except ValueError as exc:
                    raise ServerError(f"unknown watch event type {kind!r}") from exc
                yield WatchEvent(event_type, _owned(obj))
        finally:
            with contextlib.suppress(Exception):
                await events.aclose()

    async def get_path(self, path: str, *, timeout_seconds: float = 10.0) -> bytes:
        """The raw body of ``GET path`` (an API path such as a node's or pod's ``proxy`` subresource).

        For reads the typed methods cannot express (``/api/v1/nodes/<n>/proxy/configz``); errors are
        mapped as for every other call (a non-2xx answer raises the matching :class:`ApiError`).
        """
        http: Any = self._generic()._client
        with translated():
            response = await http.get(path, timeout=timeout_seconds)
            response.raise_for_status()
            body: bytes = response.content
            return body

    async def close(self) -> None:
        if self._lean is not None:
            self._lean.close()
        with contextlib.suppress(Exception):
            await self._lk.close()

    async def __aenter__(self) -> LightkubePort:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
