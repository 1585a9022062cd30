"""Every state the agent can reach round-trips through its checkpoint (issue 25 item 16).

A checkpoint the agent wrote must always restore: random streams of the NRI events the state machine
serves (creations of Guaranteed integer / fractional, Burstable and BestEffort containers, stops,
removals, sandbox removals, Synchronize after a restart with containers created meanwhile), under every
Topology Manager policy and scope, on a 2-socket and on the trial's 2-CPU/2-NUMA machine; after every
step the snapshot is written as the checkpoint writer writes it, read back, restored into a fresh
state, and must give the same snapshot again.
"""

from __future__ import annotations

from typing import Any

import state_helpers as ev
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numaplane.agent.checkpoint import CheckpointIdentity, decode, encode, topology_digest
from numaplane.agent.errors import AdmissionRejected
from numaplane.agent.state import NodeAgentState
from numaplane.nri.events import RuntimeContainer, Sandbox
from numaplane.policy.manager import ResourceManager
from numaplane.topology.model import Topology, synthetic

MACHINES = {
    "2x4x2": synthetic(sockets=2, cores_per_numa=4, threads_per_core=2),
    "trial-2cpu-2numa": synthetic(sockets=2, cores_per_numa=1, threads_per_core=1),
}

_OP = st.one_of(
    st.tuples(st.just("create"), st.integers(0, 7), st.sampled_from(["g1", "g2", "frac", "burst", "best"])),
    st.tuples(st.just("stop"), st.integers(0, 7), st.just("")),
    st.tuples(st.just("remove"), st.integers(0, 7), st.just("")),
    st.tuples(st.just("remove_pod"), st.integers(0, 7), st.just("")),
    st.tuples(st.just("restart"), st.integers(0, 7), st.sampled_from(["g1", "frac", "best"])),
)


def _container(pod: Sandbox, kind: str, cid: str) -> RuntimeContainer:
    if kind == "g1":
        return ev.guaranteed(pod, cid=cid)
    if kind == "g2":
        return ev.guaranteed(pod, n=2, cid=cid)
    if kind == "frac":
        return ev.container(pod, cid=cid, cpu_milli=500, cpu_limit_milli=500, memory=64 << 20)
    return ev.container(pod, cid=cid, cpu_milli=250 if kind == "burst" else 0)


def _qos(kind: str) -> str:
    return {"burst": "Burstable", "best": "BestEffort"}.get(kind, "Guaranteed")


def _round_trip(state: NodeAgentState, topology: Topology, config: dict[str, Any]) -> NodeAgentState:
    me = CheckpointIdentity("node-a", topology_digest(topology))
    snap = state.snapshot()
    fresh = NodeAgentState(ResourceManager(topology, config))
    fresh.restore(decode(encode(snap, me), me))
    assert fresh.snapshot() == snap
    return fresh


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    machine=st.sampled_from(sorted(MACHINES)),
    policy=st.sampled_from(["none", "best-effort", "restricted", "single-numa-node"]),
    scope=st.sampled_from(["container", "pod"]),
    ops=st.lists(_OP, max_size=14),
)
def test_every_reachable_state_round_trips(machine: str, policy: str, scope: str, ops: list[Any]) -> None:
    topology = MACHINES[machine]
    config = {"topologyManager": {"policy": policy, "scope": scope}, "cpuManager": {"reservedCPUs": "0"}}
    state = NodeAgentState(ResourceManager(topology, config))
    created: dict[str, tuple[Sandbox, RuntimeContainer]] = {}
    for serial, (op, index, kind) in enumerate(ops, 1):
        name = f"p{index}"
        if op == "create":
            pod = ev.sandbox(name, qos=_qos(kind))
            ctr = _container(pod, kind, f"c{serial}")
            try:
                state.create(pod, ctr)
            except AdmissionRejected:
                pass
            else:
                # a container re-created under the same pod and name replaces its predecessor (exited)
                created = {c: pc for c, pc in created.items() if (pc[0].id, pc[1].name) != (pod.id, ctr.name)}
                created[ctr.id] = (pod, ctr)
        elif op == "stop" and created:
            cid = sorted(created)[index % len(created)]
            state.stop(cid)
        elif op == "remove" and created:
            cid = sorted(created)[index % len(created)]
            pod, ctr = created.pop(cid)
            state.remove_container(cid, pod.uid, ctr.name, pod.id)
        elif op == "remove_pod":
            pod = ev.sandbox(name)
            state.remove_pod(pod.id, pod.uid)
            created = {c: pc for c, pc in created.items() if pc[0].id != pod.id}
        elif op == "restart":
            # the agent restarts from its checkpoint; meanwhile a container was created without it (running,
            # on every CPU): Synchronize adopts what fits, the rest waits in the shared pool
            state = _round_trip(state, topology, config)
            pod = ev.sandbox(f"away{serial}", qos=_qos(kind))
            away = _container(pod, kind, f"c{serial}")
            running = [c for _, c in created.values()] + [away]
            pods = {p.id: p for p, _ in created.values()} | {pod.id: pod}
            state.synchronize(list(pods.values()), running)
            created[away.id] = (pod, away)
        _round_trip(state, topology, config)
