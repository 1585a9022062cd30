"""Fault injection for any port: :class:`FaultyKube` wraps a :class:`KubePort` (e.g. the in-memory one).

The faults are the fake server's (:class:`~numaplane.testing.fakeapi.faults.FaultInjector`), matched
on the same verb / resource / URL-path terms, so a test can inject "the next bind answers 409" the
same way whether it runs on :class:`~numaplane.kube.memory.InMemoryKube` or on the fake API server.
A matching fault raises the typed error (:func:`numaplane.kube.errors.from_status`) without calling
the wrapped port. Every typed verb reaches :meth:`FaultyKube.send` or :meth:`FaultyKube.stream` as
one :class:`~numaplane.kube.port.Request`, so one check covers them all.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

from numaplane.kube.errors import from_status, status_reason
from numaplane.kube.port import HTTP_METHODS, KubePort, Request, Response, WatchEvent
from numaplane.testing.fakeapi.faults import FaultInjector

__all__ = ["FaultyKube"]


class FaultyKube(KubePort):
    """A :class:`KubePort` that fails requests on demand (``faulty.faults.add(409, verb="update")``)."""

    def __init__(self, inner: KubePort) -> None:
        self.inner = inner
        self.faults = FaultInjector()

    def _check(self, request: Request) -> None:
        fault = self.faults.take(
            verb=request.verb.value,
            resource=request.resource_name,
            method=HTTP_METHODS[request.verb],
            path=request.path,
        )
        if fault is not None:
            raise from_status(fault.status, fault.message, fault.reason or status_reason(fault.status))

    async def send(self, request: Request) -> Response:
        self._check(request)
        return await self.inner.send(request)

    async def stream(self, request: Request) -> AsyncGenerator[WatchEvent, None]:
        self._check(request)
        events = self.inner.stream(request)
        try:
            async for event in events:
                yield event
        finally:
            await events.aclose()

    async def close(self) -> None:
        await self.inner.close()
