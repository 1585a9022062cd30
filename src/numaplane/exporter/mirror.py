"""A list + watch mirror of a few objects, with a *liveness* flag the publisher can trust.

The exporter mirrors two small sets: its own NodeResourceTopology object (to notice deletion or
foreign edits at once, and to skip API reads when nothing changed) and the pods bound to its node
(to exclude terminal pods and rescan when one terminates).

Loop: list (replace the cache, diffing to emit events), then watch from the list's version; on
:class:`~numaplane.kube.errors.Gone` relist at once; on any other
:class:`~numaplane.kube.errors.KubeError` report it, wait (exponential back-off from
``backoff_initial_seconds`` to ``backoff_max_seconds``) and relist. A relist replaces the cache
with what the server has now, so a restarted API server that lost its state is handled like any
other.

Invariant: :attr:`Mirror.live` is true only while a watch opened right after a successful list is
running, i.e. while the cache is at most one in-flight event behind the server. Consumers that
need certainty read from the server when it is false.

Handlers run synchronously in event order and must not block; an exception in one is logged and
does not stop the mirror. (The shared ``kube.informer`` offers more; this mirror exists because the
publisher needs the liveness flag, which an informer's "has synced" does not give.)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import structlog

from numaplane.kube.errors import Gone, KubeError
from numaplane.kube.port import EventType, JsonObj, KubePort, WatchEvent, object_key
from numaplane.kube.resources import Resource

__all__ = ["Handler", "Mirror"]

#: ``handler(event type, old object or None, new object or None)``; DELETED has ``new=None``.
Handler = Callable[[EventType, JsonObj | None, JsonObj | None], None]


class Mirror:
    """Local copy of the objects of ``res`` matching ``field_selector`` (see the module docstring)."""

    def __init__(
        self,
        kube: KubePort,
        res: Resource,
        *,
        field_selector: str | None = None,
        handler: Handler | None = None,
        on_error: Callable[[KubeError], None] | None = None,
        backoff_initial_seconds: float = 0.2,
        backoff_max_seconds: float = 5.0,
    ) -> None:
        self.kube = kube
        self.res = res
        self.field_selector = field_selector
        self.objects: dict[str, JsonObj] = {}
        self.live = False
        self.synced = asyncio.Event()
        self.relists = 0
        self._handler = handler
        self._on_error = on_error
        self._initial = backoff_initial_seconds
        self._max = backoff_max_seconds
        self._log = structlog.get_logger("numaplane.exporter").bind(resource=str(res), selector=field_selector)

    def get(self, key: str) -> JsonObj | None:
        return self.objects.get(key)

    async def run(self) -> None:
        """Mirror until cancelled."""
        delay = self._initial
        while True:
            try:
                listed = await self.kube.list(self.res, field_selector=self.field_selector)
                self._replace(listed.items)
                self.relists += 1
                self.live = True
                self.synced.set()
                version = listed.resource_version
                while True:
                    stream = self.kube.watch(
                        self.res, field_selector=self.field_selector, resource_version=version, allow_bookmarks=True
                    )
                    async with contextlib.aclosing(stream):  # type: ignore[type-var]
                        async for event in stream:
                            version = event.resource_version or version
                            if event.type is not EventType.BOOKMARK:
                                self._apply(event)
                            delay = self._initial
            except Gone:
                self.live = False
                continue
            except KubeError as error:
                self.live = False
                if self._on_error is not None:
                    self._on_error(error)
                self._log.warning("mirror_broken", error=str(error), retry_in_seconds=delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._max)
            except asyncio.CancelledError:
                self.live = False
                raise

    def _apply(self, event: WatchEvent) -> None:
        key = object_key(event.object)
        old = self.objects.get(key)
        if event.type is EventType.DELETED:
            self.objects.pop(key, None)
            self._call(EventType.DELETED, old, None)
        else:
            self.objects[key] = event.object
            self._call(EventType.MODIFIED if old is not None else EventType.ADDED, old, event.object)

    def _replace(self, items: list[JsonObj]) -> None:
        fresh = {object_key(obj): obj for obj in items}
        old_objects, self.objects = self.objects, fresh
        for key, gone in old_objects.items():
            if key not in fresh:
                self._call(EventType.DELETED, gone, None)
        for key, obj in fresh.items():
            previous = old_objects.get(key)
            if previous is None:
                self._call(EventType.ADDED, None, obj)
            elif _version(previous) != _version(obj):
                self._call(EventType.MODIFIED, previous, obj)

    def _call(self, kind: EventType, old: JsonObj | None, new: JsonObj | None) -> None:
        if self._handler is None:
            return
        try:
            self._handler(kind, old, new)
        except Exception:
            self._log.exception("mirror_handler_failed", event=kind.value)


def _version(obj: JsonObj) -> Any:
    return (obj.get("metadata") or {}).get("resourceVersion")
