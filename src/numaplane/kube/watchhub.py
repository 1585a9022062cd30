"""Watch fan-out and bounded history for the in-memory store.

Every committed change goes to :meth:`WatchHub.publish`, which appends it to a bounded history
(``history_limit`` changes) and hands each open watcher the event *it* sees: selectors decide
whether a modification is an ``ADDED`` (the object starts matching), ``MODIFIED`` or ``DELETED``
(it stops matching). A watch from an old version replays the history after that version, or
fails with :class:`~numaplane.kube.errors.Gone` if the history no longer reaches back that far.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from numaplane.kube.errors import Gone, Invalid, KubeError
from numaplane.kube.patch import clone
from numaplane.kube.port import EventType, JsonObj, WatchEvent
from numaplane.kube.resources import Resource
from numaplane.kube.selectors import FieldSelector, LabelSelector

__all__ = ["Change", "WatchHub", "Watcher", "present"]


def present(res: Resource, obj: Mapping[str, Any]) -> JsonObj:
    """A copy of a stored object as the API serves it (``apiVersion`` and ``kind`` of ``res`` first)."""
    out: JsonObj = {"apiVersion": res.api_version, "kind": res.kind}
    for key, value in obj.items():
        if key not in ("apiVersion", "kind"):
            out[key] = clone(value)
    return out


@dataclass(frozen=True, slots=True)
class Change:
    """One committed write: ``new`` is the object after it (the last state, for ``DELETED``)."""

    rv: int
    kind: EventType
    store: tuple[str, str]  # (group, plural)
    old: JsonObj | None
    new: JsonObj


@dataclass(frozen=True, slots=True)
class _End:
    error: KubeError | None


@dataclass(slots=True, eq=False)
class Watcher:
    """One open watch: what it selects and its queue of pending events."""

    res: Resource
    namespace: str | None
    labels: LabelSelector
    fields: FieldSelector
    bookmarks: bool
    queue: asyncio.Queue[WatchEvent | _End] = field(default_factory=asyncio.Queue)

    def matches(self, obj: Mapping[str, Any]) -> bool:
        if self.namespace is not None and (obj.get("metadata") or {}).get("namespace") != self.namespace:
            return False
        return self.labels.matches(obj) and self.fields.matches(obj)

    def translate(self, change: Change) -> WatchEvent | None:
        """The event this watcher sees for ``change`` (selectors decide ADDED / DELETED edges)."""
        if change.store != (self.res.group, self.res.plural):
            return None
        now = self.matches(change.new)
        if change.kind is EventType.MODIFIED:
            before = change.old is not None and self.matches(change.old)
            if before and now:
                kind = EventType.MODIFIED
            elif now:
                kind = EventType.ADDED
            elif before:
                kind = EventType.DELETED
            else:
                return None
        elif now:
            kind = change.kind
        else:
            return None
        return WatchEvent(kind, present(self.res, change.new))


class WatchHub:
    """Open watchers plus the bounded change history (see the module docstring)."""

    def __init__(self, history_limit: int = 1000, bookmark_interval_seconds: float | None = None) -> None:
        self.history: deque[Change] = deque(maxlen=max(1, history_limit))
        self.watchers: set[Watcher] = set()
        self.bookmark_interval_seconds = bookmark_interval_seconds

    def oldest_watchable(self, current_rv: int) -> int:
        """Watching from a version below this answers 410 Gone."""
        return self.history[0].rv - 1 if self.history else current_rv

    def publish(self, change: Change) -> None:
        self.history.append(change)
        for watcher in self.watchers:
            event = watcher.translate(change)
            if event is not None:
                watcher.queue.put_nowait(event)

    def subscribe(
        self,
        res: Resource,
        *,
        namespace: str | None,
        label_selector: str | None,
        field_selector: str | None,
        resource_version: str | None,
        allow_bookmarks: bool,
        current_rv: int,
        objects: Iterable[JsonObj],
    ) -> Watcher:
        """Register a watcher, pre-filled with the synthetic adds or the replayed history it is owed."""
        watcher = Watcher(
            res, namespace, LabelSelector.parse(label_selector), FieldSelector.parse(field_selector), allow_bookmarks
        )
        if resource_version in (None, "", "0"):
            for obj in sorted(objects, key=lambda o: int(o["metadata"]["resourceVersion"])):
                if watcher.matches(obj):
                    watcher.queue.put_nowait(WatchEvent(EventType.ADDED, present(res, obj)))
        else:
            try:
                since = int(str(resource_version))
            except ValueError as exc:
                raise Invalid(f"invalid resourceVersion {resource_version!r}") from exc
            oldest = self.oldest_watchable(current_rv)
            if since < oldest:
                raise Gone(f"too old resource version: {since} ({oldest})")
            if since > current_rv:
                raise Gone(f"resource version {since} is newer than the store ({current_rv}); state was lost")
            for change in self.history:
                if change.rv > since:
                    event = watcher.translate(change)
                    if event is not None:
                        watcher.queue.put_nowait(event)
        self.watchers.add(watcher)
        return watcher

    async def stream(self, watcher: Watcher, current_rv: Callable[[], int]) -> AsyncGenerator[WatchEvent, None]:
        """Yield the watcher's events until it is closed; unregisters it when the consumer stops."""
        try:
            while True:
                if self.bookmark_interval_seconds and watcher.bookmarks:
                    try:
                        item = await asyncio.wait_for(watcher.queue.get(), self.bookmark_interval_seconds)
                    except TimeoutError:
                        item = bookmark(watcher.res, current_rv())
                else:
                    item = await watcher.queue.get()
                if isinstance(item, _End):
                    if item.error is not None:
                        raise item.error
                    return
                yield item
        finally:
            self.watchers.discard(watcher)

    def send_bookmarks(self, current_rv: int) -> None:
        for watcher in self.watchers:
            if watcher.bookmarks:
                watcher.queue.put_nowait(bookmark(watcher.res, current_rv))

    def close(self, error: KubeError | None = None) -> None:
        for watcher in list(self.watchers):
            watcher.queue.put_nowait(_End(error))

    def compact(self) -> None:
        self.history.clear()


def bookmark(res: Resource, rv: int) -> WatchEvent:
    """A ``BOOKMARK`` event at ``rv``."""
    return WatchEvent(
        EventType.BOOKMARK,
        {"apiVersion": res.api_version, "kind": res.kind, "metadata": {"resourceVersion": str(rv)}},
    )
