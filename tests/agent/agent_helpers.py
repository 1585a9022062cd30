"""Helpers of the agent tests: NRI pods and containers as a kubelet-driven containerd sends them
(cgroupfs driver), capture files, plugin processes."""

from __future__ import annotations

import struct
import subprocess
import sys
import time
from pathlib import Path

from numaplane.nri.proto import api_pb2, ttrpc_pb2
from numaplane_harness.containerd import terminate_process

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_CPU_PLUGIN = REPO / "examples" / "plugins" / "cpu_static_plugin.py"
QOS_PARENT = {"Guaranteed": "/kubepods", "Burstable": "/kubepods/burstable", "BestEffort": "/kubepods/besteffort"}


def sandbox(
    name: str, *, qos: str = "Guaranteed", namespace: str = "default", annotations: dict[str, str] | None = None
) -> api_pb2.PodSandbox:
    uid = f"uid-{name}"
    pod = api_pb2.PodSandbox(id=f"sb-{name}", name=name, uid=uid, namespace=namespace)
    pod.linux.cgroup_parent = f"{QOS_PARENT[qos]}/pod{uid}"
    for k, v in (annotations or {}).items():
        pod.annotations[k] = v
    return pod


def container(
    pod: api_pb2.PodSandbox,
    name: str = "main",
    *,
    cpu_milli: int = 0,
    cpu_limit_milli: int | None = None,
    memory: int | None = None,
    cpus: str = "",
    state: int = api_pb2.CONTAINER_CREATED,
    cid: str | None = None,
    hugepages: dict[str, int] | None = None,
) -> api_pb2.Container:
    """A container as the kubelet encodes its resources (shares from the request, quota from the limit)."""
    c = api_pb2.Container(
        id=cid or f"ctr-{pod.name}-{name}",
        pod_sandbox_id=pod.id,
        name=name,
        state=api_pb2.ContainerState.ValueType(state),
    )
    cpu = c.linux.resources.cpu
    cpu.shares.value = max(2, cpu_milli * 1024 // 1000)
    cpu.period.value = 100000
    if cpu_limit_milli is not None:
        cpu.quota.value = cpu_limit_milli * 100000 // 1000
    if memory is not None:
        c.linux.resources.memory.limit.value = memory
    for size, limit in (hugepages or {}).items():
        c.linux.resources.hugepage_limits.append(api_pb2.HugepageLimit(page_size=size, limit=limit))
    cpu.cpus = cpus
    return c


def guaranteed(pod: api_pb2.PodSandbox, name: str = "main", n: int = 1, **kw: object) -> api_pb2.Container:
    """A Guaranteed container with ``n`` CPUs and 64 MiB."""
    return container(pod, name, cpu_milli=n * 1000, cpu_limit_milli=n * 1000, memory=64 << 20, **kw)  # type: ignore[arg-type]


def capture_request(shared: Path, file: str) -> ttrpc_pb2.Request:
    """The ttrpc request in one capture file (mux frames joined, header stripped)."""
    raw = (shared / "wire" / "captures" / "nri" / file).read_bytes()
    payload = b""
    while raw:
        _conn, length = struct.unpack(">II", raw[:8])
        payload += raw[8 : 8 + length]
        raw = raw[8 + length :]
    length, _stream, _type, _flags = struct.unpack(">IIBB", payload[:10])
    return ttrpc_pb2.Request.FromString(payload[10 : 10 + length])


def wait_for_socket(path: Path, process: subprocess.Popen[bytes] | None = None, timeout_seconds: float = 15) -> None:
    deadline = time.monotonic() + timeout_seconds
    while not path.is_socket():
        if process is not None and process.poll() is not None:
            out = process.stdout.read().decode(errors="replace") if process.stdout else ""
            raise AssertionError(f"plugin process exited with {process.returncode}: {out}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not appear in {timeout_seconds} s")
        time.sleep(0.02)


def start_example_cpu_plugin(socket_path: Path, *extra: str) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, str(EXAMPLE_CPU_PLUGIN), "--socket", str(socket_path), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    wait_for_socket(socket_path, process)
    return process


def stop_process(process: subprocess.Popen[bytes]) -> None:
    terminate_process(process)
    if process.stdout is not None:
        process.stdout.close()


#: What a runtime with the NRI fix for unsolicited updates says in Configure (containerd/nri#301, in
#: containerd >= 2.4.0): tests of the unsolicited ``UpdateContainers`` path run against it.
FIXED_RUNTIME: dict[str, str] = {"runtime_name": "containerd", "runtime_version": "2.4.0"}
#: The version the project targets, whose NRI deadlocks on unsolicited updates (replies only).
CONTAINERD_1_7: dict[str, str] = {"runtime_name": "containerd", "runtime_version": "1.7.24~ds1"}
