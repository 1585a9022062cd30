"""Property (issue 24): whenever the NUMA filter says a node fits a pod, the node's own admission, in
the very state the node's NRT describes, admits the pod. The pods carry random valid
``numaplane.io/`` preferences (``placement/effective.py`` says what the filter makes of each).

The NRT is the one the node publishes (``nrt/from_manager.py`` ``NRTPublisher``) after a random
history of admitted pods; the same state answers the admission.

Named exceptions, kept out of the drawn preferences and documented in ``docs/workloads.md``:
``full-pcpus: true`` and ``isolated-cpus: require`` depend on cores and isolation that an NRT does
not describe, and ``memory-pinning: true`` on a Guaranteed pod needs the node's memory manager policy
``Static``, which an NRT does not state (drawn only on such nodes), so a node may reject a pod the
filter passed. And where the NUMA filter does not apply (the pod's and the node's policy are not
``single-numa-node``: upstream's plugin passes every node, ``Fit.checked`` is false) the node's own
admission may still refuse a pod whose exclusive CPUs or pinned memory no longer fit; the property
covers the verdicts the filter checked. Third, found by this property and not caused by
preferences (a plain pod on a ``single-numa-node`` node shows it too): with memory manager ``Static``
a Guaranteed pod with an init container whose app containers go to different zones
(init 1 CPU/1Gi, apps 4 CPU/1Gi twice, one 8-CPU zone each) is refused ``TopologyAffinityError``
at the second app container while the NRT says each fits; init containers are drawn only on nodes
whose memory manager pins nothing. (``memory-pinning: true`` on a pod that is not Guaranteed is judged: no node fits it.)
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from place_helpers import node_doc

from numaplane.nrt.from_manager import NRTPublisher
from numaplane.placement.filter import filter as filter_node
from numaplane.placement.pipeline import Pipeline
from numaplane.placement.result import Fit
from numaplane.policy.manager import ResourceManager
from numaplane.resources.pod import Pod, parse_pod
from numaplane.topology.model import synthetic

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


containers = st.lists(st.tuples(st.integers(1, 10), st.integers(1, 24), st.booleans()), min_size=1, max_size=3)
inits = st.lists(st.tuples(st.integers(1, 10), st.integers(1, 24)), max_size=2)


@st.composite
def preferences(draw: st.DrawFn, node_policy: str, pins_memory: bool) -> dict[str, str]:
    out: dict[str, str] = {}
    if draw(st.booleans()):
        out["numaplane.io/topology-scope"] = draw(st.sampled_from(["container", "pod"]))
    if draw(st.booleans()):  # only as strict as the node's or stricter: a laxer one is invalid
        out["numaplane.io/topology-policy"] = draw(st.sampled_from(POLICIES[POLICIES.index(node_policy) :]))
    if draw(st.booleans()):
        out["numaplane.io/cpu-strategy"] = draw(st.sampled_from(["packed", "spread-cores", "distribute-numa"]))
    if draw(st.booleans()):
        out["numaplane.io/memory-pinning"] = draw(st.sampled_from(["true", "false"] if pins_memory else ["false"]))
    if draw(st.booleans()):
        out["numaplane.io/isolated-cpus"] = draw(st.sampled_from(["none", "prefer", "avoid"]))
    return out


@st.composite
def cases(draw: st.DrawFn) -> tuple[dict[str, Any], list[Pod], Pod]:
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
    history = [make_pod(f"h{i}", draw(containers), [], {}) for i in range(draw(st.integers(0, 6)))]
    pins = config["memoryManager"]["policy"] == "Static"
    # init containers only where the memory manager pins nothing: the third exception (module docstring)
    pod = make_pod("new", draw(containers), [] if pins else draw(inits), draw(preferences(policy, pins)))
    return config, history, pod


TOPOLOGY = synthetic(sockets=2, numa_per_socket=2, cores_per_numa=4, threads_per_core=2, memory_per_numa_bytes=32 << 30)


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_a_node_the_filter_passes_admits_the_pod(case: tuple[dict[str, Any], list[Pod], Pod]) -> None:
    config, history, pod = case
    rm = ResourceManager(TOPOLOGY, config)
    used = {"cpu": Fraction(0), "memory": Fraction(0)}
    for old in history:
        if rm.admit(old).admitted:
            for name in used:
                used[name] += old.effective_requests()[name].amount
    # NodeResourcesFit (kube-scheduler's part of the filter): the node's allocatable less what its pods request
    allocatable = {
        "cpu": Fraction(len(TOPOLOGY.cpu_info) - config["cpuManager"]["reservedCPUCount"]),
        "memory": Fraction(127 << 30),
    }
    wants = pod.effective_requests()
    assume(all(wants[name].amount <= allocatable[name] - used[name] for name in used))
    nrt = NRTPublisher(rm, "n1").publish()
    node = node_doc("n1", {"cpu": "32", "memory": "128Gi"})
    verdict = filter_node(pod, nrt, node)
    pipe = Pipeline()
    pipe.update_node("n1", nrt, node)
    assert bool(pipe.feasible(pod)[0]) == isinstance(verdict, Fit)
    if isinstance(verdict, Fit) and verdict.checked:  # an unchecked pass is upstream's (module docstring)
        admission = rm.admit(pod)
        assert admission.admitted, (config, pod.annotations, admission.reason, admission.message, verdict)
