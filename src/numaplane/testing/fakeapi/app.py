"""HTTP layer of the fake API server: Kubernetes REST paths onto an :class:`InMemoryKube` store.

Served (enough for lightkube and kubectl-like clients):

* discovery: ``/api``, ``/apis``, ``/api/v1``, ``/apis/<group>/<version>`` (resource lists with
  verbs, short names and subresources), ``/version``, ``/healthz``, ``/readyz``, ``/livez``;
* ``/api/v1/...`` and ``/apis/<group>/<version>/...`` for every served resource (built-ins plus
  resources of stored CRDs): get, list, watch (``?watch=true``; ``resourceVersion``,
  ``allowWatchBookmarks``, ``timeoutSeconds``; newline-delimited JSON in a chunked response), create,
  replace, patch (merge; strategic merge treated as merge; JSON patch; apply with ``fieldManager`` and
  ``force``), delete, ``<plural>/<name>/status`` (get, put, patch) and ``pods/<name>/binding`` (post);
* ``labelSelector`` / ``fieldSelector`` on list and watch;
* ``limit`` / ``continue`` on list (pagination; see :meth:`InMemoryKube.list_page` for how a
  continued list sees concurrent changes).

Failures answer with a ``Status`` object and the matching HTTP code; a watch that cannot start (410
for an expired version) answers 200 with a single ``ERROR`` event, as kube-apiserver does.

Not served: ``deletecollection``, ``dryRun`` (400), OpenAPI
documents, authentication (every request is allowed), protobuf and table output.

Size: a little over 400 lines, kept in one module on purpose — it is one REST dispatch (path →
resource → verb → store call → response), and splitting it would only scatter that table.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import yaml
from aiohttp import web

from numaplane.kube.errors import Invalid, KubeError, NotFound, from_status, status_reason, to_status
from numaplane.kube.memory import InMemoryKube
from numaplane.kube.port import PatchType, Request, Verb
from numaplane.kube.resources import POD, Resource
from numaplane.kube.selectors import SelectorError

if TYPE_CHECKING:
    from numaplane.testing.fakeapi.server import FakeApiServer

__all__ = ["build_app"]

FAKE_VERSION = {
    "major": "1",
    "minor": "35",
    "gitVersion": "v1.35.0-numaplane-fake",
    "platform": "linux/amd64",
}

_PATCH_CONTENT_TYPES = {
    "application/merge-patch+json": PatchType.MERGE,
    "application/strategic-merge-patch+json": PatchType.MERGE,
    "application/json-patch+json": PatchType.JSON,
    "application/apply-patch+yaml": PatchType.APPLY,
    "application/apply-patch+json": PatchType.APPLY,
}


def _json(body: Any, status: int = 200) -> web.Response:
    # Exactly "application/json" (no charset), as kube-apiserver sends it; lightkube compares verbatim.
    return web.Response(status=status, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})


def _error(error: KubeError) -> web.Response:
    status = to_status(error)
    return _json(status, status=int(status["code"]))


@dataclass(frozen=True, slots=True)
class _Target:
    res: Resource
    namespace: str | None
    name: str | None
    subresource: str | None

    @property
    def resource_label(self) -> str:
        return f"{self.res.plural}/{self.subresource}" if self.subresource else self.res.plural


def _parse_path(store: InMemoryKube, segments: list[str]) -> tuple[str, str, list[str]] | None:
    if len(segments) >= 2 and segments[0] == "api":
        return "", segments[1], segments[2:]
    if len(segments) >= 3 and segments[0] == "apis":
        return segments[1], segments[2], segments[3:]
    return None


def _target(store: InMemoryKube, group: str, version: str, rest: list[str]) -> _Target:
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        candidate = store.find_resource(group, version, rest[2])
        if candidate is not None and candidate.namespaced:
            namespace = rest[1]
            rest = rest[2:]
    res = store.find_resource(group, version, rest[0])
    if res is None or len(rest) > 3:
        raise NotFound(f"the server could not find the requested resource ({'/'.join(rest)})")
    if res.namespaced and namespace is None and len(rest) > 1:
        raise NotFound("the server could not find the requested resource (namespaced object without namespace)")
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    if sub is not None and not ((sub == "status" and res.status_subresource) or (sub == "binding" and res == POD)):
        raise NotFound(f"the server could not find the requested resource ({res.plural}/{sub})")
    return _Target(res, namespace, name, sub)


def _verb(method: str, target: _Target, query: Any) -> str:
    if method == "GET":
        if target.name is None:
            return "watch" if query.get("watch") in ("true", "1") else "list"
        return "get"
    if method == "POST":
        return "create"
    if method == "PUT":
        return "update"
    if method == "PATCH":
        return "patch"
    if method == "DELETE":
        return "delete" if target.name is not None else "deletecollection"
    return method.lower()


async def _body(request: web.Request, *, yaml_ok: bool = False) -> Any:
    raw = await request.read()
    if not raw:
        raise Invalid("request body is empty")
    try:
        return json.loads(raw)
    except ValueError:
        if not yaml_ok:
            raise Invalid("request body is not valid JSON") from None
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise Invalid(f"request body is neither JSON nor YAML: {exc}") from None


def _discovery_groups(store: InMemoryKube) -> dict[str, Any]:
    groups: dict[str, list[str]] = {}
    for res in store.served_resources():
        if res.group:
            versions = groups.setdefault(res.group, [])
            if res.version not in versions:
                versions.append(res.version)
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [
            {
                "name": group,
                "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in versions],
                "preferredVersion": {"groupVersion": f"{group}/{versions[0]}", "version": versions[0]},
            }
            for group, versions in sorted(groups.items())
        ],
    }


def _resource_list(store: InMemoryKube, group: str, version: str) -> dict[str, Any] | None:
    served = [r for r in store.served_resources() if r.group == group and r.version == version]
    if not served:
        return None
    verbs = ["create", "delete", "get", "list", "patch", "update", "watch"]
    resources: list[dict[str, Any]] = []
    for res in served:
        entry: dict[str, Any] = {
            "name": res.plural,
            "singularName": res.singular,
            "namespaced": res.namespaced,
            "kind": res.kind,
            "verbs": verbs,
        }
        if res.short_names:
            entry["shortNames"] = list(res.short_names)
        resources.append(entry)
        if res.status_subresource:
            resources.append(
                {
                    "name": f"{res.plural}/status",
                    "singularName": "",
                    "namespaced": res.namespaced,
                    "kind": res.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
        if res == POD:
            resources.append(
                {"name": "pods/binding", "singularName": "", "namespaced": True, "kind": "Binding", "verbs": ["create"]}
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


def build_app(server: FakeApiServer) -> web.Application:
    """The aiohttp application serving ``server.store`` (read on every request, so it can be swapped)."""

    async def dispatch(request: web.Request) -> web.StreamResponse:
        server.requests.append((request.method, request.path_qs))
        store = server.store
        segments = [s for s in request.path.split("/") if s]
        try:
            parsed = _parse_path(store, segments)
            if parsed is None or (parsed[0] == "" and parsed[1] != "v1"):
                return await _misc(request, segments)
            group, version, rest = parsed
            if not rest:
                fault = server.faults.take(verb="discovery", resource="", method=request.method, path=request.path)
                if fault is not None:
                    raise from_status(fault.status, fault.message, fault.reason or status_reason(fault.status))
                listing = _resource_list(store, group, version)
                if listing is None:
                    raise NotFound(f"the server could not find the requested resource ({request.path})")
                return _json(listing)
            target = _target(store, group, version, rest)
            verb = _verb(request.method, target, request.query)
            fault = server.faults.take(
                verb=verb, resource=target.resource_label, method=request.method, path=request.path
            )
            if fault is not None:
                raise from_status(fault.status, fault.message, fault.reason or status_reason(fault.status))
            if request.query.get("dryRun"):
                raise Invalid("dryRun is not supported by the fake API server")
            return await _resource(request, store, target, verb)
        except KubeError as exc:
            return _error(exc)
        except (SelectorError, ValueError) as exc:
            return _error(Invalid(str(exc), code=400, reason="BadRequest"))

    async def _misc(request: web.Request, segments: list[str]) -> web.StreamResponse:
        fault = server.faults.take(verb="discovery", resource="", method=request.method, path=request.path)
        if fault is not None:
            raise from_status(fault.status, fault.message, fault.reason or status_reason(fault.status))
        path = "/" + "/".join(segments)
        if path == "/api":
            return _json(
                {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server.address}],
                }
            )
        if path == "/apis":
            return _json(_discovery_groups(server.store))
        if path == "/version":
            return _json(FAKE_VERSION)
        if path in ("/healthz", "/readyz", "/livez"):
            return web.Response(text="ok")
        raise NotFound(f"the server could not find the requested resource ({path})")

    async def _resource(request: web.Request, store: InMemoryKube, target: _Target, verb: str) -> web.StreamResponse:
        res, ns, name = target.res, target.namespace, target.name
        query = request.query
        manager = query.get("fieldManager") or None
        if verb == "list":
            list_meta: dict[str, Any] = {}
            limit = query.get("limit")
            try:
                page_size = int(limit) if limit else None
            except ValueError as exc:
                raise Invalid(f"limit must be an integer, got {limit!r}") from exc
            listing = store.list_page(
                res,
                limit=page_size,
                continue_token=query.get("continue") or None,
                namespace=ns,
                label_selector=query.get("labelSelector"),
                field_selector=query.get("fieldSelector"),
            )
            if listing.continue_token is not None:
                list_meta["continue"] = listing.continue_token
            list_meta["resourceVersion"] = listing.resource_version
            return _json(
                {
                    "kind": f"{res.kind}List",
                    "apiVersion": res.api_version,
                    "metadata": list_meta,
                    "items": listing.items,
                }
            )
        if verb == "watch":
            return await _watch(request, store, target)
        if name is None:
            if verb == "create":
                body = await _body(request)
                if not isinstance(body, dict):
                    raise Invalid("the object must be a JSON object")
                _check_namespace(body, ns)
                created = await store.create(res, body, namespace=ns, field_manager=manager)
                return _json(created, status=201)
            raise web.HTTPMethodNotAllowed(request.method, ["GET", "POST"])
        if verb == "get":
            return _json(await store.get(res, name, namespace=ns))
        if verb == "create" and target.subresource == "binding":
            body = await _body(request)
            target_node = ((body or {}).get("target") or {}).get("name", "")
            uid = ((body or {}).get("metadata") or {}).get("uid")
            await store.bind(name, str(target_node), namespace=ns, pod_uid=uid)
            return _json({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}, 201)
        if verb == "update":
            body = await _body(request)
            if not isinstance(body, dict):
                raise Invalid("the object must be a JSON object")
            _check_namespace(body, ns)
            meta = body.setdefault("metadata", {})
            if meta.get("name") not in (None, name):
                raise Invalid(
                    f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})",
                    code=400,
                    reason="BadRequest",
                )
            meta["name"] = name
            if ns is not None:
                meta["namespace"] = ns
            if target.subresource == "status":
                return _json(await store.update_status(res, body, field_manager=manager))
            return _json(await store.replace(res, body, field_manager=manager))
        if verb == "patch":
            content_type = request.content_type
            patch_type = _PATCH_CONTENT_TYPES.get(content_type)
            if patch_type is None:
                raise KubeError(
                    f"unsupported patch content type {content_type!r}", code=415, reason="UnsupportedMediaType"
                )
            body = await _body(request, yaml_ok=patch_type is PatchType.APPLY)
            force = query.get("force") in ("true", "1")
            if target.subresource == "status":
                patched = await store.patch_status(
                    res, name, body, namespace=ns, patch_type=patch_type, field_manager=manager, force=force
                )
            else:
                patched = await store.patch(
                    res, name, body, namespace=ns, patch_type=patch_type, field_manager=manager, force=force
                )
            return _json(patched)
        if verb == "delete":
            return _json(await store.send(Request(Verb.DELETE, res, ns, name)))
        raise web.HTTPMethodNotAllowed(request.method, ["GET", "PUT", "PATCH", "DELETE"])

    async def _watch(request: web.Request, store: InMemoryKube, target: _Target) -> web.StreamResponse:
        query = request.query
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        try:
            timeout = float(query["timeoutSeconds"]) if query.get("timeoutSeconds") else None
        except ValueError as exc:
            raise Invalid("timeoutSeconds must be a number", code=400, reason="BadRequest") from exc
        start_error: KubeError | None = None
        stream = None
        try:
            stream = store.open_watch(
                target.res,
                namespace=target.namespace,
                label_selector=query.get("labelSelector"),
                field_selector=query.get("fieldSelector"),
                resource_version=query.get("resourceVersion"),
                allow_bookmarks=query.get("allowWatchBookmarks") in ("true", "1"),
            )
        except KubeError as exc:
            start_error = exc
        await response.prepare(request)
        task = asyncio.current_task()
        if task is not None:
            server.watch_tasks.add(task)
        if request.transport is not None:
            server.watch_transports.add(request.transport)
        try:
            if start_error is not None:
                await _write_event(response, "ERROR", to_status(start_error))
                return response
            assert stream is not None
            try:
                async with asyncio.timeout(timeout):
                    async for event in stream:
                        await _write_event(response, event.type.value, event.object)
            except TimeoutError:
                pass
            except KubeError as exc:
                with contextlib.suppress(ConnectionError):
                    await _write_event(response, "ERROR", to_status(exc))
            except ConnectionError:  # the client went away
                return response
            with contextlib.suppress(ConnectionError, RuntimeError):
                await response.write_eof()
            return response
        finally:
            if stream is not None:
                with contextlib.suppress(Exception):
                    await stream.aclose()
            if task is not None:
                server.watch_tasks.discard(task)
            if request.transport is not None:
                server.watch_transports.discard(request.transport)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", dispatch)
    return app


async def _write_event(response: web.StreamResponse, kind: str, obj: dict[str, Any]) -> None:
    line = json.dumps({"type": kind, "object": obj}) + "\n"
    await response.write(line.encode())


def _check_namespace(body: dict[str, Any], namespace: str | None) -> None:
    given = (body.get("metadata") or {}).get("namespace")
    if namespace is not None and given and given != namespace:
        raise Invalid(
            "the namespace of the provided object does not match the namespace sent on the request",
            code=400,
            reason="BadRequest",
        )
