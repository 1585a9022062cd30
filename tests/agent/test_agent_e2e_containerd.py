"""End to end: ``numaplane agent`` against a real containerd 1.7 with NRI, pods created through CRI.

The machine is small (2 CPUs, 1 NUMA node), so the agent is given a topology file that describes the
same two CPUs as two NUMA nodes (cpu 0 on node 0, cpu 1 on node 1; the memory policy stays ``None``,
so no memory node is ever written) and reserves CPU 0: one container can hold CPU 1 exclusively,
everything else shares the pool. Pods sit under ``<cgroup root>/kubepods[/besteffort]/pod<uid>`` as
the kubelet's cgroupfs driver puts them, so the agent derives their QoS class as on a real node.

What is checked, through the containers' cgroups (``cpuset.cpus``) and the agent's PodResources socket:
exclusive and shared cpusets; an unalignable pod failing CreateContainer with the typed reason; the
shared pool growing back when the exclusive pod goes; kill -9 of the agent in the middle of a pod
stream and a restart (no CPU held twice, every running container's cpuset matches the state); a
corrupted checkpoint; a containerd restart; an NRI disconnect with a container created meanwhile; a pod
with an init container and an app container admitted as a whole from the node's Pods (the fake API
server), the app container reusing the init container's CPU as on a kubelet, against the one-at-a-time
fallback.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from numaplane.agent.checkpoint import CheckpointIdentity, encode
from numaplane.agent.daemon import Agent, AgentOptions
from numaplane_harness.agenttrial import (
    ALL_CPUS,
    CONFIG,
    TOPOLOGY,
    AgentProcess,
    Created,
    Pods,
    cpus_of,
    wait_consistent,
)
from numaplane_harness.containerd import BUSYBOX_IMAGE, ContainerdInstance, make_containerd_fixture
from numaplane_harness.cri import CRIError

pytestmark = pytest.mark.timeout(120)

agent_containerd = make_containerd_fixture("agent_containerd")


@pytest.fixture
def pods(agent_containerd: ContainerdInstance) -> Iterator[Pods]:
    p = Pods(agent_containerd)
    try:
        yield p
    finally:
        p.close()


@pytest.fixture
def agent(agent_containerd: ContainerdInstance, short_tmp: Path) -> Iterator[AgentProcess]:
    a = AgentProcess(agent_containerd, short_tmp)
    try:
        yield a
    finally:
        a.stop()


def test_exclusive_shared_rejection_and_pool_growth(agent: AgentProcess, pods: Pods) -> None:
    agent.start()
    agent.wait_ready()
    assert agent.http("/healthz")[0] == 200
    gu = pods.pod("gu", 1)
    be = pods.pod("be", 0)
    assert not gu.error and not be.error
    assert cpus_of(gu) == {1} and cpus_of(be) == {0}
    too_big = pods.pod("too-big", 2)
    assert too_big.container_id is None
    assert "TopologyAffinityError" in too_big.error and "e2e/too-big" in too_big.error
    assert wait_consistent(agent, pods) == {"gu": {1}, "be": {0}}
    pods.delete(gu)
    # containerd 1.7 answers the sandbox's stop and removal with empty messages: the pool growth is owed
    # (an unsolicited UpdateContainers can deadlock containerd 1.7) and travels in the runtime's next
    # request that takes an answer with updates: the exited container's StopContainer, when containerd
    # sends it after the sandbox's stop (it does so asynchronously), else another pod's CreateContainer
    owed = agent.metric("numaplane_agent_owed_updates")
    assert (owed, cpus_of(be)) in ((1.0, frozenset({0})), (0.0, ALL_CPUS))
    nudge = pods.pod("nudge", 0)
    assert cpus_of(be) == ALL_CPUS and cpus_of(nudge) == ALL_CPUS  # the pool grew back
    assert agent.metric("numaplane_agent_owed_updates") == 0
    wait_consistent(agent, pods)
    assert agent.metric("numaplane_agent_nri_unsolicited_calls_total") == 0
    assert agent.metric("numaplane_agent_admissions_total", 'reason="TopologyAffinityError",result="rejected"') == 1


def test_kill_9_in_a_pod_stream_then_restart(agent: AgentProcess, pods: Pods) -> None:
    agent.start()
    agent.wait_ready()
    plan = [("s0-gu", 1), ("s1-be", 0), ("s2-gu", 1), ("s3-be", 0), ("s4-gu", 1), ("s5-be", 0), ("s6-be", 0)]
    killed = threading.Event()

    def stream() -> None:
        for i, (name, cpus) in enumerate(plan):
            if i == 3:
                agent.kill9()  # mid-stream; the next pods are created while the agent is gone
                killed.set()
            pods.pod(name, cpus)

    worker = threading.Thread(target=stream)
    worker.start()
    worker.join(60)
    assert killed.is_set() and not worker.is_alive()
    by_name = {c.name: c for c in pods.created}
    assert "TopologyAffinityError" in by_name["s2-gu"].error  # CPU 1 was taken by s0-gu
    assert by_name["s4-gu"].container_id is not None  # created unpinned while the agent was dead
    agent.start()
    ready = agent.wait_ready()
    assert ready["checkpoint"] == "restored"
    want = wait_consistent(agent, pods)
    assert want["s0-gu"] == {1} and want["s4-gu"] == {0}  # s4 cannot get CPU 1: it stays in the pool
    assert all(want[c.name] == {0} for c in pods.running() if c.name != "s0-gu")
    assert agent.metric("numaplane_agent_adoptions_total", 'result="failed"') == 1


def _damage(state_file: Path, change: str) -> None:
    """Damage the agent's own checkpoint: one byte of content (the checksum no longer matches), or one
    inconsistency with the checksum recomputed (intact as a file; only restoring it shows the problem)."""
    if change == "checksum-mismatch":
        state_file.write_bytes(state_file.read_bytes().replace(b'"exclusive":"1"', b'"exclusive":"0"'))
        return
    doc = json.loads(state_file.read_bytes())
    data = doc["data"]
    manager = data["manager"]
    gu = next(uid for uid, a in manager["admissions"].items() if a["containers"][0]["allocations"][0].get("cpus"))
    if change == "cpu-the-machine-lacks":  # issue 25 item 3: was KeyError: 19 in policy/builtin.py, at every start
        manager["plugins"]["cpu"]["entries"][gu]["main"] = "1,19"
        manager["admissions"][gu]["containers"][0]["allocations"][0]["cpus"] = "1,19"
    else:  # "int-device-id-in-reuse", issue 25 item 3: was TypeError in device_sort_key, at every start
        manager["plugins"].setdefault("devices", {})["reuse"] = {gu: {"example.com/gpu": [7]}}
    state_file.write_bytes(encode(data, CheckpointIdentity(doc["node"], doc["topology"])))


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ("checksum-mismatch", "checksum mismatch"),
        ("cpu-the-machine-lacks", "CPU 19 is not one of this machine's"),
        ("int-device-id-in-reuse", "cannot restore the agent state: TypeError"),
    ],
)
def test_corrupted_checkpoint_is_moved_aside_and_rebuilt(
    agent: AgentProcess, pods: Pods, change: str, error: str
) -> None:
    """The agent starts, sets the file aside, rebuilds from the runtime (Synchronize) and pins as before."""
    agent.start()
    agent.wait_ready()
    pods.pod("gu", 1)
    pods.pod("be", 0)
    wait_consistent(agent, pods)
    agent.stop()
    _damage(agent.state_file, change)
    agent.start()
    ready = agent.wait_ready()
    assert ready["checkpoint"] == "corrupted"
    assert list(agent.state_file.parent.glob("agent_state.json.corrupted-*"))
    assert agent.metric("numaplane_agent_checkpoint_loads_total", 'result="corrupted"') == 1
    assert wait_consistent(agent, pods) == {"gu": {1}, "be": {0}}
    # structured logs: one JSON object per line; the bad file is reported with its kind and cause
    events = [json.loads(line) for line in agent.log_text().splitlines() if line.startswith("{")]
    reported = [e for e in events if e.get("event", "").startswith("checkpoint unusable")]
    assert reported and reported[0]["kind"] == "corrupted" and reported[0]["level"] == "error"
    assert error in reported[0]["error"]


def restart_containerd(instance: ContainerdInstance) -> None:
    instance.process.terminate()
    instance.process.wait(15)
    env = dict(os.environ)
    env["PATH"] = f"{instance.packages.bin_dir}:{env.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}"
    with open(instance.log_path, "ab") as log:
        instance.process = subprocess.Popen(
            [str(instance.packages.containerd), "--config", str(instance.workdir / "config.toml")],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    deadline = time.monotonic() + 30
    while instance.ctr("version", timeout=10).returncode != 0:
        assert time.monotonic() < deadline, instance.log_tail()
        time.sleep(0.1)


def test_containerd_restart(agent: AgentProcess, pods: Pods, agent_containerd: ContainerdInstance) -> None:
    agent.start()
    agent.wait_ready()
    gu = pods.pod("gu", 1)
    pods.pod("be", 0)
    wait_consistent(agent, pods)
    registrations = agent.metric("numaplane_agent_nri_registrations_total")
    restart_containerd(agent_containerd)
    deadline = time.monotonic() + 20
    while agent.metric("numaplane_agent_nri_registrations_total") == registrations:
        assert time.monotonic() < deadline, agent.log_text()
        time.sleep(0.1)
    agent.wait_ready()
    assert wait_consistent(agent, pods) == {"gu": {1}, "be": {0}}
    pods.delete(gu)
    again = pods.pod("gu-again", 1)
    assert cpus_of(again) == {1}
    wait_consistent(agent, pods)


async def test_nri_disconnect_then_reconnect_repins(
    agent_containerd: ContainerdInstance, pods: Pods, short_tmp: Path
) -> None:
    (short_tmp / "config.json").write_text(json.dumps(CONFIG))
    options = AgentOptions(
        nri_socket=agent_containerd.nri_socket,
        state_dir=short_tmp / "state",
        config_file=short_tmp / "config.json",
        node_name="e2e-node",
        podresources_socket=str(short_tmp / "podres.sock"),
        nri_backoff_initial_seconds=2.0,  # a reconnect gap wide enough to create a pod in it
    )
    agent = Agent(options, topology=TOPOLOGY)
    await agent.start()
    try:
        await agent.wait_ready(10)
        be = await asyncio.to_thread(pods.pod, "be", 0)
        assert cpus_of(be) == ALL_CPUS
        assert agent.nri is not None
        agent.nri.disconnect()
        gu = await asyncio.to_thread(pods.pod, "gu", 1)  # nobody pins it: it runs on every CPU
        assert gu.container_id is not None and cpus_of(gu) == ALL_CPUS
        async with asyncio.timeout(15):
            while agent.nri.registrations < 2 or cpus_of(gu) != {1} or cpus_of(be) != {0}:
                await asyncio.sleep(0.05)
        assert agent.state is not None and agent.state.check() == []
    finally:
        await agent.stop()


def init_app_pod_doc(node: str) -> dict[str, Any]:
    """A Guaranteed pod: an init container of 1 CPU, then an app container of 1 CPU."""
    q = {"cpu": "1", "memory": "64Mi"}
    resources = {"requests": q, "limits": q}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "init-app", "namespace": "e2e"},
        "spec": {
            "nodeName": node,
            "initContainers": [{"name": "init", "image": "busybox", "resources": resources}],
            "containers": [{"name": "app", "image": "busybox", "resources": resources}],
        },
    }


def run_init_then_app(pods: Pods, uid: str) -> tuple[str, Created]:
    """As a kubelet runs the pod: sandbox, the init container (it reports its CPUs and exits on its
    own), then — once it has exited — the app container. Returns (what the init container saw, app)."""
    cri = pods.cri
    parent = f"{pods.containerd.cgroup_root}/kubepods/pod{uid}"
    logs = pods.containerd.workdir / "pod-logs" / uid
    logs.mkdir(parents=True, exist_ok=True)
    config = cri.pod_config("init-app", uid, namespace="e2e", cgroup_parent=parent, log_directory=str(logs))
    pod_id = cri.run_pod_sandbox(config)
    init = Created("init", pod_id, parent)
    app = Created("app", pod_id, parent)
    pods.created.append(app)  # delete() stops and removes the sandbox once

    def ctr(name: str, command: list[str]) -> Any:
        return cri.container_config(
            name,
            BUSYBOX_IMAGE,
            command,
            cpu_shares=1024,
            cpu_quota=100000,
            cpu_period=100000,
            memory_limit_in_bytes=64 << 20,
        )

    init.container_id = cri.create_container(
        pod_id, ctr("init", ["grep", "Cpus_allowed_list", "/proc/self/status"]), config
    )
    cri.start_container(init.container_id)
    deadline = time.monotonic() + 20
    while cri.container_state(init.container_id) != "CONTAINER_EXITED":
        assert time.monotonic() < deadline, "the init container did not exit"
        time.sleep(0.05)
    seen = (logs / "init.log").read_text()
    try:
        app.container_id = cri.create_container(pod_id, ctr("app", ["sleep", "3600"]), config)
        cri.start_container(app.container_id)
    except CRIError as exc:
        app.container_id = None
        app.error = exc.details
    return seen, app


def moved_at_stop(agent: Agent) -> float:
    """Shared containers told a grown pool by a StopContainer (in its answer, at once or owed and carried
    by a later answer)."""
    sample = agent.metrics.registry.get_sample_value
    name = "numaplane_agent_container_updates_total"
    return sum(sample(name, {"path": "stop", "result": r}) or 0.0 for r in ("ok", "in-reply"))


async def test_init_container_cpus_are_reused_by_the_app_container(
    agent_containerd: ContainerdInstance, pods: Pods, short_tmp: Path, fake_kube: Any
) -> None:
    """With the node's Pods (``--watch-pods``) the agent admits the pod as a whole, as the kubelet:
    the init container's exclusive CPU is reused by the app container (seen from inside the init
    container and in the app container's cgroup) and never returns to the shared pool in between.
    Without the Pod (one container at a time) the init container's exit — containerd 1.7 reports it
    with StopContainer — keeps CPU 1 (a stopped container keeps its allocation for a restart); the
    app container's creation, the first of another name in the sandbox, releases it and the app
    container is allocated afresh (CPU 1 again): the BestEffort container is never moved onto it."""
    from numaplane.kube.resources import POD

    (short_tmp / "config.json").write_text(json.dumps(CONFIG))

    def options(state: str) -> AgentOptions:
        return AgentOptions(
            nri_socket=agent_containerd.nri_socket,
            state_dir=short_tmp / state,
            config_file=short_tmp / "config.json",
            node_name="e2e-node",
            podresources_socket=None,
            nri_backoff_initial_seconds=0.1,
        )

    created = await fake_kube.create(POD, init_app_pod_doc("e2e-node"))
    uid = str(created["metadata"]["uid"])
    agent = Agent(options("state-pods"), topology=TOPOLOGY, kube=fake_kube)
    await agent.start()
    try:
        await agent.wait_ready(10)
        assert agent.pods is not None and agent.state is not None
        await asyncio.wait_for(agent.pods.informer.wait_for_sync(), 10)
        be = await asyncio.to_thread(pods.pod, "be", 0)
        seen, app = await asyncio.to_thread(run_init_then_app, pods, uid)
        assert "Cpus_allowed_list:\t1" in seen  # the init container ran on its exclusive CPU
        assert not app.error and cpus_of(app) == {1}  # ... and the app container reuses it
        assert cpus_of(be) == {0}
        assert set(agent.state.manager.pods) == {uid} and agent.state.check() == []
        # the init container's exit (StopContainer) moved nothing: its CPU stayed with the pod
        assert moved_at_stop(agent) == 0
        # the pod goes: its CPU returns to the pool with the runtime's next request (an answer, never an
        # unsolicited UpdateContainers on containerd 1.7)
        await asyncio.to_thread(pods.delete, app)
        await asyncio.to_thread(pods.pod, "nudge", 0)
        assert cpus_of(be) == ALL_CPUS
        assert agent.state.manager.pods == {} and agent.state.check() == []
    finally:
        await agent.stop()

    # the same pod without API access: one container at a time
    agent = Agent(options("state-nri"), topology=TOPOLOGY)
    await agent.start()
    try:
        await agent.wait_ready(10)
        be = next(c for c in pods.running() if c.name == "be")
        seen, app = await asyncio.to_thread(run_init_then_app, pods, uuid.uuid4().hex)
        assert "Cpus_allowed_list:\t1" in seen
        assert not app.error and cpus_of(app) == {1} and cpus_of(be) == {0}
        assert moved_at_stop(agent) == 0  # CPU 1 stayed out of the pool between the two containers
        assert agent.state is not None and agent.state.check() == []
    finally:
        await agent.stop()


async def test_a_stopped_container_keeps_its_cpu_for_its_restart_without_the_pod(
    agent_containerd: ContainerdInstance, pods: Pods, short_tmp: Path
) -> None:
    """Issue 24 item 4, on the real containerd, without the node's Pods: a Guaranteed container that
    stopped (a crash: CRI StopContainer, the NRI StopContainer event) keeps CPU 1; a pod bound
    meanwhile is refused instead of taking it; the kubelet's restart (same pod and name, attempt 1)
    runs on CPU 1 again; removing the old container releases nothing; the sandbox's stop releases
    the CPU. Before: the stop gave CPU 1 to the pool, the new pod took it, the restart was refused."""
    (short_tmp / "config.json").write_text(json.dumps(CONFIG))
    agent = Agent(
        AgentOptions(
            nri_socket=agent_containerd.nri_socket,
            state_dir=short_tmp / "state-restart",
            config_file=short_tmp / "config.json",
            node_name="e2e-node",
            podresources_socket=None,
            nri_backoff_initial_seconds=0.1,
        ),
        topology=TOPOLOGY,
    )
    await agent.start()
    try:
        await agent.wait_ready(10)
        crash = await asyncio.to_thread(pods.pod, "crash", 1)
        assert not crash.error and crash.container_id is not None and cpus_of(crash) == {1}
        old_id = crash.container_id
        await asyncio.to_thread(pods.cri.stop_container, old_id)
        thief = await asyncio.to_thread(pods.pod, "thief", 1)
        assert thief.container_id is None and "TopologyAffinityError" in thief.error, thief.error
        await asyncio.to_thread(pods.delete, thief)

        def restart() -> str:
            uid = crash.cgroup_parent.rsplit("/pod", 1)[1]
            logs = str(pods.containerd.workdir / "pod-logs" / uid)
            config = pods.cri.pod_config(
                "crash", uid, namespace="e2e", cgroup_parent=crash.cgroup_parent, log_directory=logs
            )
            return pods.cri.create_container(crash.pod_id, restarted_config(pods), config)

        crash.container_id = await asyncio.to_thread(restart)
        await asyncio.to_thread(pods.cri.start_container, crash.container_id)
        assert cpus_of(crash) == {1}
        await asyncio.to_thread(pods.cri.remove_container, old_id)
        assert agent.state is not None and agent.state.check() == []
        assert [r.container_id for r in agent.state.records.values() if r.exclusive] == [crash.container_id]
        await asyncio.to_thread(pods.delete, crash)
        after = await asyncio.to_thread(pods.pod, "after", 1)
        assert not after.error and cpus_of(after) == {1}  # the sandbox's stop released it
        assert agent.state.check() == []
    finally:
        await agent.stop()


def restarted_config(pods: Pods) -> Any:
    """The kubelet's restart of container ``main``: the same name, attempt 1."""
    ctr = pods.cri.container_config(
        "main",
        BUSYBOX_IMAGE,
        ["sleep", "3600"],
        cpu_shares=1024,
        cpu_quota=100000,
        cpu_period=100000,
        memory_limit_in_bytes=64 << 20,
    )
    ctr.metadata.attempt = 1
    return ctr
