"""``numaplane agent`` against a real containerd 1.7 through CRI: the agent as a process, pods, and the
kill-and-restart trial (issue 25 item 16).

:class:`AgentProcess` runs ``numaplane agent`` as a subprocess on a machine described as 2 CPUs on 2
NUMA nodes with CPU 0 reserved (:data:`TOPOLOGY`, :data:`CONFIG`: one container can hold CPU 1
exclusively, everything else shares the pool); :class:`Pods` creates and deletes pods through CRI
(cgroupfs parents as the kubelet's, so the agent derives their QoS class as on a real node);
:func:`wait_consistent` waits until every running container's cgroup matches the agent's PodResources
answer. :func:`kill_restart_trial` kills the agent with SIGKILL at random moments while Guaranteed and
BestEffort pods are created and deleted, restarts it, and measures: ready after every kill, the
checkpoint restored, the cgroups converged, the runtime never wedged (no CRI call stalls), and no
unsolicited ``Runtime.UpdateContainers`` (which deadlocks containerd 1.7).
Used by ``tests/agent/test_agent_e2e_containerd.py``, ``tests/agent/test_agent_killrestart.py`` and
``bench/agent_killrestart.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from numaplane.grpcapi.podresources.client import PodResourcesClient
from numaplane.nrt.podresources import PodResources
from numaplane.topology.document import topology_to_dict
from numaplane.topology.model import synthetic
from numaplane_harness.containerd import (
    BUSYBOX_IMAGE,
    ContainerdInstance,
    cpuset_of_container,
    terminate_process,
)
from numaplane_harness.cri import CRIClient, CRIError

__all__ = [
    "ALL_CPUS",
    "CONFIG",
    "TOPOLOGY",
    "AgentProcess",
    "Created",
    "KillTrialResult",
    "Pods",
    "cpus_of",
    "expected_cpusets",
    "kill_restart_trial",
    "wait_consistent",
]

ALL_CPUS = frozenset({0, 1})
TOPOLOGY = synthetic(sockets=2, cores_per_numa=1, threads_per_core=1, memory_per_numa_bytes=1 << 30)
CONFIG = {"topologyManager": {"policy": "single-numa-node"}, "cpuManager": {"reservedCPUs": "0"}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class AgentProcess:
    """``numaplane agent`` as a subprocess (its own state dir, sockets and HTTP port)."""

    containerd: ContainerdInstance
    folder: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    log: Path | None = None

    @property
    def podresources(self) -> Path:
        return self.folder / "podres.sock"

    @property
    def state_file(self) -> Path:
        return self.folder / "state" / "agent_state.json"

    def start(self) -> None:
        (self.folder / "config.json").write_text(json.dumps(CONFIG))
        (self.folder / "topology.json").write_text(json.dumps(topology_to_dict(TOPOLOGY)))
        self.log = self.folder / f"agent-{int(time.time() * 1000)}.log"
        args = [
            sys.executable, "-c", "import sys; from numaplane.cli import main; sys.exit(main())", "agent",
            "--nri-socket", self.containerd.nri_socket,
            "--state-dir", str(self.folder / "state"),
            "--config", str(self.folder / "config.json"),
            "--topology", str(self.folder / "topology.json"),
            "--node-name", "e2e-node",
            "--podresources-socket", str(self.podresources),
            "--metrics-address", f"127.0.0.1:{self.port}",
            "--health-address", f"127.0.0.1:{self.port}",
            "--config-poll-interval", "0.2",
        ]  # fmt: skip
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)

    def http(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=2) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def wait_ready(self, timeout_seconds: float = 20) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_seconds
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"agent exited with {self.process.returncode}:\n{self.log_text()}")
            with contextlib.suppress(OSError):
                status, body = self.http("/readyz")
                if status == 200:
                    return dict(json.loads(body))
            if time.monotonic() > deadline:
                raise AssertionError(f"agent not ready in {timeout_seconds} s:\n{self.log_text()}")
            time.sleep(0.05)

    def metric(self, name: str, labels: str = "") -> float | None:
        _, text = self.http("/metrics")
        for line in text.splitlines():
            if line.startswith(name + (("{" + labels + "}") if labels else "")):
                return float(line.rsplit(" ", 1)[1])
        return None

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log and self.log.exists() else ""

    def kill9(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None:
            terminate_process(self.process, 15)

    def list(self) -> tuple[PodResources, ...]:
        async def go() -> tuple[PodResources, ...]:
            async with PodResourcesClient(str(self.podresources), timeout_seconds=5) as client:
                return await client.list()

        return asyncio.run(go())


@dataclass
class Created:
    name: str
    pod_id: str
    cgroup_parent: str
    container_id: str | None = None
    error: str = ""


class Pods:
    """Pods through CRI (blocking calls: run them in threads while an in-process agent serves)."""

    def __init__(self, containerd: ContainerdInstance) -> None:
        self.containerd = containerd
        self.cri: CRIClient = containerd.cri()
        self.created: list[Created] = []
        self._lock = threading.Lock()

    def pod(self, name: str, cpus: int) -> Created:
        """A Guaranteed pod with ``cpus`` CPUs (0: BestEffort) and one container ``main``, started."""
        uid = uuid.uuid4().hex
        qos = "kubepods" if cpus else "kubepods/besteffort"
        parent = f"{self.containerd.cgroup_root}/{qos}/pod{uid}"
        logs = self.containerd.workdir / "pod-logs" / uid
        logs.mkdir(parents=True, exist_ok=True)
        config = self.cri.pod_config(name, uid, namespace="e2e", cgroup_parent=parent, log_directory=str(logs))
        pod_id = self.cri.run_pod_sandbox(config)
        created = Created(name, pod_id, parent)
        with self._lock:
            self.created.append(created)
        ctr = self.cri.container_config(
            "main",
            BUSYBOX_IMAGE,
            ["sleep", "3600"],
            cpu_shares=max(2, cpus * 1024),
            cpu_quota=cpus * 100000,
            cpu_period=100000,
            memory_limit_in_bytes=(64 << 20) if cpus else 0,
        )
        try:
            cid = self.cri.create_container(pod_id, ctr, config)
            self.cri.start_container(cid)
            created.container_id = cid
        except CRIError as exc:
            created.error = exc.details
        return created

    def delete(self, created: Created) -> None:
        with contextlib.suppress(CRIError):
            self.cri.stop_pod_sandbox(created.pod_id)
        with contextlib.suppress(CRIError):
            self.cri.remove_pod_sandbox(created.pod_id)
        with self._lock:
            self.created.remove(created)

    def running(self) -> list[Created]:
        return [c for c in self.created if c.container_id is not None]

    def close(self) -> None:
        for created in list(self.created):
            self.delete(created)
        self.cri.close()


def cpus_of(created: Created) -> frozenset[int]:
    assert created.container_id is not None
    text = cpuset_of_container(created.cgroup_parent, created.container_id)[0]
    out: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(out)


def expected_cpusets(listed: tuple[PodResources, ...], running: list[Created]) -> dict[str, frozenset[int]]:
    """What each running container must have according to the agent: its exclusive CPUs or the pool.

    Also asserts that no CPU is held twice.
    """
    exclusive: dict[str, frozenset[int]] = {}
    seen: list[int] = []
    for pod in listed:
        for ctr in pod.containers:
            if ctr.cpu_ids:
                exclusive[pod.name] = frozenset(ctr.cpu_ids)
                seen.extend(ctr.cpu_ids)
    assert len(seen) == len(set(seen)), f"a CPU is held twice: {sorted(seen)}"
    pool = ALL_CPUS - set(seen)
    listed_names = {pod.name for pod in listed}
    missing = [c.name for c in running if c.name not in listed_names]
    assert not missing, f"running containers the agent does not track: {missing}"
    return {c.name: exclusive.get(c.name, pool) for c in running}


def wait_consistent(agent: AgentProcess, pods: Pods, timeout_seconds: float = 10) -> dict[str, frozenset[int]]:
    """Wait until every running container's cgroup matches the agent's state; return the mapping."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        want = expected_cpusets(agent.list(), pods.running())
        got = {c.name: cpus_of(c) for c in pods.running()}
        if got == want:
            return want
        if time.monotonic() > deadline:
            raise AssertionError(f"cgroups {got} != agent state {want}\n{agent.log_text()}")
        time.sleep(0.1)


@dataclass
class KillTrialResult:
    """What :func:`kill_restart_trial` measured (times in seconds from the restart)."""

    kills: int = 0
    ready_after: list[float] = field(default_factory=list)
    converged_after: list[float] = field(default_factory=list)
    restored: int = 0
    failures: list[str] = field(default_factory=list)
    created: int = 0
    rejected: int = 0
    deleted: int = 0
    created_while_down: int = 0
    waiting_at_restart: list[int] = field(default_factory=list)
    slowest_cri_call: float = 0.0
    unsolicited_calls: float = 0.0
    runtime_answers_after: bool = False

    @property
    def survived(self) -> int:
        """Kills after which the agent became ready, restored its checkpoint and converged."""
        return self.kills - len({f.split(":", 1)[0] for f in self.failures if f.startswith("kill ")})

    def summary(self) -> dict[str, Any]:
        def stats(values: list[float]) -> dict[str, float]:
            if not values:
                return {}
            ordered = sorted(values)
            return {
                "p50": round(statistics.median(ordered), 3),
                "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 3),
                "max": round(ordered[-1], 3),
            }

        return {
            "kills": self.kills,
            "survived": self.survived,
            "checkpoint_restored": self.restored,
            "ready_seconds": stats(self.ready_after),
            "converged_seconds": stats(self.converged_after),
            "pods_created": self.created,
            "pods_rejected": self.rejected,
            "pods_deleted": self.deleted,
            "created_while_agent_down": self.created_while_down,
            "waiting_containers_at_restart_max": max(self.waiting_at_restart, default=0),
            "slowest_cri_call_seconds": round(self.slowest_cri_call, 3),
            "unsolicited_update_calls": self.unsolicited_calls,
            "runtime_answers_after": self.runtime_answers_after,
            "failures": self.failures[:20],
        }


class _Churn:
    """Creates and deletes pods through CRI in a thread; :meth:`paused` stops it between two calls."""

    def __init__(self, pods: Pods, rng: random.Random, result: KillTrialResult, max_pods: int) -> None:
        self.pods = pods
        self.rng = rng
        self.result = result
        self.max_pods = max_pods
        self.agent_down = False
        self._go = threading.Event()
        self._go.set()
        self._stop = threading.Event()
        self._op = threading.Lock()
        self._seq = 0
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="pod-churn", daemon=True)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._go.wait()
                with self._op:
                    if self._stop.is_set():
                        return
                    self._step()
                time.sleep(self.rng.uniform(0.0, 0.1))
        except BaseException as exc:  # reported by the trial
            self.error = exc

    def _step(self) -> None:
        live = list(self.pods.created)
        started = time.monotonic()
        if live and (len(live) >= self.max_pods or self.rng.random() < 0.4):
            self.pods.delete(self.rng.choice(live))
            self.result.deleted += 1
        else:
            self._seq += 1
            cpus = 1 if self.rng.random() < 0.8 else 0
            created = self.pods.pod(f"churn-{self._seq}-{'gu' if cpus else 'be'}", cpus)
            self.result.created += 1
            if created.error:
                self.result.rejected += 1
            elif self.agent_down:
                self.result.created_while_down += 1
        self.result.slowest_cri_call = max(self.result.slowest_cri_call, time.monotonic() - started)

    @contextlib.contextmanager
    def paused(self) -> Any:
        self._go.clear()
        with self._op:
            try:
                yield
            finally:
                self._go.set()

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._go.set()
        self.thread.join(30)


def kill_restart_trial(
    containerd: ContainerdInstance,
    folder: Path,
    *,
    kills: int,
    seed: int,
    max_pods: int = 6,
    gap_seconds: tuple[float, float] = (0.2, 1.5),
    down_seconds: tuple[float, float] = (0.0, 0.6),
    ready_timeout_seconds: float = 30.0,
    converge_timeout_seconds: float = 15.0,
    say: Callable[[str], None] = lambda _line: None,
) -> KillTrialResult:
    """Kill ``numaplane agent`` with SIGKILL ``kills`` times at random moments while pods are created and
    deleted through CRI (Guaranteed 1-CPU pods mostly, BestEffort ones too), restart it each time, and
    measure (see :class:`KillTrialResult`).

    After each restart, with the churn still running, the agent must answer ``/readyz`` within
    ``ready_timeout_seconds`` with its checkpoint ``restored``. Then the churn pauses, one BestEffort pod
    is created — the runtime request whose answer carries the cpuset changes owed to running containers
    (the agent never sends them unsolicited to containerd 1.7, see ``nri/runtimes.py``) — and every
    running container's cgroup must match the agent's state within ``converge_timeout_seconds``: no
    CPU held twice, exclusive CPUs pinned, the shared containers (also Guaranteed ones that wait for a
    CPU) on the pool. CRI calls have a 20 s deadline: a wedged runtime fails the trial."""
    rng = random.Random(seed)
    result = KillTrialResult()
    pods = Pods(containerd)
    pods.cri.timeout_seconds = 20.0
    agent = AgentProcess(containerd, folder)
    churn = _Churn(pods, rng, result, max_pods)
    try:
        agent.start()
        agent.wait_ready(ready_timeout_seconds)
        churn.start()
        for kill in range(1, kills + 1):
            time.sleep(rng.uniform(*gap_seconds))
            if churn.error is not None:
                raise churn.error
            result.unsolicited_calls += agent.metric("numaplane_agent_nri_unsolicited_calls_total") or 0.0
            churn.agent_down = True
            agent.kill9()
            restarted = time.monotonic()
            time.sleep(rng.uniform(*down_seconds))
            agent.start()
            churn.agent_down = False
            result.kills = kill
            try:
                ready = agent.wait_ready(ready_timeout_seconds)
            except AssertionError:
                result.failures.append(f"kill {kill}: not ready in {ready_timeout_seconds} s")
                say(f"kill {kill}: NOT READY\n{agent.log_text()[-1500:]}")
                agent.kill9()
                agent.start()
                agent.wait_ready(ready_timeout_seconds)
                continue
            result.ready_after.append(time.monotonic() - restarted)
            if ready.get("checkpoint") == "restored":
                result.restored += 1
            else:
                result.failures.append(f"kill {kill}: checkpoint {ready.get('checkpoint')}")
            result.waiting_at_restart.append(int(agent.metric("numaplane_agent_unpinned_containers") or 0))
            with churn.paused():
                nudge = pods.pod(f"nudge-{kill}", 0)
                result.created += 1
                if nudge.error:
                    result.failures.append(f"kill {kill}: a BestEffort pod was refused: {nudge.error}")
                try:
                    wait_consistent(agent, pods, converge_timeout_seconds)
                except AssertionError as exc:
                    result.failures.append(f"kill {kill}: not converged: {str(exc)[:300]}")
                else:
                    result.converged_after.append(time.monotonic() - restarted)
            say(
                f"kill {kill}/{kills}: ready {result.ready_after[-1]:.2f} s, checkpoint {ready.get('checkpoint')},"
                f" running {len(pods.running())}, waiting {result.waiting_at_restart[-1]}"
            )
        churn.stop()
        if churn.error is not None:
            raise churn.error
        result.unsolicited_calls += agent.metric("numaplane_agent_nri_unsolicited_calls_total") or 0.0
        with CRIClient(containerd.address, containerd.cri_pb, timeout_seconds=5.0) as cri:
            cri.list_pod_sandboxes()
        result.runtime_answers_after = True
    finally:
        churn.stop()
        agent.stop()
        pods.cri.timeout_seconds = 5.0  # a wedged runtime must not stall the clean-up for minutes
        pods.close()
    return result
