"""Benchmark: NRI decode + dispatch time per CreateContainer frame.

Input: the real CreateContainer request captured from containerd 1.7.24 (``wire/captures/nri``, two
mux frames, 5470 bytes), or a synthetic one of similar shape if the shared folder is absent.

Prints ``metric: value unit`` lines:

* ``decode_us``: mux + ttrpc + envelope decode of one CreateContainer message (sans-I/O ``Connection``);
* ``decode_dispatch_us``: the above + ``CreateContainerRequest`` parse + the example handler (pin to a
  cpuset) + response encode + reply framing — the plugin's whole CPU cost per request;
* ``agent_decode_dispatch_us``: the same through the node agent's handler (``AgentHandler`` on a
  2-socket, 128-CPU synthetic node; the same container again after the first, so the decision comes
  from its record): the agent's NRI cost around a cheap decision, in CPU time (``process_time``, the
  best of several rounds: steady on a shared machine where wall time is not);
* ``socket_roundtrip_us``: a fake runtime calling CreateContainer on our plugin over a socketpair, both
  on one asyncio loop (wall time per call, includes the event loop and kernel);

Usage: ``python bench/nri_framing.py [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import time
from pathlib import Path

from numaplane.agent.handler import AgentHandler, StateRunner
from numaplane.agent.metrics import AgentMetrics
from numaplane.agent.state import NodeAgentState
from numaplane.nri.plugin import NRIPlugin
from numaplane.nri.proto import api_pb2
from numaplane.nri.protocol import Connection, RequestReceived, Role
from numaplane.nri.stub import PLUGIN_SERVICE, Stub
from numaplane.observability.logs import configure_logging
from numaplane.policy.manager import ResourceManager
from numaplane.topology.model import synthetic

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))
from numaplane_harness.nriexample import FixedCpusetHandler
from numaplane_harness.nrifake import FakeRuntime

CAPTURE = "wire/captures/nri/21-c1-s19-CreateContainer-request-gu-ncc-true.bin"


def shared_dir() -> Path:
    env = os.environ.get("NUMAPLANE_SHARED")
    return Path(env) if env else Path(__file__).resolve().parent.parent.parent / "shared"


def synthetic_request() -> api_pb2.CreateContainerRequest:
    req = api_pb2.CreateContainerRequest()
    req.pod.id, req.pod.name, req.pod.namespace, req.pod.uid = "a" * 64, "gu", "ns", "u" * 36
    req.pod.linux.cgroup_parent = "/kubepods/pod" + "u" * 36
    for i in range(20):
        req.pod.annotations[f"io.kubernetes.annotation.{i}"] = "x" * 80
    req.container.id, req.container.name = "b" * 64, "main"
    req.container.linux.resources.cpu.cpus = "1"
    req.container.linux.resources.cpu.shares.value = 1024
    for i in range(20):
        req.container.annotations[f"io.kubernetes.container.{i}"] = "y" * 80
    return req


def request_frames() -> tuple[bytes, str]:
    path = shared_dir() / CAPTURE
    if path.exists():
        return path.read_bytes(), "capture"
    runtime = Connection(Role.RUNTIME)
    # Stream ids must advance per call; one synthetic frame is enough as a template.
    _, data = runtime.call(PLUGIN_SERVICE, "CreateContainer", synthetic_request().SerializeToString(), 2_000_000_000)
    return data, "synthetic"


def bench_decode(frame: bytes, n: int) -> float:
    conn = Connection(Role.PLUGIN)
    start = time.perf_counter()
    for _ in range(n):
        (event,) = conn.receive(frame)
        assert isinstance(event, RequestReceived)
        conn._serving.discard(event.stream_id)  # the capture reuses one stream id
    return (time.perf_counter() - start) / n


async def bench_dispatch(frame: bytes, n: int) -> float:
    conn = Connection(Role.PLUGIN)
    handler = FixedCpusetHandler("1")
    stub = Stub(handler)
    start = time.perf_counter()
    for _ in range(n):
        (event,) = conn.receive(frame)
        assert isinstance(event, RequestReceived)
        reply = await stub.serve(event)
        conn.reply(event.stream_id, reply.payload, reply.code, reply.message)
        handler.calls.clear()
    return (time.perf_counter() - start) / n


async def bench_agent_dispatch(frame: bytes, n: int, rounds: int = 5) -> float:
    """CPU seconds per CreateContainer through the agent's handler (see the module docstring)."""
    topology = synthetic(sockets=2, numa_per_socket=2, cores_per_numa=16, threads_per_core=2)
    state = NodeAgentState(ResourceManager(topology, {"cpuManager": {"reservedCPUs": "0,64"}}))
    stub = Stub(AgentHandler(StateRunner(state), metrics=AgentMetrics()))
    conn = Connection(Role.PLUGIN)
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(n):
            (event,) = conn.receive(frame)
            assert isinstance(event, RequestReceived)
            reply = await stub.serve(event)
            assert reply.code == 0, reply.message
            conn.reply(event.stream_id, reply.payload, reply.code, reply.message)
        best = min(best, (time.process_time() - start) / n)
    return best


async def bench_roundtrip(payload: bytes, n: int) -> float:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    runtime = FakeRuntime()
    plugin = NRIPlugin(FixedCpusetHandler("1"), name="bench", idx="10", inherited_fd=ours.detach())
    run = asyncio.create_task(plugin.run())
    session = await runtime.attach(theirs)
    await session.synchronized.wait()
    start = time.perf_counter()
    for _ in range(n):
        await session.conn.call(PLUGIN_SERVICE, "CreateContainer", payload, timeout_seconds=2)
    elapsed = (time.perf_counter() - start) / n
    await plugin.stop()
    await runtime.close()
    await run
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer iterations (a smoke run)")
    ns = parser.parse_args()
    n = 300 if ns.quick else 5000
    frame, source = request_frames()
    (event,) = Connection(Role.PLUGIN).receive(frame)
    assert isinstance(event, RequestReceived) and event.method == "CreateContainer"

    bench_decode(frame, n // 10)  # warm up
    decode = bench_decode(frame, n)
    dispatch_s = asyncio.run(bench_dispatch(frame, n))
    configure_logging("json", "warning")
    agent_s = asyncio.run(bench_agent_dispatch(frame, n // 5))
    roundtrip = asyncio.run(bench_roundtrip(event.payload, n // 5))
    print(f"input: {source} ({len(frame)} bytes)")
    print(f"decode_us: {decode * 1e6:.1f} us")
    print(f"decode_dispatch_us: {dispatch_s * 1e6:.1f} us")
    print(f"decode_dispatch_rate: {1 / dispatch_s:.0f} frames/s")
    print(f"agent_decode_dispatch_us: {agent_s * 1e6:.1f} us")
    print(f"socket_roundtrip_us: {roundtrip * 1e6:.1f} us")


if __name__ == "__main__":
    main()
