"""Async server of the kubelet PodResources v1 API (``grpc.aio`` on a unix socket).

Serves ``List``, ``GetAllocatableResources`` and ``Get`` from a :class:`PodResourcesProvider`, so
that upstream exporters (RTE, NFD topology-updater) can read our agent's allocations exactly as they
read the kubelet's; tests use it as a fake kubelet. The servicer only translates: provider values →
protobuf (:mod:`~numaplane.grpcapi.podresources.convert`); provider exceptions → status ``INTERNAL``;
an unknown pod in ``Get`` → ``NOT_FOUND`` with the kubelet's message text.

Socket hygiene (as kubelet plugins do): the directory is created, a stale socket removed before
binding, permissions set after start (``socket_mode``), the socket deleted on stop. Linux limits
socket paths to 107 bytes; longer paths are refused with :class:`~numaplane.grpcapi.errors.ServeError`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Final, Protocol

import grpc
import grpc.aio

from numaplane.grpcapi.errors import ServeError
from numaplane.grpcapi.podresources.convert import allocatable_to_pb, list_to_pb, pod_to_pb
from numaplane.grpcapi.podresources.v1 import api_pb2 as pb
from numaplane.grpcapi.podresources.v1 import api_pb2_grpc as pb_grpc
from numaplane.grpcapi.sockets import socket_umask
from numaplane.nrt.podresources import AllocatableResources, PodResources
from numaplane.nrt.state import NodeAllocationState

__all__ = ["MAX_SOCKET_PATH_BYTES", "PodResourcesProvider", "PodResourcesServer", "StaticProvider"]

MAX_SOCKET_PATH_BYTES: Final = 107


class PodResourcesProvider(Protocol):
    """Where the server's answers come from (called once per RPC, on the server's event loop)."""

    async def list_pods(self) -> Sequence[PodResources]: ...

    async def allocatable_resources(self) -> AllocatableResources: ...

    async def get_pod(self, namespace: str, name: str) -> PodResources | None: ...


class StaticProvider:
    """A provider holding fixed values; :meth:`update` replaces them (a fake kubelet, or the agent's
    latest snapshot)."""

    def __init__(self, allocatable: AllocatableResources | None = None, pods: Sequence[PodResources] = ()) -> None:
        self._allocatable = allocatable or AllocatableResources()
        self._pods: tuple[PodResources, ...] = tuple(pods)

    @staticmethod
    def from_state(state: NodeAllocationState) -> StaticProvider:
        allocatable, pods = state.to_podresources()
        return StaticProvider(allocatable, pods)

    def update(self, allocatable: AllocatableResources, pods: Sequence[PodResources]) -> None:
        self._allocatable, self._pods = allocatable, tuple(pods)

    async def list_pods(self) -> Sequence[PodResources]:
        return self._pods

    async def allocatable_resources(self) -> AllocatableResources:
        return self._allocatable

    async def get_pod(self, namespace: str, name: str) -> PodResources | None:
        for pod in self._pods:
            if pod.namespace == namespace and pod.name == name:
                return pod
        return None


class _Servicer(pb_grpc.PodResourcesListerServicer):
    def __init__(self, provider: PodResourcesProvider) -> None:
        self._provider = provider

    async def List(
        self, request: pb.ListPodResourcesRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> pb.ListPodResourcesResponse:
        try:
            pods = await self._provider.list_pods()
        except Exception as error:
            await context.abort(grpc.StatusCode.INTERNAL, f"listing pod resources failed: {error}")
        return list_to_pb(pods)

    async def GetAllocatableResources(
        self, request: pb.AllocatableResourcesRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> pb.AllocatableResourcesResponse:
        try:
            allocatable = await self._provider.allocatable_resources()
        except Exception as error:
            await context.abort(grpc.StatusCode.INTERNAL, f"getting allocatable resources failed: {error}")
        return allocatable_to_pb(allocatable)

    async def Get(
        self, request: pb.GetPodResourcesRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> pb.GetPodResourcesResponse:
        try:
            pod = await self._provider.get_pod(request.pod_namespace, request.pod_name)
        except Exception as error:
            await context.abort(grpc.StatusCode.INTERNAL, f"getting pod resources failed: {error}")
        if pod is None:
            await context.abort(
                grpc.StatusCode.NOT_FOUND, f"pod {request.pod_name} in namespace {request.pod_namespace} not found"
            )
        return pb.GetPodResourcesResponse(pod_resources=pod_to_pb(pod))


class PodResourcesServer:
    """Serves a provider on ``socket_path``. ``async with PodResourcesServer(p, path): ...``."""

    def __init__(
        self, provider: PodResourcesProvider, socket_path: str | os.PathLike[str], *, socket_mode: int = 0o660
    ) -> None:
        self.path = Path(socket_path)
        if len(os.fsencode(self.path)) > MAX_SOCKET_PATH_BYTES:
            raise ServeError(f"socket path longer than {MAX_SOCKET_PATH_BYTES} bytes: {self.path}")
        self.socket_mode = socket_mode
        self._provider = provider
        self._server: grpc.aio.Server | None = None

    @property
    def target(self) -> str:
        """The client target for this server (``unix://<abs path>``)."""
        return f"unix://{self.path.absolute()}"

    async def start(self) -> None:
        if self._server is not None:
            raise ServeError("already started")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.is_socket():
            self.path.unlink()
        elif self.path.exists():
            raise ServeError(f"{self.path} exists and is not a socket")
        server = grpc.aio.server()
        pb_grpc.add_PodResourcesListerServicer_to_server(_Servicer(self._provider), server)
        try:
            with socket_umask(self.socket_mode):
                server.add_insecure_port(self.target)
        except RuntimeError as error:
            raise ServeError(f"cannot bind {self.path}: {error}") from error
        await server.start()
        self._server = server
        os.chmod(self.path, self.socket_mode)

    async def stop(self, grace_seconds: float | None = 1.0) -> None:
        """Stop (in-flight calls get ``grace_seconds``) and remove the socket. Idempotent."""
        server, self._server = self._server, None
        if server is not None:
            await server.stop(grace_seconds)
        if self.path.is_socket():
            self.path.unlink()

    async def __aenter__(self) -> PodResourcesServer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()
