"""Benchmark: the cost of pluggable resource management versus the kubelet's own managers, on a real node.

Starts the real components of the test fixtures (:mod:`numaplane.testing`): a private control plane
(etcd, kube-apiserver, controller-manager), a private containerd 1.7 with NRI, and a real kubelet
v1.36.2 on it. Then, for each configuration, creates ``--pods`` Guaranteed pods and measures:

* ``<c>_latency_p50`` / ``<c>_latency_p99`` (ms): from just before the pod's POST to the first watch
  event showing every container running (the API's timestamps have a 1 s resolution, too coarse);
* ``<c>_cpu_kubelet`` / ``_cpu_containerd`` / ``_cpu_agent`` / ``_cpu_total`` (ms): utime+stime (and
  the reaped children's cutime+cstime) from ``/proc`` of the kubelet, of containerd with its shims, and
  of the agent with its plugin process, consumed from the first POST until the last pod is gone —
  sampled every 0.2 s so that processes which exit (shims) still count up to their last sample;
* ``<c>_idle_cpu_<group>`` (ms/s): the same groups' CPU rate over ``--idle-seconds`` (10) right before
  the pods, all components ready and no pod made; ``<c>_cpu_per_pod_net`` (ms): the run's total above
  that idle rate, per pod — the marginal cost of one pod's create, start and deletion;
* ``<c>_wall`` (s), ``<c>_machine_cpu`` (ms) and ``<c>_machine_busy`` (% of all CPUs), from
  ``/proc/stat``: the whole machine's CPU during the run, other users (and this script) included.

Configurations:

* ``a`` — the kubelet's static CPU Manager (CPU 0 reserved), Static Memory Manager and
  single-numa-node Topology Manager;
* ``b`` — the kubelet's managers off (CPU 0 still reserved, so allocatable CPU is the same) and
  ``numaplane agent`` (a real process) enforcing the same policy through NRI, built-in plugins;
* ``c`` — the same with the CPU policy out of process: the agent's built-in CPU plugin off
  (``cpuManager.policy: none``) and ``examples/plugins/cpu_static_plugin.py`` (static, CPU 0
  reserved: ``--cpu-manager``) serving over gRPC in the agent's plugin directory, registered with the
  agent; a refusal of the registration reports ``c`` unavailable with the agent's words.

The agent runs as the operator would start it where it matters here (``--watch-pods``, the
``--kubelet-config`` take-over check, default log level) but as the cluster admin: the rendered
ServiceAccount and RBAC are what ``tests/realkube/test_real_node_agent.py`` checks, not a cost.

Every container's cpuset (its cgroup's ``cpuset.cpus`` and ``cpuset.mems``) under ``a`` is compared
with the one under ``b`` (and ``c``), pod by pod; mismatches are printed.

Pod size and waves: the kubelet sees this machine as it is (it cannot be given a fake sysfs). The static
policy needs at least one reserved CPU, so a node of ``C`` online CPUs has ``C - 1`` exclusive CPUs:
pods ask for 1 CPU and 64Mi (requests = limits) and run in waves of ``C - 1`` pods (1 on a 2-CPU
machine), each wave deleted (and gone) before the next. A pod traps SIGTERM, so deletion is quick.

A configuration that cannot run here is named with the reason on one line; the script then exits 1
(after the figures of the others). A machine that cannot run the components at all: one line, exit 2.

Usage: ``python bench/real_node.py [--quick] [--pods N] [--configs a,b,c] [--idle-seconds S]``
(default 100 pods; quick 20).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from numaplane.grpcapi.pluginapi.v1 import api_pb2 as plugin_pb
from numaplane.grpcapi.pluginapi.v1 import api_pb2_grpc as plugin_grpc
from numaplane.topology.cpuset import CPUSet

# The test harness (real control plane, kubelet, containerd) is not installed: it lives in harness/.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))
from numaplane_harness.containerd import ContainerdUnavailable, fetch_packages, run_containerd
from numaplane_harness.kubecluster import (
    KubeUnavailable,
    control_plane_unavailable_reason,
    free_port,
    run_control_plane,
)
from numaplane_harness.kubelet import (
    MANAGERS_OFF,
    STATIC_MANAGERS,
    KubeletUnavailable,
    RealKubelet,
    kubelet_unavailable_reason,
    run_kubelet,
)
from numaplane_harness.nodeprobes import TICKS_PER_SECOND, PodWatch, ProcSampler, machine_ticks, percentile
from numaplane_harness.processes import terminate_process

REPO = Path(__file__).resolve().parents[1]
EXAMPLE_CPU_PLUGIN = REPO / "examples" / "plugins" / "cpu_static_plugin.py"
CLI = (sys.executable, "-c", "import sys; from numaplane.cli import main; sys.exit(main())")
CONFIGS = ("a", "b", "c")
TITLES = {
    "a": "kubelet static CPU/Memory/Topology Managers",
    "b": "numaplane agent, in-process plugins",
    "c": "numaplane agent, CPU policy out of process",
}
#: the agent's policy: the same as the kubelet's STATIC_MANAGERS
AGENT_CONFIG = """\
topologyManager: {policy: single-numa-node}
cpuManager: {policy: static, reservedCPUs: "0"}
memoryManager:
  policy: Static
  reservedMemory: [{numaNode: 0, limits: {memory: 100Mi}}]
"""
#: configuration c: the agent's built-in CPU plugin off, the example plugin's own section in its place
OUT_OF_PROCESS_CONFIG = AGENT_CONFIG.replace('{policy: static, reservedCPUs: "0"}', "{policy: none}")
PLUGIN_CPU_MANAGER = '{"policy": "static", "reservedCPUs": "0"}'
POD_CPU, POD_MEMORY = "1", "64Mi"
#: PID 1 of a container ignores SIGTERM unless it traps it; with the trap a pod is gone in well under 1 s
POD_COMMAND = ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]


class ConfigUnavailable(Exception):
    """This configuration cannot run here; the message (one line) says why."""


@dataclass
class ConfigResult:
    """One configuration's figures. ``latencies_ms`` and ``cpusets`` are in pod order; a cpuset is
    ``cpus=<cpuset.cpus> mems=<cpuset.mems>`` of the pod's container."""

    name: str
    latencies_ms: list[float] = field(default_factory=list)
    cpusets: list[str] = field(default_factory=list)
    cpu_ms: dict[str, float] = field(default_factory=dict)
    wall_seconds: float = 0.0
    machine_busy_percent: float = 0.0
    machine_cpu_ms: float = 0.0
    #: CPU per group (and total) while no pod was made, ms per second of wall time
    idle_ms_per_s: dict[str, float] = field(default_factory=dict)

    def per_pod_net_ms(self) -> float:
        """CPU per pod above the idle rate: (total - idle total rate x wall) / pods, ms."""
        if not self.latencies_ms:
            return math.nan
        idle = self.idle_ms_per_s.get("total", 0.0) * self.wall_seconds
        return (self.cpu_ms.get("total", 0.0) - idle) / len(self.latencies_ms)

    def metrics(self) -> list[tuple[str, float, str]]:
        """``(metric, value, unit)`` rows, as printed."""
        rows = [
            (f"{self.name}_latency_p50", percentile(self.latencies_ms, 50), "ms"),
            (f"{self.name}_latency_p99", percentile(self.latencies_ms, 99), "ms"),
        ]
        rows += [(f"{self.name}_cpu_{group}", value, "ms") for group, value in self.cpu_ms.items()]
        rows += [(f"{self.name}_idle_cpu_{group}", value, "ms/s") for group, value in self.idle_ms_per_s.items()]
        return [
            *rows,
            (f"{self.name}_cpu_per_pod_net", self.per_pod_net_ms(), "ms"),
            (f"{self.name}_wall", self.wall_seconds, "s"),
            (f"{self.name}_machine_cpu", self.machine_cpu_ms, "ms"),
            (f"{self.name}_machine_busy", self.machine_busy_percent, "%"),
        ]


def node_cpus() -> CPUSet:
    """The machine's online CPUs (what the kubelet's cAdvisor sees); pods of 1 CPU: ``size() - 1`` fit."""
    return CPUSet.parse(Path("/sys/devices/system/cpu/online").read_text().strip())


def pod_manifest(kubelet: RealKubelet, name: str) -> dict[str, Any]:
    manifest = kubelet.pod_manifest(name, cpu=POD_CPU, memory=POD_MEMORY)
    manifest["spec"]["containers"][0]["command"] = POD_COMMAND
    return manifest


def run_pods(
    kubelet: RealKubelet, config: str, pods: int, groups: dict[str, list[int]], idle_seconds: float
) -> ConfigResult:
    """Measure the groups idle for ``idle_seconds``, then create ``pods`` pods in waves (see the module
    docstring) and measure; every pod is gone at the end."""
    result = ConfigResult(config)
    wave = node_cpus().size() - 1
    if wave < 1:
        raise ConfigUnavailable("the node has 1 CPU: nothing left for an exclusive CPU once CPU 0 is reserved")
    cp = kubelet.control_plane
    names = [f"bench-{config}-{i:03d}" for i in range(pods)]
    folder = str(kubelet.containerd.workdir)
    with ProcSampler(groups, containerd_folder=folder) as idle:
        time.sleep(idle_seconds)
    result.idle_ms_per_s = {group: ms / idle_seconds for group, ms in idle.consumed_ms().items()}
    sampler = ProcSampler(groups, containerd_folder=folder)
    with PodWatch(cp, "default", kubelet.node_name) as watch, sampler:
        busy_before = machine_ticks()
        began = time.monotonic()
        for start in range(0, pods, wave):
            batch = names[start : start + wave]
            posted = {}
            for name in batch:
                posted[name] = time.monotonic()
                kubelet.create_pod(pod_manifest(kubelet, name))
            for name in batch:
                running_at, pod = watch.wait_running(name, timeout=120)
                result.latencies_ms.append((running_at - posted[name]) * 1000)
                cpus, mems = kubelet.container_cpuset(pod), kubelet.container_cpuset(pod, knob="mems")
                result.cpusets.append(f"cpus={cpus} mems={mems}")
            for name in batch:
                cp.request("DELETE", f"/api/v1/namespaces/default/pods/{name}")
            for name in batch:
                watch.wait_deleted(name, timeout=120)
        result.wall_seconds = time.monotonic() - began
        busy_after = machine_ticks()
    result.cpu_ms = sampler.consumed_ms()
    busy, total = busy_after[0] - busy_before[0], busy_after[1] - busy_before[1]
    result.machine_busy_percent = 100.0 * busy / total if total else 0.0
    result.machine_cpu_ms = busy * 1000 / TICKS_PER_SECOND
    return result


def wait_ready(process: subprocess.Popen[bytes], port: int, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
            raise ConfigUnavailable(f"numaplane agent exited with {process.returncode}: {tail[0]}")
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer,
        ):
            if answer.status == 200:
                return
        if time.monotonic() > deadline:
            raise ConfigUnavailable(f"numaplane agent not ready in {timeout} s (log: {log})")
        time.sleep(0.1)


@contextlib.contextmanager
def running_agent(kubelet: RealKubelet, folder: Path, config: str = AGENT_CONFIG) -> Iterator[subprocess.Popen[bytes]]:
    """``numaplane agent`` on the kubelet's containerd with ``config``, the Pods watched, ready."""
    (folder / "config.yaml").write_text(config)
    (folder / "plugins").mkdir(exist_ok=True)
    port = free_port()
    args = [
        "agent",
        f"--nri-socket={kubelet.containerd.nri_socket}",
        f"--config={folder / 'config.yaml'}",
        f"--state-dir={folder / 'state'}",
        f"--podresources-socket={folder / 'podres.sock'}",
        f"--plugin-dir={folder / 'plugins'}",
        "--sysfs-root=/",
        f"--node-name={kubelet.node_name}",
        "--watch-pods",
        f"--kubeconfig={kubelet.control_plane.admin_kubeconfig}",
        f"--kubelet-config={kubelet.config_file}",
        f"--metrics-address=127.0.0.1:{port}",
        f"--health-address=127.0.0.1:{port}",
        "--log-format=console",
    ]
    log = folder / "agent.log"
    with open(log, "wb") as out:
        process = subprocess.Popen([*CLI, *args], stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        wait_ready(process, port, log)
        yield process
    finally:
        terminate_process(process, 15)


@contextlib.contextmanager
def cpu_plugin(folder: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The example CPU plugin serving in the agent's plugin directory, registered with the agent.

    The plugin is started with ``--no-register`` and registered here with the same request its own
    ``run_plugin`` loop sends, so that a refusal is seen with the agent's words (the loop retries
    silently).
    """
    socket_path = folder / "plugins" / "cpu-static.sock"
    process = subprocess.Popen(
        [
            sys.executable,
            str(EXAMPLE_CPU_PLUGIN),
            *("--socket", str(socket_path), "--no-register", "--cpu-manager", PLUGIN_CPU_MANAGER),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not socket_path.is_socket():
            if process.poll() is not None or time.monotonic() > deadline:
                raise ConfigUnavailable(f"the example CPU plugin did not serve on {socket_path}")
            time.sleep(0.05)
        request = plugin_pb.RegisterRequest(
            version="v1",
            name="example.numaplane.io/cpu-static",
            endpoint=socket_path.name,
            resources=["cpu"],
            options=plugin_pb.PluginOptions(pod_hints=True, validate_state=True, exclusive_amounts=True),
        )
        with grpc.insecure_channel(f"unix://{folder / 'plugins' / 'numaplane.sock'}") as channel:
            try:
                plugin_grpc.RegistrationStub(channel).Register(request, timeout=10)
            except grpc.RpcError as exc:
                raise ConfigUnavailable(
                    f"the agent refuses the out-of-process CPU policy: {exc.code().name} {exc.details()}"
                ) from None
        yield process
    finally:
        terminate_process(process, 10)


def process_groups(kubelet: RealKubelet, agent: subprocess.Popen[bytes] | None, plugin: Any) -> dict[str, list[int]]:
    """Root pids per group (the sampler adds containerd's shims)."""
    assert kubelet.process is not None
    groups = {"kubelet": [kubelet.process.pid], "containerd": [kubelet.containerd.process.pid]}
    if agent is not None:
        groups["agent"] = [agent.pid] + ([plugin.pid] if plugin is not None else [])
    return groups


def run_config(kubelet: RealKubelet, config: str, pods: int, folder: Path, idle_seconds: float = 10) -> ConfigResult:
    """Restart the kubelet for ``config``, start what it needs, run the pods."""
    kubelet.restart(STATIC_MANAGERS if config == "a" else MANAGERS_OFF)
    if config == "a":
        return run_pods(kubelet, config, pods, process_groups(kubelet, None, None), idle_seconds)
    work = Path(tempfile.mkdtemp(prefix=f"npb{config}-", dir=folder))
    with (
        running_agent(kubelet, work, OUT_OF_PROCESS_CONFIG if config == "c" else AGENT_CONFIG) as agent,
        cpu_plugin(work) if config == "c" else contextlib.nullcontext() as plugin,
    ):
        return run_pods(kubelet, config, pods, process_groups(kubelet, agent, plugin), idle_seconds)


def mismatches(reference: ConfigResult, other: ConfigResult) -> list[str]:
    """One line per pod whose cpuset differs between ``reference`` and ``other`` (pod order)."""
    return [
        f"pod {i}: {reference.name} {want!r} != {other.name} {got!r}"
        for i, (want, got) in enumerate(zip(reference.cpusets, other.cpusets, strict=True))
        if want != got
    ]


def table(results: list[ConfigResult]) -> str:
    lines = [
        f"{'configuration':48} {'p50 ms':>8} {'p99 ms':>8} {'cpu total ms':>12} {'cpu/pod ms':>10} "
        f"{'net/pod ms':>10} {'idle ms/s':>9} {'wall s':>7}"
    ]
    for r in results:
        total = r.cpu_ms.get("total", 0.0)
        per_pod = total / len(r.latencies_ms)
        lines.append(
            f"{r.name + ') ' + TITLES[r.name]:48} {percentile(r.latencies_ms, 50):8.0f} "
            f"{percentile(r.latencies_ms, 99):8.0f} {total:12.0f} {per_pod:10.1f} {r.per_pod_net_ms():10.1f} "
            f"{r.idle_ms_per_s.get('total', 0.0):9.1f} {r.wall_seconds:7.1f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="20 pods")
    parser.add_argument("--pods", type=int, default=None, help="pods per configuration (default 100)")
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated, of a,b,c")
    parser.add_argument("--idle-seconds", type=float, default=10, help="idle measurement before the pods")
    args = parser.parse_args(argv)
    pods = args.pods or (20 if args.quick else 100)
    configs = [c for c in args.configs.split(",") if c]
    if unknown := [c for c in configs if c not in CONFIGS]:
        parser.error(f"unknown configurations {unknown}")
    if reason := control_plane_unavailable_reason() or kubelet_unavailable_reason():
        print(f"real_node: cannot run here: {reason}", file=sys.stderr)
        return 2
    cpus = node_cpus()
    print(
        f"node: CPUs {cpus.format()}, CPU 0 reserved; pods of {POD_CPU} CPU + {POD_MEMORY}, waves of {cpus.size() - 1}"
    )
    results: list[ConfigResult] = []
    failed: dict[str, str] = {}
    try:
        with (
            tempfile.TemporaryDirectory(prefix="npbench-", dir="/tmp") as tmp,
            run_control_plane() as cp,
            run_containerd(fetch_packages()) as containerd,
            run_kubelet(cp, containerd, STATIC_MANAGERS) as kubelet,
        ):
            for config in configs:
                try:
                    results.append(run_config(kubelet, config, pods, Path(tmp), args.idle_seconds))
                except ConfigUnavailable as exc:
                    print(f"{config}_unavailable: {exc}", file=sys.stderr)
                    failed[config] = str(exc)
    except (KubeUnavailable, ContainerdUnavailable, KubeletUnavailable) as exc:
        print(f"real_node: cannot run here: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    report(results, pods, failed)
    return 1 if failed else 0


def report(results: list[ConfigResult], pods: int, failed: dict[str, str]) -> None:
    print(f"pods per configuration: {pods}")
    for r in results:
        for metric, value, unit in r.metrics():
            print(f"{metric}: {value:.1f} {unit}")
    by_name = {r.name: r for r in results}
    if "a" in by_name:
        for other in (by_name[c] for c in ("b", "c") if c in by_name):
            wrong = mismatches(by_name["a"], other)
            print(f"cpuset_mismatches_a_vs_{other.name}: {len(wrong)} pods")
            for line in wrong:
                print(f"  {line}")
    print(table(results))
    for config, reason in failed.items():
        print(f"{config + ') ' + TITLES[config]:48} not run: {reason}")
    print(f"loadavg after the run: {Path('/proc/loadavg').read_text().strip()}")


if __name__ == "__main__":
    sys.exit(main())
