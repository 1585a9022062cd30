"""An informer: a local cache of one resource kept current by list + watch, with event handlers.

The loop (client-go's reflector, simplified):

1. **list** the resource (with the informer's namespace and selectors; in pages of ``page_size``
   objects, ``None``: one unpaged list, as client-go's pager does), replace the cache with the
   result (diffing against the old cache: adds, updates, deletes for objects that vanished), mark
   the informer synced, and remember the list's ``resourceVersion``;
2. **watch** from that version with bookmarks; apply every event to the cache and handlers, and
   advance the version on every event and bookmark;
3. when the stream ends, watch again from the last version; on :class:`~numaplane.kube.errors.Gone`
   (410: version expired, or the server lost its state) go back to 1 at once; on any other
   :class:`~numaplane.kube.errors.KubeError` wait with exponential backoff (``backoff_initial_seconds``
   doubling up to ``backoff_max_seconds``, reset by the next successful event) and resume from the last
   version (so a restarted server that kept its state is resumed without a relist).

The cache (:class:`Indexer`) is keyed ``<namespace>/<name>`` (``<name>`` for cluster-scoped
objects) and can carry secondary indexes (``index name → function(obj) → values``), e.g. pods by
``spec.nodeName``. Cached objects are shared: treat them as read-only.

A ``transform`` (client-go's ``SetTransform``) is applied to every listed or watched object before
it is cached and handed to the handlers, so the cache holds only what its consumers read (e.g. a
pod without ``managedFields``). It must keep ``metadata.name``, ``metadata.namespace`` and
``metadata.resourceVersion`` (the cache key and the relist diff), and whatever the index functions
read; it may return its argument changed in place (objects come fresh from the port). An exception
in it is logged and the object is cached untransformed.

Handlers are plain callables, called synchronously in event order (enqueue keys into a
:class:`~numaplane.kube.workqueue.WorkQueue` there; do not block). An exception in a handler is
logged and does not stop the informer. A handler added after the first sync receives ``on_add`` for
every cached object first, as in client-go.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from numaplane.kube.clock import Clock, SystemClock
from numaplane.kube.errors import Gone, KubeError
from numaplane.kube.port import EventType, JsonObj, KubePort, ObjectList, Request, Verb, WatchEvent, object_key
from numaplane.kube.resources import Resource

__all__ = ["EventHandlers", "IndexFunc", "Indexer", "Informer", "index_by_field"]

log = logging.getLogger(__name__)

IndexFunc = Callable[[JsonObj], Iterable[str]]


def index_by_field(*path: str) -> IndexFunc:
    """An index function on a dotted field (``index_by_field("spec", "nodeName")``); absent → no value."""

    def index(obj: JsonObj) -> list[str]:
        cur: Any = obj
        for part in path:
            if not isinstance(cur, Mapping) or part not in cur:
                return []
            cur = cur[part]
        return [str(cur)] if cur not in (None, "") else []

    return index


class Indexer:
    """A keyed object cache with secondary indexes."""

    def __init__(self, indexers: Mapping[str, IndexFunc] | None = None) -> None:
        self._items: dict[str, JsonObj] = {}
        self._indexers: dict[str, IndexFunc] = dict(indexers or {})
        self._indices: dict[str, dict[str, set[str]]] = {name: {} for name in self._indexers}

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def add_indexer(self, name: str, func: IndexFunc) -> None:
        """Add an index (built at once from the current content)."""
        self._indexers[name] = func
        self._indices[name] = {}
        for key, obj in self._items.items():
            self._index(name, key, obj)

    def get(self, key: str) -> JsonObj | None:
        return self._items.get(key)

    def get_by_name(self, name: str, namespace: str | None = None) -> JsonObj | None:
        return self._items.get(f"{namespace}/{name}" if namespace else name)

    def list_keys(self) -> list[str]:
        return sorted(self._items)

    def list_objects(self) -> list[JsonObj]:
        return [self._items[k] for k in sorted(self._items)]

    def by_index(self, index: str, value: str) -> list[JsonObj]:
        """Objects whose ``index`` function yields ``value`` (``KeyError`` for an unknown index)."""
        keys = self._indices[index].get(value, set())
        return [self._items[k] for k in sorted(keys)]

    def index_values(self, index: str) -> list[str]:
        return sorted(v for v, keys in self._indices[index].items() if keys)

    def _index(self, name: str, key: str, obj: JsonObj) -> None:
        for value in self._indexers[name](obj):
            self._indices[name].setdefault(value, set()).add(key)

    def _unindex(self, key: str, obj: JsonObj) -> None:
        for name, func in self._indexers.items():
            for value in func(obj):
                keys = self._indices[name].get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self._indices[name][value]

    def upsert(self, obj: JsonObj) -> JsonObj | None:
        """Store ``obj``; returns the previous object under its key, if any."""
        key = object_key(obj)
        old = self._items.get(key)
        if old is not None:
            self._unindex(key, old)
        self._items[key] = obj
        for name in self._indexers:
            self._index(name, key, obj)
        return old

    def remove(self, key: str) -> JsonObj | None:
        old = self._items.pop(key, None)
        if old is not None:
            self._unindex(key, old)
        return old


@dataclass(frozen=True, slots=True)
class EventHandlers:
    """Optional callbacks; ``on_delete`` receives the last known state of the object."""

    on_add: Callable[[JsonObj], None] | None = None
    on_update: Callable[[JsonObj, JsonObj], None] | None = None
    on_delete: Callable[[JsonObj], None] | None = None


def _rv(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


class Informer:
    """Keeps :attr:`store` in sync with one resource and calls handlers (see the module docstring).

    Run it with ``task = informer.start()`` (or ``await informer.run()`` in a task group), wait with
    ``await informer.wait_for_sync()``, stop with ``await informer.stop()``.
    """

    def __init__(
        self,
        kube: KubePort,
        res: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
        clock: Clock | None = None,
        backoff_initial_seconds: float = 0.2,
        backoff_max_seconds: float = 30.0,
        resync_period_seconds: float | None = None,
        name: str | None = None,
        transform: Callable[[JsonObj], JsonObj] | None = None,
        page_size: int | None = 500,
    ) -> None:
        self.kube = kube
        self.transform = transform
        self.page_size = page_size
        self.res = res
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.clock: Clock = clock or SystemClock()
        self.backoff_initial_seconds = backoff_initial_seconds
        self.backoff_max_seconds = backoff_max_seconds
        self.resync_period_seconds = resync_period_seconds
        self.name = name or res.plural
        self.store = Indexer(indexers)
        self.resource_version: str | None = None
        self.lists = 0
        self.watches = 0
        self.errors = 0
        self.last_error: KubeError | None = None
        self._handlers: list[EventHandlers] = []
        self._synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._failures = 0

    # ------------------------------------------------------------------ public

    @property
    def has_synced(self) -> bool:
        """True once the first list has been applied to the cache."""
        return self._synced.is_set()

    async def wait_for_sync(self) -> None:
        await self._synced.wait()

    def add_handler(self, handlers: EventHandlers) -> None:
        """Register callbacks; after the first sync they first see ``on_add`` for every cached object."""
        self._handlers.append(handlers)
        if self.has_synced and handlers.on_add is not None:
            for obj in self.store.list_objects():
                self._call(handlers.on_add, obj)

    def start(self) -> asyncio.Task[None]:
        """Run the informer in a background task (idempotent)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self.run(), name=f"informer-{self.name}")
        return self._task

    async def stop(self) -> None:
        """Cancel the background task started by :meth:`start` and wait for it."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def run(self) -> None:
        """List, then watch forever (see the module docstring). Returns only by cancellation.

        With ``resync_period_seconds`` the resync loop runs beside it in a task group: cancelling
        ``run`` cancels and awaits it too, so no task outlives the informer.
        """
        self._failures = 0
        if not self.resync_period_seconds:
            await self._list_and_watch()
            return
        async with asyncio.TaskGroup() as group:
            group.create_task(self._resync_loop(), name=f"informer-{self.name}-resync")
            await self._list_and_watch()

    async def _list_and_watch(self) -> None:
        while True:
            try:
                if self.resource_version is None:
                    await self._list()
                if not await self._watch():
                    # The stream ended at once without a single event: do not spin.
                    await self.clock.sleep(self.backoff_initial_seconds)
            except Gone as exc:
                log.info("informer %s: %s; relisting", self.name, exc)
                self.errors += 1
                self.last_error = exc
                self.resource_version = None
            except KubeError as exc:
                self.errors += 1
                self.last_error = exc
                self._failures += 1
                delay = min(self.backoff_max_seconds, self.backoff_initial_seconds * 2 ** (self._failures - 1))
                log.warning("informer %s: %s; retrying in %.2f s", self.name, exc, delay)
                await self.clock.sleep(delay)

    # ------------------------------------------------------------------ internals

    async def _list(self) -> None:
        """List in pages of ``page_size`` (the pages of one consistent snapshot), transforming each
        page as it arrives, so at most one page of raw objects is held; then replace the cache."""
        items: list[JsonObj] = []
        version: str | None = None
        token: str | None = None
        while True:
            request = Request(
                Verb.LIST,
                self.res,
                self.namespace,
                label_selector=self.label_selector,
                field_selector=self.field_selector,
                limit=self.page_size,
                continue_token=token,
            )
            page = await self.kube.send(request)
            if not isinstance(page, ObjectList):
                raise TypeError("expected a list, got an object")
            if version is None:
                version = page.resource_version  # the snapshot's version: watch from here
            items.extend(self._transformed(obj) for obj in page.items)
            token = page.continue_token
            if not token:
                break
        self.lists += 1
        self._replace(items)
        self.resource_version = version
        self._synced.set()

    async def _watch(self) -> bool:
        """Watch until the stream ends; True if at least one event arrived."""
        self.watches += 1
        received = False
        stream = self.kube.watch(
            self.res,
            namespace=self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            resource_version=self.resource_version,
            allow_bookmarks=True,
        )
        try:
            async for event in stream:
                received = True
                self._failures = 0
                self._apply(event)
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()
        return received

    def _apply(self, event: WatchEvent) -> None:
        version = event.resource_version
        if event.type is EventType.BOOKMARK:
            if version:
                self.resource_version = version
            return
        obj = self._transformed(event.object)
        if event.type is EventType.DELETED:
            self.store.remove(object_key(obj))
            self._dispatch_delete(obj)
        else:
            old = self.store.upsert(obj)
            if old is None:
                self._dispatch_add(obj)
            else:
                self._dispatch_update(old, obj)
        if version:
            self.resource_version = version

    def _replace(self, items: list[JsonObj]) -> None:
        seen: set[str] = set()
        for obj in items:
            key = object_key(obj)
            seen.add(key)
            old = self.store.upsert(obj)
            if old is None:
                self._dispatch_add(obj)
            elif _rv(old) != _rv(obj):
                self._dispatch_update(old, obj)
        for key in [k for k in self.store.list_keys() if k not in seen]:
            gone = self.store.remove(key)
            if gone is not None:
                self._dispatch_delete(gone)

    def _transformed(self, obj: JsonObj) -> JsonObj:
        if self.transform is None:
            return obj
        try:
            return self.transform(obj)
        except Exception:
            log.exception("informer %s: transform failed; caching the object as received", self.name)
            return obj

    async def _resync_loop(self) -> None:
        assert self.resync_period_seconds
        while True:
            await self.clock.sleep(self.resync_period_seconds)
            if self.has_synced:
                for obj in self.store.list_objects():
                    self._dispatch_update(obj, obj)

    def _call(self, func: Callable[..., None], *args: JsonObj) -> None:
        try:
            func(*args)
        except Exception:
            log.exception("informer %s: event handler failed", self.name)

    def _dispatch_add(self, obj: JsonObj) -> None:
        for h in self._handlers:
            if h.on_add is not None:
                self._call(h.on_add, obj)

    def _dispatch_update(self, old: JsonObj, new: JsonObj) -> None:
        for h in self._handlers:
            if h.on_update is not None:
                self._call(h.on_update, old, new)

    def _dispatch_delete(self, obj: JsonObj) -> None:
        for h in self._handlers:
            if h.on_delete is not None:
                self._call(h.on_delete, obj)
