"""What the real-kubelet differential models on numaplane's side (``numaplane_harness.kubeletdiff``).

Fast: no kubelet runs here; ``test_real_kubelet_differential.py`` compares these models with the real
kubelet v1.36.2 (issue 27 item 2).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from numaplane.placement.explain.predicates import parse_node
from numaplane.policy.errors import PolicyConfigError
from numaplane.policy.manager import ResourceManager
from numaplane.topology.cpuset import CPUSet
from numaplane.topology.document import topology_from_dict
from numaplane.topology.model import Topology
from numaplane.topology.sysfs import discover
from numaplane_harness.kubeletdiff import (
    AddPod,
    ContainerSpec,
    DiffConfig,
    kubelet_topology,
    manifest,
    node_admission,
    onto_online,
    play_numaplane,
    topology_mismatch,
)
from numaplane_harness.machineoverlay import prepare_overlay

REAL = Path(os.environ["NUMAPLANE_SHARED"]) / "topologies" / "real"


def _pods(op: AddPod) -> dict[str, Any]:
    doc = manifest(op, "node")
    doc["metadata"]["uid"] = f"uid-{op.name}"
    return doc


def _node(cpu: str, memory: str = "64Gi") -> Any:
    return parse_node(
        {"metadata": {"name": "node"}, "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}}}
    )


def test_out_of_cpu_after_shared_pods_as_the_kubelets_predicate(tmp_path: Path) -> None:
    """4 allocatable CPUs: a shared pod of 1500m leaves 2500m, so a 3-CPU Guaranteed pod is given CPUs by the
    CPU manager (its pool is not shrunk by shared pods) and then rejected ``OutOfcpu`` by the predicate;
    the next pod's allocation drops the rejected pod's CPUs (removeStaleState)."""
    overlay = prepare_overlay(REAL / "intel-desktop-1s1n-20t.tar.gz", tmp_path)
    topology = discover(overlay.root)
    config = DiffConfig("best-effort", "best-effort", memory_static=False)
    ops = [
        AddPod("shared", (ContainerSpec("c0", "1500m", 64),)),
        AddPod("big", (ContainerSpec("c0", "3", 64),)),
        AddPod("small", (ContainerSpec("c0", "2", 64),)),
    ]
    out = play_numaplane(topology, config, ops, _pods, _node("4"))
    assert [(d.pod, d.admitted, d.reason) for d in out.decisions] == [
        ("shared", True, ""),
        ("big", False, "OutOfcpu"),
        ("small", True, ""),
    ]
    assert out.decisions[1].cpus  # held until the next allocation
    assert set(out.cpu_state["entries"]) == {"small"}
    # the rejected pod last: its CPUs go at the end too (the kubelet's CPU manager reconcile loop drops a
    # pod that is not active; play_kubelet reads its final state after that)
    last = play_numaplane(topology, config, ops[:2], _pods, _node("4"))
    assert last.decisions[1].reason == "OutOfcpu" and last.decisions[1].cpus
    assert last.cpu_state.get("entries", {}) == {}
    # without the Node, numaplane's manager alone admits the pod
    alone = play_numaplane(topology, config, ops, _pods)
    assert [d.admitted for d in alone.decisions] == [True, True, True]


def test_node_admission_reports_the_first_failure_in_the_kubelets_order() -> None:
    from numaplane.resources.pod import parse_pod

    pod = parse_pod(_pods(AddPod("p", (ContainerSpec("c0", "2", 2048, 4),))))
    tight = parse_node(
        {"status": {"allocatable": {"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "2Mi", "pods": "110"}}}
    )
    assert node_admission(pod, tight, {}, 0) == "OutOfcpu"
    no_memory = parse_node({"status": {"allocatable": {"cpu": "8", "memory": "1Gi", "hugepages-2Mi": "2Mi"}}})
    assert node_admission(pod, no_memory, {}, 0) == "OutOfmemory"
    pages = parse_node({"status": {"allocatable": {"cpu": "8", "memory": "8Gi", "hugepages-2Mi": "2Mi"}}})
    assert node_admission(pod, pages, {}, 0) == "OutOfhugepages-2Mi"
    full = parse_node({"status": {"allocatable": {"cpu": "8", "memory": "8Gi", "hugepages-2Mi": "8Mi", "pods": "1"}}})
    assert node_admission(pod, full, {}, 1) == "OutOfpods"
    assert node_admission(pod, pages.__class__("n", allocatable=full.allocatable), {}, 0) == ""


def test_reserved_cpus_move_to_online_ones_where_cpu0_is_offline(tmp_path: Path) -> None:
    overlay = prepare_overlay(REAL / "intel-xeon-e5-2680v3-2s-offline-cpu0-node0.tar.gz", tmp_path)
    topology = discover(overlay.root)
    assert 0 not in topology.all_cpus and 4 not in topology.all_cpus  # node 0 has no directory
    config = DiffConfig("x", memory_static=False)
    # as the kubelet (its static policy looks every reserved CPU up in the topology), numaplane refuses CPU 0:
    # the node config is checked against the machine in one pass (issue 26 finding 7)
    with pytest.raises(PolicyConfigError, match=r"cpuManager\.reservedCPUs: CPU 0 not online on this machine"):
        ResourceManager(topology, config.numaplane_config())
    moved = onto_online(config, topology.all_cpus, [n.id for n in topology.numa_nodes])
    assert moved.reserved_cpus == "5" and "reserved 5" in moved.name
    assert moved.memory_node == 1  # node 0 is not the kubelet's
    ResourceManager(topology, moved.numaplane_config())
    two = onto_online(DiffConfig("y", reserved_cpus="0-1", memory_static=False), topology.all_cpus)
    assert CPUSet.parse(two.reserved_cpus) == CPUSet([5, 7])
    assert onto_online(DiffConfig("z"), CPUSet.range(0, 3)).reserved_cpus == "0"


def _one_socket(topology: Topology) -> dict[int, tuple[int, int, int, int]]:
    return {c.cpu: (c.core, c.socket, c.numa, c.uncore) for c in topology.cpus if c.online}


def test_the_kubelets_detected_topology_is_read_from_its_log(tmp_path: Path) -> None:
    topology = discover(prepare_overlay(REAL / "amd-opteron6276-4s8n-64c.tar.gz", tmp_path).root)
    details = {
        str(cpu): {"NUMANodeID": n, "SocketID": s, "CoreID": c, "UncoreCacheID": u}
        for cpu, (c, s, n, u) in _one_socket(topology).items()
    }
    import json

    line = (
        'I1207 03:00:00.000000 1 cpu_manager.go:1] "Detected CPU topology" logger="CPUManager" '
        f"topology={json.dumps({'NumCPUs': 64, 'CPUDetails': details})}"
    )
    seen = kubelet_topology("other line\n" + line + "\n")
    assert seen == _one_socket(topology)
    assert topology_mismatch(topology, seen) is None
    seen[5] = (5, 0, 0, 7)
    found = topology_mismatch(topology, seen)
    assert found is not None and found.kubelet == {5: (5, 0, 0, 7)} and "1 CPUs differ" in found.what
    assert kubelet_topology("no such line") is None


def test_final_memory_state_compared_regardless_of_block_order() -> None:
    """The kubelet appends a container's blocks in Go map order; the order is no decision."""
    from numaplane_harness.kubeletdiff import Outcome, compare

    blocks = [
        {"numaAffinity": [1], "type": "memory", "size": 1 << 29},
        {"numaAffinity": [1], "type": "hugepages-2Mi", "size": 4 << 20},
    ]

    def outcome(order: list[dict[str, Any]]) -> Outcome:
        return Outcome([], {}, {"policyName": "Static", "machineState": {}, "entries": {"p6": {"c0": order}}})

    assert compare(outcome(blocks), outcome(blocks[::-1]), memory=True) == (2, [])
    other = [dict(blocks[0], size=1 << 28), blocks[1]]
    _, found = compare(outcome(blocks), outcome(other), memory=True)
    assert [m.what for m in found] == ["final memory_manager_state"]


def test_memory_checkpoint_lists_every_hugepage_size_of_the_nodes(tmp_path: Path) -> None:
    """As the kubelet's (cAdvisor reads every nodeN/hugepages/hugepages-* folder): 1Gi with 0 pages too."""
    topology = discover(prepare_overlay(REAL / "intel-xeon-2s-snc2-4n-80t-hugepages.tar.gz", tmp_path).root)
    out = play_numaplane(topology, DiffConfig("x"), [AddPod("p", (ContainerSpec("c0", "1", 64, 2),))], _pods)
    for node in out.memory_state["machineState"].values():
        assert sorted(node["memoryMap"]) == ["hugepages-1Gi", "hugepages-2Mi", "memory"]
        assert node["memoryMap"]["hugepages-1Gi"]["total"] == 0


def test_a_pod_both_reject_is_compared_by_reason() -> None:
    """The kubelet keeps what its managers gave a rejected pod's init container until the next pod's
    allocation (kvm-skylake, full-pcpus-only: ``SMTAlignmentError`` with the init's CPU and memory in
    the checkpoint); numaplane releases it at once. The reasons still must agree."""
    from numaplane_harness.kubeletdiff import Decision, Outcome, compare

    block = {"numaAffinity": [0], "type": "memory", "size": 1 << 27}
    kubelet = Outcome([Decision("p1", False, "SMTAlignmentError", {"init": "1"}, {"init": [block]})], {}, {})
    ours = Outcome([Decision("p1", False, "SMTAlignmentError", {}, {})], {}, {})
    assert compare(kubelet, ours, memory=True)[1][:1] == []
    other = Outcome([Decision("p1", False, "TopologyAffinityError", {}, {})], {}, {})
    assert [m.what for m in compare(kubelet, other, memory=True)[1]][:1] == ["p1"]


def _recorded(machine: str) -> tuple[Topology, list[Any], Any]:
    """The real kubelet's recorded decisions on ``machine`` (``data/kubelet_decisions.json``, written by
    ``bench/agent_differential.py --record``), its view of the machine and the host it ran on."""
    import json
    import tempfile

    from numaplane_harness.agentdiff import Case
    from numaplane_harness.kubeletdiff import Host

    doc = json.loads((Path(__file__).parent / "data" / "kubelet_decisions.json").read_text())
    with tempfile.TemporaryDirectory(prefix="npkm-", dir="/tmp") as tmp:
        topology = discover(prepare_overlay(REAL / f"{machine}.tar.gz", Path(tmp)).root, view="kubelet")
    host = Host(CPUSet.parse(doc["host"]["cpus"]), frozenset(doc["host"]["nodes"]))
    return topology, [Case.from_dict(c) for c in doc["machines"][machine]], host


def test_a_finished_init_containers_memory_goes_when_the_next_container_is_created() -> None:
    """kvm-skylake-4cpu-2offline (CPUs 0-1: this host's, so the kubelet's containers really run): the
    kubelet's memory manager ``AddContainer`` dropped each finished init container from
    ``memory_manager_state`` when the app container was created. Modelled (``play_numaplane(host=…)``)
    numaplane's manager decides and ends exactly as the recorded kubelet; without the exit modelled the
    final memory checkpoint differs in 3 of the 4 configurations."""
    from numaplane_harness.kubeletdiff import compare

    topology, cases, host = _recorded("kvm-skylake-4cpu-2offline")
    without = []
    for case in cases:

        def pods(op: AddPod) -> dict[str, Any]:
            return _pods(op)

        node = parse_node(case.node)
        ours = play_numaplane(topology, case.config, case.ops, pods, node, host)
        _, mismatches = compare(case.kubelet, ours, memory=case.config.memory_static)
        assert mismatches == [], (case.config.name, mismatches)
        blind = play_numaplane(topology, case.config, case.ops, pods, node)
        without += [m.what for m in compare(case.kubelet, blind, memory=case.config.memory_static)[1]]
    assert without == ["final memory_manager_state"] * 3


def test_the_kubelets_full_core_takes_on_a_hybrid_machine_are_the_named_divergence() -> None:
    """intel-hybrid-4p8e-1s1n-16t (4 P cores × 2 threads, 8 E cores × 1: the kubelet's CPUsPerCore() is
    16 / 12 = 1): the kubelet gave the first pod's 3-CPU init container ``0-1,8`` (CPU 0 is reserved)
    and later ``4-5`` to p4 while p2 held CPU 4. Every difference from numaplane comes at or after that
    first take and is named ``kubelet-hybrid-full-core``; none is left unexplained."""
    from numaplane_harness.kubeletdiff import KUBELET_HYBRID_FULL_CORE, classify, compare, unavailable_takes

    topology, cases, host = _recorded("intel-hybrid-4p8e-1s1n-16t")
    assert topology.num_cpus == 16 and topology.num_cores == 12 and topology.cpus_per_core == 1
    explained = 0
    for case in cases:
        reserved = CPUSet.parse(case.config.reserved_cpus)
        assert unavailable_takes(case.ops, case.kubelet, reserved) == [("p0", "0-1,8-10"), ("p4", "4-5")]
        assert case.kubelet.decisions[0].cpus["init"] == "0-1,8"
        ours = play_numaplane(topology, case.config, case.ops, _pods, parse_node(case.node), host)
        assert not any(CPUSet.parse(cpus) & reserved for d in ours.decisions for cpus in d.cpus.values())
        _, mismatches = compare(case.kubelet, ours, memory=case.config.memory_static)
        unexplained, known = classify(mismatches, case.ops, case.kubelet, topology, reserved)
        assert unexplained == [], (case.config.name, unexplained)
        assert {k for k, _ in known} == {KUBELET_HYBRID_FULL_CORE} and known[0][1].what == "p0"
        explained += len(known)
    assert explained == 27  # 8 + 8 + 3 + 8 in the four configurations


def test_classify_leaves_differences_before_the_kubelets_first_unavailable_take() -> None:
    """Only differences at or after the kubelet's first take of an unavailable CPU are explained, and
    only on a machine whose cores differ in thread count."""
    from numaplane_harness.kubeletdiff import Decision, Mismatch, Outcome, classify

    hybrid = topology_from_dict(
        {
            "name": "h",
            "cpus": [{"cpu": c, "core": c // 2 if c < 4 else c - 2, "socket": 0, "numa": 0} for c in range(6)],
            "numa_nodes": [{"id": 0, "memory_total_bytes": 1 << 30}],
        }
    )
    ops = [AddPod(f"p{i}", (ContainerSpec("c0", "2", 64),)) for i in range(3)]
    kubelet = Outcome(
        [
            Decision("p0", True, "", {"c0": "2-3"}, {}),
            Decision("p1", True, "", {"c0": "0-1"}, {}),  # CPU 0 is reserved
            Decision("p2", True, "", {"c0": "4-5"}, {}),
        ],
        {},
        {},
    )
    found = [
        Mismatch("p0", 1, 2),
        Mismatch("p1", 1, 2),
        Mismatch("p2", 1, 2),
        Mismatch("final cpu_manager_state", 1, 2),
    ]
    unexplained, known = classify(found, ops, kubelet, hybrid, CPUSet.parse("0"))
    assert [m.what for m in unexplained] == ["p0"]
    assert [m.what for _, m in known] == ["p1", "p2", "final cpu_manager_state"]
    uniform = topology_from_dict(
        {
            "name": "u",
            "cpus": [{"cpu": c, "core": c // 2, "socket": 0, "numa": 0} for c in range(6)],
            "numa_nodes": [{"id": 0, "memory_total_bytes": 1 << 30}],
        }
    )
    assert classify(found, ops, kubelet, uniform, CPUSet.parse("0")) == (found, [])


def test_a_recorded_case_round_trips_through_json() -> None:
    """What ``bench/agent_differential.py --record`` writes reads back to the same case (sequence with
    deletions and init containers, the kubelet's decisions and checkpoints, its Node)."""
    import json

    from numaplane_harness.agentdiff import Case

    doc = json.loads((Path(__file__).parent / "data" / "kubelet_decisions.json").read_text())
    for entries in doc["machines"].values():
        for entry in entries:
            case = Case.from_dict(entry)
            again = Case.from_dict(json.loads(json.dumps(case.to_dict())))
            assert again == case
    assert any(
        isinstance(op, AddPod) and any(c.init for c in op.containers)
        for e in doc["machines"].values()
        for c in e
        for op in Case.from_dict(c).ops
    )


@pytest.fixture(scope="module")
def power9(tmp_path_factory: pytest.TempPathFactory) -> Topology:
    """ibm-power9-2s-6gpumem-nodes as the kubelet's cAdvisor sees it (one unpacking for the module)."""
    root = prepare_overlay(REAL / "ibm-power9-2s-6gpumem-nodes.tar.gz", tmp_path_factory.mktemp("p9")).root
    return discover(root, view="kubelet")


def test_the_kubelets_panic_on_numa_node_ids_over_63_is_the_named_divergence(power9: Topology) -> None:
    """The real kubelet v1.36.2's stack on ibm-power9-2s-6gpumem-nodes (``data/kubelet_power9_panic.txt``,
    from its log in ``bench/kubelet_differential.py``): a nil mask in the memory manager's
    ``calculateHints`` callback, from ``IterateBitMasks`` over NUMA nodes 0, 8, 250-255. It is
    ``kubelet-numa-id-over-63`` there with the memory manager Static, and nothing named elsewhere."""
    from numaplane_harness.kubeletdiff import KUBELET_NUMA_ID_OVER_63, KubeletCrash, explain_crash

    stack = (Path(__file__).parent / "data" / "kubelet_power9_panic.txt").read_text()
    crash = KubeletCrash("p0", stack, 2)
    assert crash.frame == "k8s.io/kubernetes/pkg/kubelet/cm/memorymanager.(*staticPolicy).calculateHints.func1"
    assert [n.id for n in power9.numa_nodes] == [0, 8, 250, 251, 252, 253, 254, 255]
    assert [n.id for n in power9.numa_nodes if n.cpus.size() == 0] == [250, 251, 252, 253, 254, 255]
    static = DiffConfig("single-numa-node/container")
    assert explain_crash(crash, power9, static) is KUBELET_NUMA_ID_OVER_63
    assert explain_crash(crash, power9, DiffConfig("none", memory_static=False)) is None
    low = topology_from_dict(
        {
            "name": "low",
            "cpus": [{"cpu": c, "core": c, "socket": 0, "numa": c // 2} for c in range(4)],
            "numa_nodes": [{"id": n, "memory_total_bytes": 1 << 30} for n in range(2)],
        }
    )
    assert explain_crash(crash, low, static) is None  # node ids under 64: not this bug
    other = KubeletCrash("p0", "panic: something else\n\ngoroutine 1 [running]:\nmain.main()\n", 2)
    assert explain_crash(other, power9, static) is None


def test_numaplane_decides_on_the_machine_where_the_kubelet_panics(power9: Topology) -> None:
    """Where the kubelet panics (NUMA nodes 250-255 hold GPU memory and no CPUs), numaplane's manager decides:
    every configuration of the default matrix plays the bench's seeded sequence; CPUs come from the two
    CPU nodes, and under single-numa-node each container's memory is on its CPUs' node; a pod whose
    memory fits no CPU node is refused ``TopologyAffinityError`` (the GPU nodes' 15 GiB each do not
    make a single-node fit), not a crash."""
    from numaplane_harness.kubeletdiff import default_matrix, generate_ops

    topology = power9
    node_of = {cpu.cpu: cpu.numa for cpu in topology.cpus}
    ops = generate_ops(27, 12, hugepages=False, max_cpus=topology.all_cpus.size())
    admitted = 0
    for config in default_matrix(memory_static=True):
        out = play_numaplane(topology, config, ops, _pods)
        for d in out.decisions:
            if not d.admitted:  # a clear refusal: SMT4 cores under full-pcpus-only, a node or the machine full
                assert d.reason in ("SMTAlignmentError", "TopologyAffinityError", "UnexpectedAdmissionError"), d
                continue
            admitted += 1
            for name, cpus in d.cpus.items():
                assert {node_of[c] for c in CPUSet.parse(cpus)} <= {0, 8}
                blocks = d.memory[name]
                assert blocks and all(b["numaAffinity"] for b in blocks)
                if config.topology_policy == "single-numa-node":
                    assert [b["numaAffinity"] for b in blocks] == [sorted({node_of[c] for c in CPUSet.parse(cpus)})]
    assert admitted >= 80  # of 12 configurations × 10 pods (88 at the time of writing)
    # CPU nodes 0 and 8 filled by 120 GiB each: 20 GiB fits only on GPU nodes (pairs of 15 GiB, ids 250-255:
    # the masks the kubelet cannot build). With no CPU there, the hints never meet: refused by the topology
    # manager, or by the memory manager's Allocate under best-effort (its "preferred hint violates NUMA
    # node allocation"), never a crash
    for policy, reason in (
        ("single-numa-node", "TopologyAffinityError"),
        ("restricted", "TopologyAffinityError"),
        ("best-effort", "UnexpectedAdmissionError"),
    ):
        ops = [
            AddPod("p0", (ContainerSpec("c0", "2", 120 * 1024),)),
            AddPod("p1", (ContainerSpec("c0", "2", 120 * 1024),)),
            AddPod("p2", (ContainerSpec("c0", "2", 20 * 1024),)),
        ]
        out = play_numaplane(topology, DiffConfig(policy, policy), ops, _pods)
        assert [(d.admitted, d.reason) for d in out.decisions] == [(True, ""), (True, ""), (False, reason)], policy
        assert [d.memory["c0"][0]["numaAffinity"] for d in out.decisions[:2]] == [[0], [8]]


def test_a_numaplane_difference_after_the_hybrid_kubelets_first_invalid_take_is_still_seen() -> None:
    """On intel-hybrid-4p8e-1s1n-16t every difference from the kubelet at or after its first invalid take
    is named ``kubelet-hybrid-full-core``, so there the agent is also compared with numaplane's in-process
    manager on the same pods (``agentdiff.inprocess_mismatches``): equal when the agent decides as the
    manager, and a changed decision after that point (which the kubelet comparison would file as named)
    is an unnamed in-process difference."""
    import dataclasses

    from numaplane_harness.agentdiff import AgentSide, inprocess_mismatches
    from numaplane_harness.kubeletdiff import KUBELET_HYBRID_FULL_CORE, Outcome, classify, compare

    topology, cases, host = _recorded("intel-hybrid-4p8e-1s1n-16t")
    case = cases[0]
    docs = {op.name: _pods(op) for op in case.ops if isinstance(op, AddPod)}
    node = parse_node(case.node)
    agent = play_numaplane(topology, case.config, case.ops, lambda op: docs[op.name], node, host, agent_mode=True)
    compared, found = inprocess_mismatches(topology, case, AgentSide(agent, docs=docs), host)
    assert compared == len(case.kubelet.decisions) + 2 and found == []
    # the agent decides p1 (equal to the kubelet's) otherwise: after the kubelet's first invalid take (p0)
    at = next(i for i, d in enumerate(agent.decisions) if d.pod == "p1")
    assert case.kubelet.decisions[at].cpus == agent.decisions[at].cpus == {"c0": "11-13", "init": "11-13"}
    changed = dataclasses.replace(agent.decisions[at], cpus={"c0": "11-12,14", "init": "11-13"})
    wrong = Outcome([*agent.decisions[:at], changed, *agent.decisions[at + 1 :]], agent.cpu_state, agent.memory_state)
    _, against_kubelet = compare(case.kubelet, wrong, memory=case.config.memory_static)
    reserved = CPUSet.parse(case.config.reserved_cpus)
    unexplained, known = classify(against_kubelet, case.ops, case.kubelet, topology, reserved)
    assert unexplained == [] and ("p1", KUBELET_HYBRID_FULL_CORE) in [(m.what, k) for k, m in known]
    _, found = inprocess_mismatches(topology, case, AgentSide(wrong, docs=docs), host)
    assert [m.what for m in found] == ["p1"]


def test_a_configuration_the_kubelet_refuses_to_start_with_is_compared_with_numaplanes_refusal(
    tmp_path: Path,
) -> None:
    """kvm-skylake-4cpu-2offline (2 sockets, 1 NUMA node): the real kubelet exits at start with
    align-by-socket (its last log line below, from the bench's run); numaplane refuses it with the same
    words, so the one comparison is equal; a kubelet refusal numaplane does not share is a difference."""
    from numaplane_harness.kubeletdiff import refusal_mismatch

    log = (
        'E1207 15:40:45.895587    1010 run.go:72] "command failed" err="failed to run Kubelet: new static policy'
        " error: Align by socket is not compatible with hardware where number of sockets are more than number"
        ' of NUMA"'
    )
    topology = discover(prepare_overlay(REAL / "kvm-skylake-4cpu-2offline.tar.gz", tmp_path).root, view="kubelet")
    by_socket = DiffConfig("align-by-socket", "best-effort", cpu_options={"align-by-socket": "true"})
    assert refusal_mismatch(log, topology, by_socket) is None
    other = refusal_mismatch(log, topology, DiffConfig("best-effort", "best-effort"))
    assert other is not None and other.numaplane == "numaplane accepts it"
    assert "Align by socket" in str(other.kubelet)


E5 = "intel-xeon-e5-2680v3-2s-offline-cpu0-node0"


def test_the_kubelet_keeping_a_refused_pods_memory_is_the_named_divergence() -> None:
    """intel-xeon-e5-2680v3-2s-offline-cpu0-node0, recorded from the real kubelet: the last pod, p11, is
    refused (TopologyAffinityError, UnexpectedAdmissionError, SMTAlignmentError) after its first
    container got 512Mi on node 1, and the kubelet's final memory_manager_state still holds it (nothing
    runs removeStaleState after the last pod); numaplane decides every pod alike and releases p11 at
    once. That difference, exactly (the blocks charged back, byte for byte), is
    ``kubelet-keeps-refused-pod-memory``; in pod scope with single-numa-node nothing is allocated
    before the refusal and both end equal."""
    from numaplane_harness.kubeletdiff import KUBELET_KEEPS_REFUSED_POD_MEMORY, classify, compare

    topology, cases, host = _recorded(E5)
    named = []
    for case in cases:
        reserved = CPUSet.parse(case.config.reserved_cpus)
        ours = play_numaplane(topology, case.config, case.ops, _pods, parse_node(case.node), host)
        _, mismatches = compare(case.kubelet, ours, memory=case.config.memory_static)
        assert [m.what for m in mismatches] in ([], ["final memory_manager_state"]), case.config.name
        unexplained, known = classify(mismatches, case.ops, case.kubelet, topology, reserved)
        assert unexplained == [], (case.config.name, unexplained)
        assert "p11" not in ours.memory_state.get("entries", {})  # numaplane does not leak it
        if known:
            assert [k for k, _ in known] == [KUBELET_KEEPS_REFUSED_POD_MEMORY]
            assert set(case.kubelet.memory_state["entries"]) - set(ours.memory_state["entries"]) == {"p11"}
            named.append(case.config.name)
    assert named == [
        "single-numa-node/container (reserved 5)",
        "best-effort/pod (reserved 5)",
        "best-effort/container+full-pcpus-only (reserved 5)",
    ]


def test_kept_refused_memory_takes_only_that_difference() -> None:
    """A byte more reserved, a kept pod the kubelet admitted, or a differing block is not the divergence."""
    import copy

    from numaplane_harness.kubeletdiff import Decision, Outcome, kept_refused_memory

    topology, cases, host = _recorded(E5)
    case = cases[0]
    ours = play_numaplane(topology, case.config, case.ops, _pods, parse_node(case.node), host)
    theirs = case.kubelet.memory_state
    assert kept_refused_memory(case.kubelet, theirs, ours.memory_state)
    assert not kept_refused_memory(case.kubelet, ours.memory_state, ours.memory_state)  # nothing kept
    more = copy.deepcopy(theirs)
    more["machineState"]["1"]["memoryMap"]["memory"]["reserved"] += 1
    assert not kept_refused_memory(case.kubelet, more, ours.memory_state)
    admitted = Outcome([Decision(d.pod, True, "", d.cpus, d.memory) for d in case.kubelet.decisions], {}, {})
    assert not kept_refused_memory(admitted, theirs, ours.memory_state)
    other = copy.deepcopy(theirs)
    other["entries"]["p0"]["c0"][0]["size"] += 1
    assert not kept_refused_memory(case.kubelet, other, ours.memory_state)


def test_align_by_socket_is_refused_where_the_kubelet_counts_more_sockets_than_nodes() -> None:
    """The kubelet counts 2 sockets on this machine (cAdvisor's /proc/cpuinfo count covers package 0's
    CPUs, which no node directory lists) over 1 NUMA node and refuses ``align-by-socket``; numaplane's
    managers over the kubelet view refuse it with the same message (``refusal_mismatch`` is None)."""
    from numaplane_harness.kubeletdiff import refusal_mismatch

    topology, _, _ = _recorded(E5)
    config = DiffConfig(
        "best-effort/container+align-by-socket",
        "best-effort",
        memory_static=True,
        cpu_options={"align-by-socket": "true"},
        reserved_cpus="5",
        memory_node=1,
    )
    log = (
        'E1207 16:31:10.000000 1 run.go:72] "command failed" err="failed to run Kubelet: new static policy '
        "error: Align by socket is not compatible with hardware where number of sockets are more than "
        'number of NUMA"'
    )
    assert refusal_mismatch(log, topology, config) is None
    with pytest.raises(PolicyConfigError, match="Align by socket"):
        ResourceManager(topology, config.numaplane_config())
