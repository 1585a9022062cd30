"""Benchmark: the agent's NRI request handling, in process.

Machine: a 2-socket, 4-NUMA-node, 128-CPU synthetic topology (32 cores x 2 threads per socket);
config: single-numa-node topology policy, reserved CPUs 0 and 64, static memory policy.

Prints ``metric: value unit`` lines:

* ``create_p50_ms`` / ``create_p99_ms`` / ``create_max_ms`` — one CreateContainer, from the request
  bytes to the response bytes (decode, admission through the resource manager, cpuset decision,
  handing the pool change to the background sender, encode), in a stream of mixed pods
  (1/3 Guaranteed with 1-4 exclusive CPUs, 2/3 BestEffort or Burstable) over ``--running`` already
  running shared containers; exclusive containers are stopped again when CPUs run out (not timed).
  Target: p99 <= 2 ms.
* ``create_wholepod_first_p99_ms`` / ``create_wholepod_next_p99_ms`` — with the node's Pods known
  (``--watch-pods``): Guaranteed pods of an init container and an app container of 1-4 CPUs each,
  admitted as a whole at the first CreateContainer (init container: ``first``), the app container
  then handed its allocation (``next``); pods are released with StopPodSandbox when CPUs run out.
* ``create_wire_p99_ms`` — the same through the real NRI wire protocol (the fake runtime calling the
  agent over a unix socket pair, both on one event loop).
* ``pool_move_1000_shared_ms`` — with 1,000 running shared containers, from an exclusive
  CreateContainer until the background sender has told all of them the shrunk pool (their updates
  leave the request path: the answer itself carries none above 16 containers).
* ``sync_cold_ms`` — Synchronize of ``--sync`` running containers (10% Guaranteed) into an empty
  agent (every container adopted, pinned, updates computed), request bytes to response bytes.
  Target: <= 100 ms for 1,000 containers. ``sync_request_bytes`` is the request's size (a ttrpc
  message is capped at 4 MiB).
* ``sync_warm_ms`` — the same Synchronize into an agent that already knows every container (the
  restart-with-checkpoint case).
* ``checkpoint_snapshot_ms`` / ``checkpoint_write_ms`` — taking the state snapshot (on the loop) and
  encoding + writing it atomically (worker thread) for that state.

Usage: ``python bench/agent_create.py [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from numaplane.agent.checkpoint import CheckpointIdentity, CheckpointStore, topology_digest
from numaplane.agent.handler import AgentHandler, StateRunner
from numaplane.agent.metrics import AgentMetrics
from numaplane.agent.state import NodeAgentState
from numaplane.nri.errors import StatusError
from numaplane.nri.events import CpusetUpdate
from numaplane.nri.plugin import NRIPlugin
from numaplane.nri.proto import api_pb2
from numaplane.nri.stub import Stub
from numaplane.observability.logs import configure_logging
from numaplane.policy.manager import ResourceManager
from numaplane.resources.pod import Pod, parse_pod
from numaplane.topology.model import synthetic

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))
from numaplane_harness.nrifake import FakeRuntime

TOPOLOGY = synthetic(sockets=2, numa_per_socket=2, cores_per_numa=16, threads_per_core=2)
CONFIG = {
    "topologyManager": {"policy": "single-numa-node"},
    "cpuManager": {"reservedCPUs": "0,64"},
    "memoryManager": {
        "policy": "Static",
        "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}, {"numaNode": 2, "limits": {"memory": "1Gi"}}],
    },
}
QOS_PARENT = {"Guaranteed": "/kubepods", "Burstable": "/kubepods/burstable", "BestEffort": "/kubepods/besteffort"}


def pod_sandbox(i: int, qos: str) -> api_pb2.PodSandbox:
    uid = f"{i:08d}-0000-4000-8000-000000000000"
    pod = api_pb2.PodSandbox(id=f"{i:064x}", name=f"pod-{i}", uid=uid, namespace="bench")
    pod.linux.cgroup_parent = f"{QOS_PARENT[qos]}/pod{uid}"
    for k in range(8):  # kubelet/containerd annotations of realistic size
        pod.annotations[f"io.kubernetes.cri.annotation-{k}"] = "x" * 60
    return pod


def container(
    pod: api_pb2.PodSandbox, i: int, qos: str, cpus: int, state: int = api_pb2.CONTAINER_CREATED
) -> api_pb2.Container:
    c = api_pb2.Container(
        id=f"c{i:063x}", pod_sandbox_id=pod.id, name="main", state=api_pb2.ContainerState.ValueType(state)
    )
    res = c.linux.resources
    res.cpu.period.value = 100000
    if qos == "Guaranteed":
        res.cpu.shares.value = cpus * 1024
        res.cpu.quota.value = cpus * 100000
        res.memory.limit.value = 256 << 20
    elif qos == "Burstable":
        res.cpu.shares.value = 256
        res.memory.limit.value = 512 << 20
    else:
        res.cpu.shares.value = 2
    res.cpu.cpus = "0-127"
    for k in range(8):
        c.annotations[f"io.kubernetes.container.annotation-{k}"] = "y" * 60
    return c


def kind(i: int) -> tuple[str, int]:
    if i % 3 == 0:
        return "Guaranteed", 1 + (i // 3) % 4
    return ("BestEffort", 0) if i % 3 == 1 else ("Burstable", 0)


def new_handler() -> AgentHandler:
    runner = StateRunner(NodeAgentState(ResourceManager(TOPOLOGY, CONFIG)))
    return AgentHandler(runner, metrics=AgentMetrics())


def stub_method(handler: AgentHandler, method: str) -> Callable[[AgentHandler, bytes], Awaitable[bytes]]:
    """``Plugin/<method>`` served by the NRI stub for ``handler``: request bytes → answer bytes."""
    stub = Stub(handler)

    async def serve(_handler: AgentHandler, payload: bytes) -> bytes:
        return await stub.handle(method, payload)

    return serve


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def bench_create(count: int, running: int) -> dict[str, float]:
    handler = new_handler()
    create = stub_method(handler, "CreateContainer")
    stop = stub_method(handler, "StopContainer")
    state_change = stub_method(handler, "StateChange")
    for i in range(running):  # running shared containers
        pod = pod_sandbox(10_000_000 + i, "BestEffort")
        req = api_pb2.CreateContainerRequest(pod=pod, container=container(pod, 10_000_000 + i, "BestEffort", 0))
        await create(handler, req.SerializeToString())
    exclusive: list[tuple[bytes, bytes]] = []
    times = []
    for i in range(count):
        qos, cpus = kind(i)
        pod = pod_sandbox(i, qos)
        ctr = container(pod, i, qos, cpus)
        payload = api_pb2.CreateContainerRequest(pod=pod, container=ctr).SerializeToString()
        started = time.perf_counter()
        try:
            out = await create(handler, payload)
        except StatusError:  # out of CPUs: free some and go on (not timed)
            for stop_payload, remove_payload in exclusive[: len(exclusive) // 2]:
                await stop(handler, stop_payload)
                await state_change(handler, remove_payload)  # a stopped container holds its CPUs until removed
            exclusive = exclusive[len(exclusive) // 2 :]
            continue
        times.append(time.perf_counter() - started)
        assert out
        if qos == "Guaranteed":
            removed = api_pb2.StateChangeEvent(event=api_pb2.REMOVE_CONTAINER, pod=pod, container=ctr)
            exclusive.append(
                (
                    api_pb2.StopContainerRequest(pod=pod, container=ctr).SerializeToString(),
                    removed.SerializeToString(),
                )
            )
    assert handler.state.check() == []
    return {
        "create_p50_ms": statistics.median(times) * 1e3,
        "create_p99_ms": pct(times, 0.99) * 1e3,
        "create_max_ms": max(times) * 1e3,
        "create_count": len(times),
    }


def api_pod(i: int, cpus: int) -> Pod:
    q = {"cpu": str(cpus), "memory": "256Mi"}
    resources = {"requests": q, "limits": q}
    return parse_pod(
        {
            "metadata": {"name": f"pod-{i}", "namespace": "bench", "uid": f"{i:08d}-0000-4000-8000-000000000000"},
            "spec": {
                "initContainers": [{"name": "init", "resources": resources}],
                "containers": [{"name": "main", "resources": resources}],
            },
            "status": {"qosClass": "Guaranteed"},
        }
    )


async def bench_create_wholepod(count: int) -> dict[str, float]:
    known: dict[str, Pod] = {}
    runner = StateRunner(NodeAgentState(ResourceManager(TOPOLOGY, CONFIG), pod_lookup=known.get))
    handler = AgentHandler(runner, metrics=AgentMetrics())
    create = stub_method(handler, "CreateContainer")
    state_change = stub_method(handler, "StateChange")
    first: list[float] = []
    later: list[float] = []
    admitted: list[bytes] = []
    for i in range(count):
        cpus = 1 + i % 4
        pod = pod_sandbox(i, "Guaranteed")
        known[pod.uid] = api_pod(i, cpus)
        init = container(pod, i, "Guaranteed", cpus)
        init.name, init.id = "init", f"i{i:063x}"
        app = container(pod, i, "Guaranteed", cpus)
        payloads = [api_pb2.CreateContainerRequest(pod=pod, container=c).SerializeToString() for c in (init, app)]
        started = time.perf_counter()
        try:
            await create(handler, payloads[0])
        except StatusError:  # out of CPUs: free some pods and go on (not timed)
            for stop_payload in admitted[: len(admitted) // 2]:
                await state_change(handler, stop_payload)
            admitted = admitted[len(admitted) // 2 :]
            continue
        middle = time.perf_counter()
        await create(handler, payloads[1])
        done = time.perf_counter()
        first.append(middle - started)
        later.append(done - middle)
        event = api_pb2.StateChangeEvent(event=api_pb2.STOP_POD_SANDBOX, pod=pod)
        admitted.append(event.SerializeToString())
    assert handler.state.check() == []
    return {
        "create_wholepod_first_p99_ms": pct(first, 0.99) * 1e3,
        "create_wholepod_next_p99_ms": pct(later, 0.99) * 1e3,
        "create_wholepod_count": len(first),
    }


async def bench_create_wire(count: int) -> float:
    handler = new_handler()
    a, b = socket.socketpair()
    runtime = FakeRuntime()
    plugin = NRIPlugin(handler, name="bench", idx="50", inherited_fd=b.detach())
    task = asyncio.create_task(plugin.run())
    session = await runtime.attach(a)
    await session.registered.wait()
    await session.synchronized.wait()
    times = []
    exclusive: list[tuple[api_pb2.PodSandbox, api_pb2.Container]] = []
    for i in range(count):
        qos, cpus = kind(i)
        pod = pod_sandbox(i, qos)
        ctr = container(pod, i, qos, cpus)
        started = time.perf_counter()
        try:
            await runtime.create_container(pod, ctr)
        except StatusError:  # out of CPUs: free some and go on (not timed)
            for p, c in exclusive[: len(exclusive) // 2]:
                request = api_pb2.StopContainerRequest(pod=p, container=c)
                await runtime.call("StopContainer", request, api_pb2.StopContainerResponse)
                await runtime.state_change(api_pb2.REMOVE_CONTAINER, p, c)  # held until removed
            exclusive = exclusive[len(exclusive) // 2 :]
            continue
        times.append(time.perf_counter() - started)
        if qos == "Guaranteed":
            exclusive.append((pod, ctr))
    await plugin.stop()
    await runtime.close()
    await asyncio.wait_for(task, 5)
    return pct(times, 0.99) * 1e3


async def bench_pool_move(shared: int) -> float:
    """ms until the background sender has told ``shared`` running containers a shrunk pool."""
    handler = new_handler()
    sent: list[int] = []

    async def runtime_side(updates: list[CpusetUpdate]) -> list[str]:
        sent.append(len(updates))
        return []

    handler.sender.sender = runtime_side
    handler.sender.allow_unsolicited(True)  # a runtime with the NRI fix (containerd >= 2.4)
    handler.sender.start()
    create = stub_method(handler, "CreateContainer")
    for i in range(shared):
        pod = pod_sandbox(i, "BestEffort")
        await create(
            handler,
            api_pb2.CreateContainerRequest(pod=pod, container=container(pod, i, "BestEffort", 0)).SerializeToString(),
        )
    pod = pod_sandbox(shared, "Guaranteed")
    payload = api_pb2.CreateContainerRequest(
        pod=pod, container=container(pod, shared, "Guaranteed", 4)
    ).SerializeToString()
    started = time.perf_counter()
    await create(handler, payload)
    await handler.sender.wait_idle(30)
    elapsed = time.perf_counter() - started
    await handler.sender.stop()
    assert handler.state.stale_shared() == [] and len(sent) >= shared // handler.sender.chunk
    return elapsed * 1e3


def sync_request(n: int) -> api_pb2.SynchronizeRequest:
    req = api_pb2.SynchronizeRequest()
    cpus_left = 120
    for i in range(n):
        qos, cpus = ("Guaranteed", 1) if i % 10 == 0 and cpus_left > 0 else kind(i * 3 + 1)
        if qos == "Guaranteed":
            cpus_left -= 1
        pod = pod_sandbox(i, qos)
        req.pods.append(pod)
        req.containers.append(container(pod, i, qos, cpus, api_pb2.CONTAINER_RUNNING))
    return req


async def bench_sync(n: int, rounds: int) -> dict[str, float]:
    payload = sync_request(n).SerializeToString()
    cold, warm = [], []
    handler = new_handler()
    for _ in range(rounds):
        handler = new_handler()
        sync = stub_method(handler, "Synchronize")
        started = time.perf_counter()
        await sync(handler, payload)
        cold.append(time.perf_counter() - started)
        started = time.perf_counter()
        await sync(handler, payload)
        warm.append(time.perf_counter() - started)
    node_state = handler.state
    assert node_state.check() == [] and len(node_state.records) == n
    started = time.perf_counter()
    data = node_state.snapshot()
    snap = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as tmp:
        store = CheckpointStore(Path(tmp) / "state.json", CheckpointIdentity("bench", topology_digest(TOPOLOGY)))
        started = time.perf_counter()
        size = store.save(data)
        write = time.perf_counter() - started
    return {
        "sync_cold_ms": statistics.median(cold) * 1e3,
        "sync_warm_ms": statistics.median(warm) * 1e3,
        "sync_request_bytes": len(payload),
        "checkpoint_snapshot_ms": snap * 1e3,
        "checkpoint_write_ms": write * 1e3,
        "checkpoint_bytes": size,
    }


async def main(quick: bool) -> None:
    configure_logging("json", "warning")  # stderr quiet; debug events are dropped before rendering
    create = await bench_create(600 if quick else 6000, 200 if quick else 1000)
    wholepod = await bench_create_wholepod(600 if quick else 6000)
    wire = await bench_create_wire(300 if quick else 3000)
    pool_move = await bench_pool_move(1000)
    sync = await bench_sync(1000, 3 if quick else 10)
    units = {"_ms": "ms", "_bytes": "bytes", "_count": "calls"}
    for name, value in {
        **create,
        **wholepod,
        "create_wire_p99_ms": wire,
        "pool_move_1000_shared_ms": pool_move,
        **sync,
    }.items():
        unit = next((u for suffix, u in units.items() if name.endswith(suffix)), "")
        print(f"{name}: {value:.3f} {unit}" if isinstance(value, float) else f"{name}: {value} {unit}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="agent NRI handling benchmark")
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    args = parser.parse_args()
    asyncio.run(main(args.quick))
