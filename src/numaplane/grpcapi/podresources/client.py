"""Async client of the kubelet PodResources v1 API (``grpc.aio`` over a unix socket).

Mirrors what the upstream exporter does: insecure unix-socket channel, 16 MiB receive limit, a
per-call deadline (10 s by default). Responses are returned as the pure values of
:mod:`numaplane.nrt.podresources`; gRPC errors become :mod:`numaplane.grpcapi.errors` types.

Use as ``async with PodResourcesClient(path) as client: pods = await client.list()``. Bind it to one
event loop (grpc.aio objects are loop-bound).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from types import TracebackType
from typing import Final, TypeVar

import grpc
import grpc.aio

from numaplane.grpcapi.errors import (
    PodNotFound,
    PodResourcesCallFailed,
    PodResourcesError,
    PodResourcesMalformed,
    PodResourcesTimeout,
    PodResourcesUnavailable,
    PodResourcesUnsupported,
)
from numaplane.grpcapi.podresources.convert import allocatable_from_pb, list_from_pb, pod_from_pb
from numaplane.grpcapi.podresources.v1 import api_pb2 as pb
from numaplane.grpcapi.podresources.v1 import api_pb2_grpc as pb_grpc
from numaplane.nrt.podresources import AllocatableResources, PodResources

__all__ = ["DEFAULT_SOCKET", "MAX_MESSAGE_BYTES", "PodResourcesClient", "socket_target"]

DEFAULT_SOCKET: Final = "/var/lib/kubelet/pod-resources/kubelet.sock"
MAX_MESSAGE_BYTES: Final = 16 * 1024 * 1024

_T = TypeVar("_T")


def socket_target(path: str) -> str:
    """A gRPC target for a socket given as a path, ``unix:<path>`` or ``unix://<abs path>``."""
    return path if path.startswith("unix:") else f"unix://{path}" if path.startswith("/") else f"unix:{path}"


class PodResourcesClient:
    """A connection to one PodResources server. ``timeout_seconds`` is the per-call deadline."""

    def __init__(
        self, socket: str = DEFAULT_SOCKET, *, timeout_seconds: float = 10.0, max_message_bytes: int = MAX_MESSAGE_BYTES
    ) -> None:
        self.target = socket_target(socket)
        self.timeout_seconds = timeout_seconds
        self._channel = grpc.aio.insecure_channel(
            self.target, options=[("grpc.max_receive_message_length", max_message_bytes)]
        )
        self._stub = pb_grpc.PodResourcesListerStub(self._channel)

    async def __aenter__(self) -> PodResourcesClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close(None)

    async def wait_ready(self, timeout_seconds: float | None = None) -> None:
        """Wait until the channel is connected; :class:`PodResourcesUnavailable` after the timeout."""
        try:
            await asyncio.wait_for(self._channel.channel_ready(), timeout_seconds or self.timeout_seconds)
        except TimeoutError as error:
            raise PodResourcesUnavailable("connect", f"{self.target} not ready") from error

    async def list(self) -> tuple[PodResources, ...]:
        """``List``: every pod's exclusively assigned resources."""
        response = await self._call("List", self._stub.List(pb.ListPodResourcesRequest(), timeout=self.timeout_seconds))
        return list_from_pb(response)

    async def get_allocatable_resources(self) -> AllocatableResources:
        """``GetAllocatableResources``: the node's allocatable CPUs, devices and memory blocks."""
        call = self._stub.GetAllocatableResources(pb.AllocatableResourcesRequest(), timeout=self.timeout_seconds)
        return allocatable_from_pb(await self._call("GetAllocatableResources", call))

    async def get(self, namespace: str, name: str) -> PodResources:
        """``Get``: one pod; :class:`PodNotFound` if the server does not know it."""
        request = pb.GetPodResourcesRequest(pod_name=name, pod_namespace=namespace)
        response = await self._call("Get", self._stub.Get(request, timeout=self.timeout_seconds))
        return pod_from_pb(response.pod_resources)

    async def list_raw(self) -> pb.ListPodResourcesResponse:
        """``List`` as the protobuf message (for tools that want the wire form)."""
        return await self._call("List", self._stub.List(pb.ListPodResourcesRequest(), timeout=self.timeout_seconds))

    async def _call(self, method: str, call: Awaitable[_T]) -> _T:
        try:
            response = await call
        except grpc.aio.AioRpcError as error:
            raise map_error(method, error.code(), error.details() or "") from error
        if response is None:
            # grpc.aio hands over None when the response bytes do not decode as the expected message
            raise PodResourcesMalformed(method, "the response does not decode as the expected message")
        return response


def map_error(method: str, code: grpc.StatusCode, details: str) -> PodResourcesError:
    """The project error for a gRPC status (see :mod:`numaplane.grpcapi.errors`)."""
    name = code.name
    lowered = details.lower()
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return PodResourcesTimeout(method, details or "deadline exceeded", code=name, details=details)
    if code == grpc.StatusCode.UNAVAILABLE:
        return PodResourcesUnavailable(method, details or "unavailable", code=name, details=details)
    if code == grpc.StatusCode.UNIMPLEMENTED or (code == grpc.StatusCode.UNKNOWN and "method disabled" in lowered):
        return PodResourcesUnsupported(method, details or "not implemented", code=name, details=details)
    # the kubelet answers Get for an unknown pod with a plain error ("pod <n> in namespace <ns> not found"),
    # which gRPC-Go sends as UNKNOWN; our server sends NOT_FOUND
    if code == grpc.StatusCode.NOT_FOUND or (code == grpc.StatusCode.UNKNOWN and lowered.endswith("not found")):
        return PodNotFound(method, details or "pod not found", code=name, details=details)
    return PodResourcesCallFailed(method, f"{name}: {details}", code=name, details=details)
