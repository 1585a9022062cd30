"""Informer: initial sync, live events, indexes, bookmarks, relist on 410 and after server restarts."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from kube_helpers import Harness, eventually, pod

from numaplane.kube.errors import Gone
from numaplane.kube.informer import EventHandlers, Informer, index_by_field
from numaplane.kube.port import POD, JsonObj
from numaplane.testing.fakeapi import FakeApiServer


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def handlers(self) -> EventHandlers:
        return EventHandlers(
            on_add=lambda o: self.events.append(("add", o["metadata"]["name"])),
            on_update=lambda old, new: self.events.append(("update", new["metadata"]["name"])),
            on_delete=lambda o: self.events.append(("delete", o["metadata"]["name"])),
        )


def names(informer: Informer) -> list[str]:
    return [o["metadata"]["name"] for o in informer.store.list_objects()]


@pytest_asyncio.fixture
async def informer(harness: Harness) -> AsyncIterator[Informer]:
    inf = Informer(
        harness.kube,
        POD,
        indexers={"node": index_by_field("spec", "nodeName")},
        backoff_initial_seconds=0.02,
        backoff_max_seconds=0.2,
    )
    yield inf
    await inf.stop()


async def test_sync_events_and_indexes(harness: Harness, informer: Informer) -> None:
    kube = harness.kube
    await kube.create(POD, pod("a", node="n1"))
    await kube.create(POD, pod("b"))
    recorder = Recorder()
    informer.add_handler(recorder.handlers())
    informer.start()
    await informer.wait_for_sync()
    assert informer.has_synced
    assert names(informer) == ["a", "b"]
    assert sorted(recorder.events) == [("add", "a"), ("add", "b")]
    assert [o["metadata"]["name"] for o in informer.store.by_index("node", "n1")] == ["a"]

    await kube.bind("b", "n2")
    await kube.create(POD, pod("c", node="n1"))
    await kube.delete(POD, "a")
    await eventually(lambda: names(informer) == ["b", "c"] and informer.store.index_values("node") == ["n1", "n2"])
    assert [o["metadata"]["name"] for o in informer.store.by_index("node", "n1")] == ["c"]
    assert recorder.events[2:] == [("update", "b"), ("add", "c"), ("delete", "a")]
    assert informer.store.get_by_name("b", "default") is not None
    assert informer.lists == 1

    late = Recorder()
    informer.add_handler(late.handlers())  # replays the cache
    assert sorted(late.events) == [("add", "b"), ("add", "c")]


async def test_bookmarks_advance_the_version(harness: Harness, informer: Informer) -> None:
    informer.start()
    await informer.wait_for_sync()
    await harness.kube.create(POD, pod("a"))
    await eventually(lambda: "a" in names(informer))
    await harness.kube.create(POD, pod("x", "kube-system"))
    other = Informer(harness.kube, POD, namespace="default")
    other.start()
    await other.wait_for_sync()
    await eventually(lambda: harness.store.watcher_count() >= 2)
    before = other.resource_version
    await harness.kube.create(POD, pod("y", "kube-system"))  # invisible to `other`
    harness.store.send_bookmarks()
    await eventually(lambda: other.resource_version == harness.store.resource_version)
    assert other.resource_version != before
    await other.stop()


async def test_relist_on_410_reconciles_missed_changes(harness: Harness, informer: Informer) -> None:
    kube = harness.kube
    await kube.create(POD, pod("stays"))
    await kube.create(POD, pod("goes"))
    recorder = Recorder()
    informer.add_handler(recorder.handlers())
    informer.start()
    await informer.wait_for_sync()
    await eventually(lambda: harness.store.watcher_count() >= 1)

    # The watch breaks with 410 and history is gone; changes made now reach the informer only by relisting.
    harness.store.compact()
    harness.store.close_watches(Gone("too old resource version"))
    await kube.delete(POD, "goes")
    await kube.create(POD, pod("new"))
    await kube.patch(POD, "stays", {"metadata": {"labels": {"v": "2"}}})

    await eventually(lambda: names(informer) == ["new", "stays"])
    await eventually(lambda: informer.store.get_by_name("stays", "default")["metadata"].get("labels") == {"v": "2"})
    assert informer.lists >= 2
    assert ("delete", "goes") in recorder.events
    assert ("add", "new") in recorder.events
    assert ("update", "stays") in recorder.events


async def test_informer_survives_server_restart(fake_apiserver: FakeApiServer) -> None:
    port = fake_apiserver.port_client()
    await port.create(POD, pod("a"))
    informer = Informer(port, POD, backoff_initial_seconds=0.05, backoff_max_seconds=0.2)
    recorder = Recorder()
    informer.add_handler(recorder.handlers())
    informer.start()
    try:
        await informer.wait_for_sync()
        await eventually(lambda: fake_apiserver.store.watcher_count() >= 1)

        # Restart keeping state: the informer resumes its watch, no relist needed.
        await fake_apiserver.restart(keep_state=True, down_seconds=0.1)
        await port.create(POD, pod("b"))
        await eventually(lambda: names(informer) == ["a", "b"])
        assert informer.lists == 1
        assert informer.errors >= 1

        # Restart dropping state: the old version is unknown → 410 → relist → cache matches the empty server.
        await eventually(lambda: fake_apiserver.store.watcher_count() >= 1)
        await fake_apiserver.restart(keep_state=False)
        await port.create(POD, pod("c"))
        await eventually(lambda: names(informer) == ["c"])
        assert informer.lists >= 2
        assert ("delete", "a") in recorder.events and ("delete", "b") in recorder.events
    finally:
        await informer.stop()


async def test_handler_errors_do_not_stop_the_informer(harness: Harness, informer: Informer) -> None:
    seen: list[JsonObj] = []

    def boom(obj: JsonObj) -> None:
        raise RuntimeError("handler bug")

    informer.add_handler(EventHandlers(on_add=boom))
    informer.add_handler(EventHandlers(on_add=seen.append))
    informer.start()
    await informer.wait_for_sync()
    await harness.kube.create(POD, pod("a"))
    await eventually(lambda: len(seen) == 1)


@pytest.mark.parametrize("selector", ["app=web"])
async def test_label_selected_informer(harness: Harness, selector: str) -> None:
    informer = Informer(harness.kube, POD, label_selector=selector)
    informer.start()
    try:
        await informer.wait_for_sync()
        await harness.kube.create(POD, pod("web", labels={"app": "web"}))
        await harness.kube.create(POD, pod("db", labels={"app": "db"}))
        await eventually(lambda: names(informer) == ["web"])
        await harness.kube.patch(POD, "web", {"metadata": {"labels": {"app": "db"}}})
        await eventually(lambda: names(informer) == [])
    finally:
        await informer.stop()


def reduce_pod(obj: JsonObj) -> JsonObj:
    """A transform keeping what a consumer reads: the key, the version and the node."""
    meta = obj["metadata"]
    kept = {k: meta[k] for k in ("name", "namespace", "resourceVersion")}
    return {"metadata": kept, "spec": {"nodeName": (obj.get("spec") or {}).get("nodeName")}}


async def test_transform_is_what_the_cache_and_handlers_hold(harness: Harness) -> None:
    kube = harness.kube
    await kube.create(POD, pod("listed", node="n1"))
    informer = Informer(kube, POD, transform=reduce_pod, indexers={"node": index_by_field("spec", "nodeName")})
    held: list[JsonObj] = []
    informer.add_handler(EventHandlers(on_add=held.append, on_update=lambda old, new: held.append(new)))
    informer.start()
    try:
        await informer.wait_for_sync()
        await kube.create(POD, pod("watched"))
        await kube.bind("watched", "n2")
        await eventually(lambda: informer.store.index_values("node") == ["n1", "n2"])
        assert all(set(o) == {"metadata", "spec"} for o in [*informer.store.list_objects(), *held])
        assert [o["metadata"]["name"] for o in held] == ["listed", "watched", "watched"]
        # A relist diffs on resourceVersion, which the transform kept: unchanged objects fire nothing.
        harness.store.compact()
        harness.store.close_watches(Gone("too old resource version"))
        await eventually(lambda: informer.lists == 2)
        assert len(held) == 3
    finally:
        await informer.stop()


async def test_a_failing_transform_caches_the_object_as_received(harness: Harness) -> None:
    def broken(obj: JsonObj) -> JsonObj:
        raise KeyError("bug")

    await harness.kube.create(POD, pod("a"))
    informer = Informer(harness.kube, POD, transform=broken)
    informer.start()
    try:
        await informer.wait_for_sync()
        cached = informer.store.get_by_name("a", "default")
        assert cached is not None and cached["kind"] == "Pod"
    finally:
        await informer.stop()


@pytest.mark.parametrize("page_size", [1, 3, None])
async def test_paged_list_fills_the_cache_from_one_snapshot(harness: Harness, page_size: int | None) -> None:
    for i in range(7):
        await harness.kube.create(POD, pod(f"p{i}"))
    version = harness.store.resource_version
    informer = Informer(harness.kube, POD, page_size=page_size)
    informer.start()
    try:
        await informer.wait_for_sync()
        assert names(informer) == [f"p{i}" for i in range(7)]
        assert informer.lists == 1
        assert informer.resource_version == version
        await harness.kube.create(POD, pod("later"))
        await eventually(lambda: "later" in names(informer))
    finally:
        await informer.stop()
