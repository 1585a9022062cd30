"""Property (issue 24): whenever the NUMA filter says a node fits a pod, the node's own admission, in
the very state the node's NRT describes, admits the pod. The pods carry random valid
``numaplane.io/`` preferences (``placement/model/effective.py`` says what the filter makes of each), among
them ``memory-pinning: true`` on every node: the filter judges it from the NRT (memory is listed per
zone only under the memory manager policy ``Static``).

The NRT is the one the node publishes (``nrt/from_manager.py`` ``NRTPublisher``) after a random
history of admitted pods; the same state answers the admission, built as the simulator builds its
nodes (a :class:`ResourceManager` over the machine and the node's configuration).

Named exceptions, documented in ``docs/workloads.md``:

1. ``full-pcpus: true`` and ``isolated-cpus: require`` depend on cores and isolation that an NRT does
   not describe; the filter says in its notes that it did not judge them
   (``test_unjudged_preferences_are_named_in_the_verdict``) and they are not drawn here.
2. Where the NUMA filter does not apply (neither the pod nor the node asks ``single-numa-node``:
   upstream's plugin passes every node, ``Fit.checked`` is false) the node's own admission may still
   refuse a pod whose exclusive CPUs or pinned memory no longer fit; there the property only requires
   that the node never refuses the pod's preferences (``InvalidPreference``: a relaxing policy,
   ``memory-pinning: true`` on a node without the Static memory policy), which the filter judges.
3. Found by this property and not caused by preferences (a plain pod on a ``single-numa-node`` node
   shows it too, upstream's plugin judges it so): with memory manager ``Static`` a Guaranteed pod with
   an init container whose app containers go to different zones (init 1 CPU/1Gi, apps 4 CPU/1Gi
   twice, one 8-CPU zone each) is refused ``TopologyAffinityError`` at the second app container while
   the NRT says each fits; init containers are drawn only on nodes whose memory manager pins nothing.
4. Found by this property: a pod asking a stricter ``topology-policy`` than its node's, on a node with
   memory manager ``Static`` where a pod admitted under the node's laxer policy holds memory spanning
   several NUMA nodes: the kubelet's memory manager gives no NUMA node of such a group to a
   single-NUMA allocation, which an NRT does not show (its zones list each node's free memory), so
   the node may refuse the pod (``TopologyAffinityError``) that the filter passed. Such states are
   skipped (``assume``).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from place_helpers import node_doc

from numaplane.nrt.from_manager import NRTPublisher
from numaplane.placement.arrays.pipeline import Pipeline
from numaplane.placement.explain.filter import filter as filter_node
from numaplane.placement.model.result import Fit
from numaplane.policy.manager import ResourceManager
from numaplane.resources.pod import Pod, parse_pod
from numaplane.topology.model import Topology, synthetic

POLICIES = ("none", "best-effort", "restricted", "single-numa-node")


def make_pod(uid: str, ctrs: list[tuple[int, int, bool]], init: list[tuple[int, int]], notes: dict[str, str]) -> Pod:
    def resources(cpu: int, mem: int, guaranteed: bool) -> dict[str, Any]:
        req = {"cpu": str(cpu), "memory": f"{mem}Gi"}
        return {"requests": req, "limits": dict(req)} if guaranteed else {"requests": req}

    guaranteed = all(g for _, _, g in ctrs)
    spec: dict[str, Any] = {
        "containers": [{"name": f"c{i}", "resources": resources(c, m, g)} for i, (c, m, g) in enumerate(ctrs)]
    }
    if init:
        spec["initContainers"] = [
            {"name": f"i{i}", "resources": resources(c, m, guaranteed)} for i, (c, m) in enumerate(init)
        ]
    return parse_pod({"metadata": {"name": uid, "uid": uid, "annotations": notes}, "spec": spec})


def containers(cpus: int, gib: int) -> st.SearchStrategy[list[tuple[int, int, bool]]]:
    """One to three containers, each up to a NUMA node's ``cpus`` and ``gib`` (a pod may span zones)."""
    return st.lists(st.tuples(st.integers(1, cpus), st.integers(1, gib), st.booleans()), min_size=1, max_size=3)


def inits(cpus: int, gib: int) -> st.SearchStrategy[list[tuple[int, int]]]:
    return st.lists(st.tuples(st.integers(1, cpus), st.integers(1, gib)), max_size=2)


@st.composite
def preferences(draw: st.DrawFn, node_policy: str) -> dict[str, str]:
    out: dict[str, str] = {}
    if draw(st.booleans()):
        out["numaplane.io/topology-scope"] = draw(st.sampled_from(["container", "pod"]))
    if draw(st.booleans()):  # only as strict as the node's or stricter: a laxer one is invalid
        out["numaplane.io/topology-policy"] = draw(st.sampled_from(POLICIES[POLICIES.index(node_policy) :]))
    if draw(st.booleans()):
        out["numaplane.io/cpu-strategy"] = draw(st.sampled_from(["packed", "spread-cores", "distribute-numa"]))
    if draw(st.booleans()):  # true on a pod that is not Guaranteed: every node refuses it, so does the filter
        out["numaplane.io/memory-pinning"] = draw(st.sampled_from(["true", "false"]))
    if draw(st.booleans()):
        out["numaplane.io/isolated-cpus"] = draw(st.sampled_from(["none", "prefer", "avoid"]))
    if draw(st.booleans()):  # true: the first exception (module docstring)
        out["numaplane.io/full-pcpus"] = "false"
    return out


@st.composite
def cases(draw: st.DrawFn) -> tuple[Topology, dict[str, Any], list[Pod], Pod]:
    topology = draw(st.sampled_from(TOPOLOGIES))
    policy = draw(st.sampled_from(POLICIES))
    config = {
        "topologyManager": {"policy": policy, "scope": draw(st.sampled_from(["container", "pod"]))},
        "cpuManager": {"reservedCPUCount": draw(st.integers(1, 2))},
        "memoryManager": draw(
            st.sampled_from(
                [
                    {"policy": "None"},
                    {"policy": "Static", "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}]},
                ]
            )
        ),
    }
    numa = topology.numa_nodes[0]
    cpus, gib = numa.cpus.size(), numa.memory_total_bytes >> 30
    history = [make_pod(f"h{i}", draw(containers(cpus, gib)), [], {}) for i in range(draw(st.integers(0, 6)))]
    pins = config["memoryManager"]["policy"] == "Static"
    # init containers only where the memory manager pins nothing: the third exception (module docstring)
    ctrs = draw(containers(cpus, gib // 2))
    notes = draw(preferences(policy))
    pod = make_pod("new", ctrs, [] if pins else draw(inits(cpus, gib // 2)), notes)
    return topology, config, history, pod


TOPOLOGIES = (
    synthetic(sockets=2, numa_per_socket=2, cores_per_numa=4, threads_per_core=2, memory_per_numa_bytes=32 << 30),
    synthetic(sockets=1, numa_per_socket=2, cores_per_numa=6, threads_per_core=2, memory_per_numa_bytes=24 << 30),
    synthetic(sockets=2, numa_per_socket=1, cores_per_numa=10, threads_per_core=1, memory_per_numa_bytes=48 << 30),
)


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_a_node_the_filter_passes_admits_the_pod(case: tuple[Topology, dict[str, Any], list[Pod], Pod]) -> None:
    topology, config, history, pod = case
    rm = ResourceManager(topology, config)
    memory = sum(node.memory_total_bytes for node in topology.numa_nodes)
    # NodeResourcesFit (kube-scheduler's part of the filter): the node's allocatable less what its pods
    # request; the history holds only pods it let through, as a scheduler builds a node's state, and
    # among them only those that leave NodeResourcesFit room for the pod (the NUMA filter's question)
    free = {
        "cpu": Fraction(topology.num_cpus - config["cpuManager"]["reservedCPUCount"]),
        "memory": Fraction(memory - (1 << 30)),
    }

    def fits(*candidates: Pod) -> bool:
        wants = [c.effective_requests() for c in candidates]
        return all(sum(w[name].amount for w in wants) <= free[name] for name in free)

    spanning = False  # an admitted pod's pinned memory spans several NUMA nodes (the fourth exception)
    for old in history:
        if not fits(old, pod):  # the history leaves room for the pod (NodeResourcesFit passes it)
            continue
        admission = rm.admit(old)
        if admission.admitted:
            for name in free:
                free[name] -= old.effective_requests()[name].amount
            blocks = (b for c in admission.containers for a in c.allocations for b in a.memory)
            spanning = spanning or any(len(b.numa) > 1 for b in blocks)
    asked = pod.annotations.get("numaplane.io/topology-policy", "none")
    assume(not (spanning and POLICIES.index(asked) > POLICIES.index(config["topologyManager"]["policy"])))
    assume(fits(pod))
    nrt = NRTPublisher(rm, "n1").publish()
    node = node_doc("n1", {"cpu": str(topology.num_cpus), "memory": str(memory)})
    verdict = filter_node(pod, nrt, node)
    pipe = Pipeline()
    pipe.update_node("n1", nrt, node)
    assert bool(pipe.feasible(pod)[0]) == isinstance(verdict, Fit)
    if isinstance(verdict, Fit):
        admission = rm.admit(pod)
        detail = (config, pod.annotations, admission.reason, admission.message, verdict)
        if verdict.checked:
            assert admission.admitted, detail
        else:  # an unchecked pass is upstream's (exception 2), but a preference the node refuses is judged
            assert admission.admitted or admission.reason != "InvalidPreference", detail
