"""Port contract, watches: ordering, versions, selectors, bookmarks and 410 Gone, on both ports."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from kube_helpers import Harness, pod, take, wait_for_watchers

from numaplane.kube.errors import Gone
from numaplane.kube.memory import InMemoryKube
from numaplane.kube.port import CONFIG_MAP, POD, EventType, KubePort
from numaplane.testing.fakeapi import FakeApiServer


async def test_watch_from_list_version_sees_changes_in_order(harness: Harness) -> None:
    kube = harness.kube
    await kube.create(CONFIG_MAP, {"metadata": {"name": "before"}})
    listing = await kube.list(CONFIG_MAP)
    a = await kube.create(CONFIG_MAP, {"metadata": {"name": "a"}, "data": {"v": "1"}})
    b = await kube.patch(CONFIG_MAP, "a", {"data": {"v": "2"}})
    await kube.delete(CONFIG_MAP, "a")

    events = await take(kube.watch(CONFIG_MAP, resource_version=listing.resource_version), 3)
    assert [e.type for e in events] == [EventType.ADDED, EventType.MODIFIED, EventType.DELETED]
    assert all(e.object["metadata"]["name"] == "a" for e in events)
    versions = [int(e.resource_version) for e in events]
    assert versions == sorted(versions) and len(set(versions)) == 3
    assert events[0].resource_version == a["metadata"]["resourceVersion"]
    assert events[1].object["data"] == {"v": "2"}
    assert events[1].resource_version == b["metadata"]["resourceVersion"]
    assert events[0].object["kind"] == "ConfigMap"


async def test_watch_without_version_starts_with_synthetic_adds(harness: Harness) -> None:
    kube = harness.kube
    await kube.create(CONFIG_MAP, {"metadata": {"name": "x"}})
    await kube.create(CONFIG_MAP, {"metadata": {"name": "y"}})
    events = await take(kube.watch(CONFIG_MAP, namespace="default"), 2)
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [
        (EventType.ADDED, "x"),
        (EventType.ADDED, "y"),
    ]


async def test_live_watch_and_selector_edges(harness: Harness) -> None:
    kube = harness.kube
    start = (await kube.list(POD)).resource_version
    stream = kube.watch(POD, label_selector="app=web", resource_version=start)
    collected = asyncio.create_task(take(stream, 4))
    await wait_for_watchers(harness.store)
    await kube.create(POD, pod("p", labels={"app": "web"}))  # ADDED
    await kube.create(POD, pod("other", labels={"app": "db"}))  # not seen
    await kube.patch(POD, "p", {"metadata": {"labels": {"app": "db"}}})  # leaves the selection: DELETED
    await kube.patch(POD, "p", {"metadata": {"labels": {"app": "web"}}})  # enters again: ADDED
    await kube.patch(POD, "p", {"metadata": {"annotations": {"x": "1"}}})  # MODIFIED
    events = await collected
    assert [e.type for e in events] == [EventType.ADDED, EventType.DELETED, EventType.ADDED, EventType.MODIFIED]
    assert {e.object["metadata"]["name"] for e in events} == {"p"}


async def test_watch_field_selector_by_node(harness: Harness) -> None:
    kube = harness.kube
    start = (await kube.list(POD)).resource_version
    await kube.create(POD, pod("a"))
    await kube.create(POD, pod("b"))
    await kube.bind("b", "n1")
    events = await take(kube.watch(POD, field_selector="spec.nodeName=n1", resource_version=start), 1)
    assert events[0].type is EventType.ADDED
    assert events[0].object["metadata"]["name"] == "b"
    assert events[0].object["spec"]["nodeName"] == "n1"


async def test_bookmarks(harness: Harness) -> None:
    kube = harness.kube
    start = (await kube.list(CONFIG_MAP)).resource_version
    collected = asyncio.create_task(take(kube.watch(CONFIG_MAP, resource_version=start, allow_bookmarks=True), 2))
    await wait_for_watchers(harness.store)
    created = await kube.create(CONFIG_MAP, {"metadata": {"name": "a"}})
    harness.store.send_bookmarks()
    events = await collected
    assert [e.type for e in events] == [EventType.ADDED, EventType.BOOKMARK]
    assert events[1].resource_version == created["metadata"]["resourceVersion"]
    assert events[1].object["kind"] == "ConfigMap"


async def test_no_bookmarks_unless_asked(harness: Harness) -> None:
    kube = harness.kube
    start = (await kube.list(CONFIG_MAP)).resource_version
    collected = asyncio.create_task(take(kube.watch(CONFIG_MAP, resource_version=start, allow_bookmarks=False), 1))
    await wait_for_watchers(harness.store)
    harness.store.send_bookmarks()
    await kube.create(CONFIG_MAP, {"metadata": {"name": "a"}})
    events = await collected
    assert [e.type for e in events] == [EventType.ADDED]


async def test_expired_version_is_gone(harness: Harness) -> None:
    kube = harness.kube
    old = (await kube.list(CONFIG_MAP)).resource_version
    await kube.create(CONFIG_MAP, {"metadata": {"name": "a"}})
    harness.store.compact()
    with pytest.raises(Gone) as info:
        await take(kube.watch(CONFIG_MAP, resource_version=old), 1)
    assert info.value.code == 410
    # Relisting gives a version one can watch from again.
    fresh = await kube.list(CONFIG_MAP)
    watch = asyncio.create_task(take(kube.watch(CONFIG_MAP, resource_version=fresh.resource_version), 1))
    await wait_for_watchers(harness.store)
    await kube.create(CONFIG_MAP, {"metadata": {"name": "b"}})
    assert (await watch)[0].object["metadata"]["name"] == "b"


@pytest.mark.parametrize("kind", ["memory", "fakeapi"])
async def test_history_window_is_bounded(kind: str) -> None:
    async with contextlib.AsyncExitStack() as stack:
        if kind == "memory":
            kube: KubePort = InMemoryKube(history_limit=3)
        else:
            server = await stack.enter_async_context(FakeApiServer(history_limit=3))
            kube = server.port_client()
        old = (await kube.list(CONFIG_MAP)).resource_version
        recent = old
        for i in range(4):
            created = await kube.create(CONFIG_MAP, {"metadata": {"name": f"c{i}"}})
            if i == 0:
                recent = created["metadata"]["resourceVersion"]
        with pytest.raises(Gone):
            await take(kube.watch(CONFIG_MAP, resource_version=old), 1)
        # The last three changes are still in the window.
        events = await take(kube.watch(CONFIG_MAP, resource_version=recent), 3)
        assert [e.object["metadata"]["name"] for e in events] == ["c1", "c2", "c3"]
        await kube.close()


async def test_open_watch_ended_with_gone(harness: Harness) -> None:
    kube = harness.kube
    start = (await kube.list(CONFIG_MAP)).resource_version
    stream = kube.watch(CONFIG_MAP, resource_version=start)
    collected = asyncio.create_task(take(stream, 5))
    await wait_for_watchers(harness.store)
    harness.store.close_watches(Gone("expired"))
    with pytest.raises(Gone):
        await collected
    with contextlib.suppress(Exception):
        await stream.aclose()  # type: ignore[attr-defined]
