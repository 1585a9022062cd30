"""The typed verbs of KubePort, built once on one narrow request: which Request each one sends."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import pytest

from numaplane.kube.port import (
    NODE,
    POD,
    KubePort,
    ObjectList,
    PatchType,
    Request,
    Response,
    Verb,
    WatchEvent,
)


class Recorder(KubePort):
    """Answers nothing but records every request (a port needs only send, stream and close)."""

    def __init__(self) -> None:
        self.requests: list[Request] = []

    async def send(self, request: Request) -> Response:
        self.requests.append(request)
        if request.verb is Verb.LIST:
            token = None if request.continue_token == "2" else str(int(request.continue_token or "0") + 1)
            return ObjectList([{"metadata": {"name": f"page-{request.continue_token}"}}], "7", token)
        return {}

    async def stream(self, request: Request) -> AsyncGenerator[WatchEvent, None]:
        self.requests.append(request)
        return
        yield  # an empty stream

    async def close(self) -> None:
        pass


def seen(port: Recorder) -> list[tuple[str, str, str | None, str | None, str]]:
    return [(r.verb.value, r.resource_name, r.namespace, r.name, r.path) for r in port.requests]


async def test_each_verb_is_one_request_with_the_namespace_resolved() -> None:
    port = Recorder()
    pod = {"metadata": {"name": "p", "namespace": "ns"}}
    await port.get(POD, "p")
    await port.create(POD, pod)
    await port.replace(POD, pod)
    await port.patch(NODE, "n1", {"metadata": {"labels": {"a": "b"}}})
    await port.apply(POD, pod, field_manager="me")
    await port.update_status(POD, pod)
    await port.patch_status(POD, "p", [{"op": "add", "path": "/status/x", "value": 1}], patch_type=PatchType.JSON)
    await port.delete(POD, "p", namespace="ns")
    await port.bind("p", "n1", namespace="ns", pod_uid="u1")
    await port.create_event({"metadata": {"generateName": "e-"}})
    assert seen(port) == [
        ("get", "pods", "default", "p", "/api/v1/namespaces/default/pods/p"),
        ("create", "pods", "ns", None, "/api/v1/namespaces/ns/pods"),
        ("update", "pods", "ns", "p", "/api/v1/namespaces/ns/pods/p"),
        ("patch", "nodes", None, "n1", "/api/v1/nodes/n1"),
        ("patch", "pods", "ns", "p", "/api/v1/namespaces/ns/pods/p"),
        ("update", "pods/status", "ns", "p", "/api/v1/namespaces/ns/pods/p/status"),
        ("patch", "pods/status", "default", "p", "/api/v1/namespaces/default/pods/p/status"),
        ("delete", "pods", "ns", "p", "/api/v1/namespaces/ns/pods/p"),
        ("create", "pods/binding", "ns", "p", "/api/v1/namespaces/ns/pods/p/binding"),
        ("create", "events", "default", None, "/api/v1/namespaces/default/events"),
    ]
    apply, binding = port.requests[4], port.requests[8]
    assert apply.patch_type is PatchType.APPLY and apply.field_manager == "me"
    assert binding.body["target"] == {"apiVersion": "v1", "kind": "Node", "name": "n1"}
    assert binding.body["metadata"] == {"name": "p", "namespace": "ns", "uid": "u1"}


async def test_list_watch_and_paging() -> None:
    port = Recorder()
    assert [e async for e in port.watch(POD, label_selector="a=b", resource_version="5")] == []
    listed = await port.list(POD, field_selector="spec.nodeName=n1")
    names = [o["metadata"]["name"] async for o in port.iter_list(NODE, page_size=2)]
    assert names == ["page-None", "page-1", "page-2"]
    watch, listing, *pages = port.requests
    assert (watch.verb, watch.namespace, watch.label_selector, watch.resource_version) == (Verb.WATCH, None, "a=b", "5")
    assert watch.allow_bookmarks and listing.limit is None and listed.resource_version == "7"
    assert [(p.limit, p.continue_token) for p in pages] == [(2, None), (2, "1"), (2, "2")]


async def test_programming_errors_raise_before_any_request() -> None:
    port = Recorder()
    with pytest.raises(ValueError, match="cluster-scoped"):
        await port.get(NODE, "n1", namespace="ns")
    with pytest.raises(ValueError, match="cluster-scoped"):
        await port.list(NODE, namespace="ns")
    with pytest.raises(ValueError, match="differs"):
        await port.create(POD, {"metadata": {"name": "p", "namespace": "a"}}, namespace="b")
    with pytest.raises(ValueError, match=r"apply needs metadata\.name"):
        await port.apply(POD, {"metadata": {}}, field_manager="me")
    with pytest.raises(ValueError, match="page_size"):
        await anext(port.iter_list(POD, page_size=0))
    assert port.requests == []
