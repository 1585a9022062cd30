"""A PodResources server whose answer does not decode gives a typed error, not a crash."""

from __future__ import annotations

import tempfile
from pathlib import Path

import grpc
import pytest

from numaplane.grpcapi.errors import PodResourcesMalformed
from numaplane.grpcapi.podresources.client import PodResourcesClient


async def test_undecodable_response_is_a_typed_error() -> None:
    folder = Path(tempfile.mkdtemp(prefix="np"))
    socket = folder / "pr.sock"

    def garbage(request: bytes, context: object) -> bytes:
        return b"\xff\xff\xff\xff"  # not a valid protobuf message

    handler = grpc.method_handlers_generic_handler(
        "v1.PodResourcesLister",
        {
            "List": grpc.unary_unary_rpc_method_handler(garbage),
            "GetAllocatableResources": grpc.unary_unary_rpc_method_handler(garbage),
        },
    )
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"unix://{socket}")
    await server.start()
    try:
        async with PodResourcesClient(str(socket), timeout_seconds=5) as client:
            with pytest.raises(PodResourcesMalformed):
                await client.list()
            with pytest.raises(PodResourcesMalformed):
                await client.get_allocatable_resources()
    finally:
        await server.stop(None)
