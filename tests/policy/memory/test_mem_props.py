"""Properties of the static Memory Manager policy: hints equal a literal transcription of the
kubelet's calculateHints; remove restores the machine exactly; no over-allocation; the state it
produces passes its own Start validation; snapshots round-trip exactly."""

from __future__ import annotations

import contextlib
import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numaplane.policy.hints import NUMAMask, TopologyHint, iterate_masks
from numaplane.policy.memory import MemoryManagerError, MemoryPolicy
from numaplane.policy.memory_state import MemoryState, MemoryTable, NUMAMemory, NUMANodeState
from numaplane.resources.pod import Pod, parse_pod

GI = 1 << 30
MI = 1 << 20


def pod(uid: str, containers: list[tuple[str, int, int, str]]) -> Pod:
    """containers: (name, memory MiB, hugepages-1Gi count, kind in app|init|sidecar)."""
    inits, apps = [], []
    for name, mem, huge, kind in containers:
        res = {"cpu": "1", "memory": f"{mem}Mi"}
        if huge:
            res["hugepages-1Gi"] = f"{huge}Gi"
        doc: dict[str, Any] = {"name": name, "resources": {"requests": res, "limits": res}}
        if kind == "sidecar":
            doc["restartPolicy"] = "Always"
        (apps if kind == "app" else inits).append(doc)
    return parse_pod({"metadata": {"name": uid, "uid": uid}, "spec": {"initContainers": inits, "containers": apps}})


# -- a literal transcription of the kubelet's calculateHints, for comparison -----------------------
def reference_hints(
    machine: dict[int, NUMANodeState], requested: dict[str, int], reusable: dict[int, dict[str, int]]
) -> dict[str, list[TopologyHint]]:
    nodes = sorted(machine)
    min_size = len(nodes)
    found: list[NUMAMask] = []
    for mask in iterate_masks(nodes):
        ids = mask.ids()
        single = len(ids) == 1
        free = dict.fromkeys(requested, 0)
        alloc = dict.fromkeys(requested, 0)
        for n in ids:
            for r in requested:
                t = machine[n].memory.get(r)
                free[r] += t.free if t else 0
                alloc[r] += t.allocatable if t else 0
        if any(alloc[r] < size for r, size in requested.items()):
            continue
        min_size = min(min_size, mask.count())
        if single and len(machine[ids[0]].cells) > 1:
            continue
        if any(
            not single
            and machine[n].assignments > 0
            and (len(machine[n].cells) == 1 or sorted(machine[n].cells) != list(ids))
            for n in ids
        ):
            continue
        if any(free[r] + reusable.get(mask.bits, {}).get(r, 0) < size for r, size in requested.items()):
            continue
        found.append(mask)
    if not found:
        return {}
    return {r: [TopologyHint(m, m.count() == min_size) for m in found] for r in requested}


@st.composite
def machine_states(draw: st.DrawFn) -> dict[int, NUMANodeState]:
    n = draw(st.integers(1, 5))
    nodes = (
        sorted(draw(st.sets(st.integers(0, 300), min_size=n, max_size=n))) if draw(st.booleans()) else list(range(n))
    )
    machine: dict[int, NUMANodeState] = {}
    for nid in nodes:
        tables = {}
        for r in draw(st.sampled_from([["memory"], ["memory", "hugepages-1Gi"], ["hugepages-1Gi"]])):
            alloc = draw(st.integers(0, 8)) * GI // 2
            free = draw(st.integers(0, alloc // (GI // 2))) * GI // 2
            tables[r] = MemoryTable(alloc, 0, alloc, alloc - free, free)
        group = sorted({nid, *draw(st.lists(st.sampled_from(nodes), max_size=2))})
        if draw(st.integers(0, 5)) == 0:
            group = [nodes[0], nid] if nodes[0] != nid else [nid, 999]
        machine[nid] = NUMANodeState(draw(st.integers(0, 3)), tables, group)
    return machine


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    machine_states(),
    st.dictionaries(
        st.sampled_from(["memory", "hugepages-1Gi"]), st.integers(0, 20).map(lambda x: x * GI // 2), min_size=1
    ),
    st.dictionaries(
        st.integers(1, 15), st.dictionaries(st.sampled_from(["memory", "hugepages-1Gi"]), st.integers(0, 4 * GI))
    ),
)
def test_hints_equal_the_kubelet_transcription(
    machine: dict[int, NUMANodeState], requested: dict[str, int], reusable: dict[int, dict[str, int]]
) -> None:
    nodes = sorted(machine)
    # reusable masks are over the real node ids
    reusable = {
        NUMAMask.from_ids(nodes[k] for k in range(len(nodes)) if b >> k & 1).bits: v for b, v in reusable.items()
    }
    policy = MemoryPolicy(None, {0: {"memory": 1}}, MemoryState(machine))
    doc = policy.to_dict()
    doc["initContainersReusableMemory"] = {"pod": {str(b): v for b, v in reusable.items()}}
    policy.restore(doc)
    assert policy.calculate_hints("pod", requested) == reference_hints(machine, requested, reusable)


def machine_info(rnd: random.Random) -> tuple[list[NUMAMemory], dict[int, dict[str, int]]]:
    ids = sorted(rnd.sample([0, 1, 2, 3, 64, 250, 251], rnd.randint(1, 4)))
    machine = [NUMAMemory(i, rnd.choice([3, 4]) * GI, ((GI, rnd.randint(0, 2)),)) for i in ids]
    return machine, {i: {"memory": 256 * MI} for i in ids}


def check_invariants(policy: MemoryPolicy) -> None:
    for node in policy.state.machine.values():
        for t in node.memory.values():
            assert t.free >= 0 and t.reserved >= 0
            assert t.free + t.reserved == t.allocatable
        assert node.assignments >= 0


def random_pod(rnd: random.Random, uid: str) -> Pod:
    containers = []
    for i in range(rnd.randint(0, 2)):
        containers.append((f"i{i}", rnd.choice([128, 512, 1024]), rnd.randint(0, 1), rnd.choice(["init", "sidecar"])))
    for i in range(rnd.randint(1, 2)):
        containers.append((f"c{i}", rnd.choice([128, 512, 1024, 2048, 4096]), rnd.randint(0, 1), "app"))
    return pod(uid, containers)


def random_hint(rnd: random.Random, policy: MemoryPolicy, p: Pod, name: str) -> TopologyHint:
    container = p.container(name)
    assert container is not None
    choice = rnd.random()
    hints = policy.hints(p, container)
    if choice < 0.5 and hints:
        return rnd.choice(next(iter(hints.values())))
    if choice < 0.8:
        return TopologyHint(None, rnd.random() < 0.5)
    nodes = sorted(policy.state.machine)
    return TopologyHint(NUMAMask.from_ids(rnd.sample(nodes, rnd.randint(1, len(nodes)))), rnd.random() < 0.5)


@settings(max_examples=150, deadline=None)
@given(st.randoms(use_true_random=False))
def test_allocations_never_overcommit_validate_at_start_and_remove_restores_exactly(rnd: random.Random) -> None:
    machine, reserved = machine_info(rnd)
    policy = MemoryPolicy(machine, reserved)
    policy.start()
    empty = policy.state.copy()
    admitted: list[Pod] = []
    for k in range(rnd.randint(1, 8)):
        p = random_pod(rnd, f"pod{k}")
        for c in p.all_containers():
            before = policy.to_dict()
            try:
                policy.allocate(p, c, random_hint(rnd, policy, p, c.name))
            except MemoryManagerError:
                assert policy.to_dict() == before  # all or nothing
            check_invariants(policy)
        admitted.append(p)
        # the kubelet would restart fine with this state: Start recomputes it from the assignments
        MemoryPolicy(machine, reserved, policy.state.copy()).start()
    rnd.shuffle(admitted)
    for p in admitted:
        names = [c.name for c in p.all_containers()]
        rnd.shuffle(names)
        for name in names:
            policy.remove(p.uid, name)
            check_invariants(policy)
    assert policy.state == empty


@settings(max_examples=100, deadline=None)
@given(st.randoms(use_true_random=False))
def test_snapshot_and_checkpoint_round_trip_exactly(rnd: random.Random) -> None:
    machine, reserved = machine_info(rnd)
    policy = MemoryPolicy(machine, reserved)
    policy.start()
    for k in range(rnd.randint(0, 5)):
        p = random_pod(rnd, f"pod{k}")
        for c in p.all_containers():
            with contextlib.suppress(MemoryManagerError):
                policy.allocate(p, c, random_hint(rnd, policy, p, c.name))
    copy = MemoryPolicy(machine, reserved)
    copy.restore(policy.to_dict())
    assert copy.to_dict() == policy.to_dict()
    assert copy.state == policy.state
    name, state = MemoryState.from_checkpoint(policy.to_checkpoint())
    assert name == "Static" and state == policy.state
    probe = random_pod(rnd, "probe")
    for c in probe.all_containers():
        assert copy.hints(probe, c) == policy.hints(probe, c)


def test_single_container_allocate_then_remove_restores_each_node() -> None:
    policy = MemoryPolicy([NUMAMemory(0, 2 * GI), NUMAMemory(1, 2 * GI)], {0: {"memory": GI}, 1: {"memory": GI}})
    policy.start()
    before = policy.state.copy()
    p = pod("p", [("c", 1536, 0, "app")])
    blocks = policy.allocate(p, p.containers[0], TopologyHint(None, False))
    assert [b.numa for b in blocks] == [(0, 1)]
    assert policy.state.machine[0].memory["memory"].free == 0
    assert policy.state.machine[1].memory["memory"].free == 512 * MI
    policy.remove("p", "c")
    assert policy.state == before
