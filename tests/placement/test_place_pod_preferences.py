"""The NUMA filter judges a pod at its own ``numaplane.io/topology-scope`` / ``topology-policy``
(``placement/model/effective.py``), in the per-node function and the vectorised pipeline alike, and rejects a
pod whose preferences the node would refuse (``InvalidPreference``)."""

from __future__ import annotations

from typing import Any

import pytest
from place_helpers import container, node_doc, nrt_doc, zone

from numaplane.placement.arrays.pipeline import Pipeline
from numaplane.placement.explain.filter import filter as filter_node
from numaplane.placement.explain.score import score
from numaplane.placement.model.result import Fit, Reject
from numaplane.placement.model.strategies import ScoringStrategy
from numaplane.resources.pod import Pod, parse_pod


def annotated_pod(annotations: dict[str, str], containers: list[dict[str, Any]]) -> Pod:
    return parse_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "uid": "uid-p", "annotations": annotations},
            "spec": {"containers": containers, "schedulerName": "topo-aware-scheduler"},
        }
    )


# two containers of 3 CPUs each: each fits one 4-CPU zone, together (pod scope) they do not
TWO_CONTAINERS = [container("a", {"cpu": 3, "memory": "1Gi"}), container("b", {"cpu": 3, "memory": "1Gi"})]


def zones() -> list[dict[str, Any]]:
    return [zone(0, {"cpu": 4, "memory": "8Gi"}), zone(1, {"cpu": 4, "memory": "8Gi"})]


def verdicts(pod: Pod, doc: dict[str, Any]) -> tuple[Fit | Reject, bool]:
    """The per-node verdict and the pipeline's verdict on one node."""
    pipe = Pipeline()
    pipe.update_node("n1", doc, node_doc("n1"))
    return filter_node(pod, doc, node_doc("n1")), bool(pipe.feasible(pod)[0])


def test_pod_scope_annotation_is_judged_at_pod_scope_on_a_container_scope_node() -> None:
    doc = nrt_doc("n1", zones(), scope="container")
    plain, plain_vec = verdicts(annotated_pod({}, TWO_CONTAINERS), doc)
    assert isinstance(plain, Fit) and plain_vec
    verdict, vec = verdicts(annotated_pod({"numaplane.io/topology-scope": "pod"}, TWO_CONTAINERS), doc)
    assert isinstance(verdict, Reject) and verdict.reason == "cannot align pod"
    assert not vec


def test_container_scope_annotation_is_judged_per_container_on_a_pod_scope_node() -> None:
    doc = nrt_doc("n1", zones(), scope="pod")
    verdict, vec = verdicts(annotated_pod({"numaplane.io/topology-scope": "container"}, TWO_CONTAINERS), doc)
    assert isinstance(verdict, Fit) and verdict.checked and vec


@pytest.mark.parametrize("asked", ["single-numa-node", "restricted"])
def test_stricter_policy_annotation_is_filtered_on_a_node_whose_policy_is_not(asked: str) -> None:
    doc = nrt_doc("n1", zones(), policy="none")
    big = [container("a", {"cpu": 6, "memory": "1Gi"})]  # fits the node, not one zone
    plain, plain_vec = verdicts(annotated_pod({}, big), doc)
    assert isinstance(plain, Fit) and not plain.checked and plain_vec
    verdict, vec = verdicts(annotated_pod({"numaplane.io/topology-policy": asked}, big), doc)
    assert isinstance(verdict, Reject) and not vec


def test_invalid_preference_fits_no_node_and_says_why() -> None:
    pod = annotated_pod({"numaplane.io/cpu-strategy": "fastest"}, TWO_CONTAINERS)
    verdict, vec = verdicts(pod, nrt_doc("n1", zones()))
    assert isinstance(verdict, Reject) and verdict.reason.startswith("invalid pod preference: ")
    assert "numaplane.io/cpu-strategy='fastest': expected one of" in verdict.reason  # the node's message
    assert not vec


def test_a_policy_laxer_than_the_nodes_is_refused_as_the_node_refuses_it() -> None:
    pod = annotated_pod({"numaplane.io/topology-policy": "best-effort"}, TWO_CONTAINERS)
    verdict, vec = verdicts(pod, nrt_doc("n1", zones(), policy="single-numa-node"))
    assert isinstance(verdict, Reject) and "would relax the node's policy 'single-numa-node'" in verdict.reason
    assert not vec
    laxer_node, vec2 = verdicts(pod, nrt_doc("n1", zones(), policy="none"))
    assert isinstance(laxer_node, Fit) and vec2


@pytest.mark.parametrize("strategy", ["LeastAllocated", "LeastNUMANodes"])
def test_a_pod_scope_pod_is_scored_at_pod_scope_by_the_pipeline_and_the_per_node_code(strategy: str) -> None:
    """Scored as the same pod on a pod-scope node would be (its own scope replaces the NRT's)."""
    small = [container("a", {"cpu": 1, "memory": "1Gi"}), container("b", {"cpu": 2, "memory": "1Gi"})]
    fits = small if strategy == "LeastAllocated" else TWO_CONTAINERS  # the pod spans two zones
    own = annotated_pod({"numaplane.io/topology-scope": "pod"}, fits)
    plain = annotated_pod({}, fits)
    strat = ScoringStrategy(strategy)
    at_pod = score(plain, nrt_doc("n1", zones(), scope="pod"), None, strat)
    at_ctr = score(plain, nrt_doc("n1", zones(), scope="container"), None, strat)
    assert at_pod != at_ctr  # the case tells the scopes apart
    doc = nrt_doc("n1", zones(), scope="container")
    pipe = Pipeline(strat)
    pipe.update_node("n1", doc, node_doc("n1"))
    assert score(own, doc, None, strat) == at_pod == int(pipe.scores(own)[0])


# --- issue 24, item 1: what an NRT can judge of a preference, and saying why ---------------------

PIN = {"numaplane.io/memory-pinning": "true"}


@pytest.mark.parametrize("policy", ["single-numa-node", "best-effort"])
def test_memory_pinning_true_fits_only_a_node_whose_nrt_lists_memory_per_zone(policy: str) -> None:
    """Memory is listed per zone only under memory manager Static: a node whose NRT lists none refuses
    the pod (InvalidPreference), so the filter rejects it there, with the reason, whatever the policy."""
    one = [container("a", {"cpu": 2, "memory": "1Gi"})]
    pod = annotated_pod(PIN, one)
    no_memory = nrt_doc("n1", [zone(0, {"cpu": 4}), zone(1, {"cpu": 4})], policy=policy)
    verdict, vec = verdicts(pod, no_memory)
    assert isinstance(verdict, Reject) and verdict.reason.startswith("pod preference not met: ") and not vec
    assert "memory-pinning" in verdict.notes[0] and "Static" in verdict.notes[0]
    if policy == "best-effort":  # not filtered upstream: a pod without the annotation passes, unchanged
        plain, plain_vec = verdicts(annotated_pod({}, one), no_memory)
        assert isinstance(plain, Fit) and plain_vec
    listed, listed_vec = verdicts(pod, nrt_doc("n1", zones(), policy=policy))
    assert isinstance(listed, Fit) and listed_vec


@pytest.mark.parametrize("policy", ["best-effort", "none"])
def test_memory_pinning_true_the_filter_rejects_is_what_the_node_refuses(policy: str) -> None:
    """The same node state on both sides: memory manager None publishes no memory per zone, and its
    admission refuses the pod (where the NUMA filter checks nothing else); with Static both pass."""
    from numaplane.nrt.from_manager import NRTPublisher
    from numaplane.policy.manager import ResourceManager
    from numaplane.topology.model import synthetic

    machine = synthetic(
        sockets=1, numa_per_socket=2, cores_per_numa=4, threads_per_core=2, memory_per_numa_bytes=8 << 30
    )
    pod = annotated_pod(PIN, [container("a", {"cpu": 2, "memory": "1Gi"})])
    for memory, admitted in (
        ({"policy": "None"}, False),
        ({"policy": "Static", "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}]}, True),
    ):
        rm = ResourceManager(machine, {"topologyManager": {"policy": policy}, "memoryManager": memory})
        nrt = NRTPublisher(rm, "n1").publish()
        verdict, vec = filter_node(pod, nrt, node_doc("n1")), Pipeline()
        vec.update_node("n1", nrt, node_doc("n1"))
        assert isinstance(verdict, Fit) is admitted is bool(vec.feasible(pod)[0])
        assert rm.admit(pod).admitted is admitted


def test_restricted_judged_as_single_numa_node_says_so() -> None:
    big = [container("a", {"cpu": 6, "memory": "1Gi"})]
    verdict, _ = verdicts(
        annotated_pod({"numaplane.io/topology-policy": "restricted"}, big), nrt_doc("n1", zones(), policy="best-effort")
    )
    assert isinstance(verdict, Reject)
    assert any("judged as single-numa-node" in note and "does not fit" in note for note in verdict.notes)


@pytest.mark.parametrize(
    ("notes", "named"),
    [({"numaplane.io/full-pcpus": "true"}, "full-pcpus"), ({"numaplane.io/isolated-cpus": "require"}, "isolated-cpus")],
)
def test_unjudged_preferences_are_named_in_the_verdict(notes: dict[str, str], named: str) -> None:
    """full-pcpus true / isolated-cpus require: an NRT does not describe cores or isolation; the
    verdict says the preference was not judged (the documented exception)."""
    verdict, vec = verdicts(annotated_pod(notes, [container("a", {"cpu": 2, "memory": "1Gi"})]), nrt_doc("n1", zones()))
    assert isinstance(verdict, Fit) and vec
    assert any(note.startswith("not judged") and named in note for note in verdict.notes)


def test_the_allocation_request_is_read_once_by_the_filter_the_pipeline_and_the_admission(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One notion: the pod's annotations are parsed once, whoever asks (filter, score, pipeline, admission)."""
    from numaplane.policy import preferences
    from numaplane.policy.manager import ResourceManager
    from numaplane.topology.model import synthetic

    calls: list[object] = []
    real = preferences.parse_preferences

    def counting(*args: Any, **kwargs: Any) -> preferences.PodPreferences:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(preferences, "parse_preferences", counting)
    pod = annotated_pod(
        {"numaplane.io/topology-scope": "pod", "numaplane.io/cpu-strategy": "spread-cores"}, TWO_CONTAINERS
    )
    doc = nrt_doc("n1", zones(), scope="container")
    verdicts(pod, doc)
    score(pod, doc, None, ScoringStrategy("LeastAllocated"))
    machine = synthetic(
        sockets=1, numa_per_socket=2, cores_per_numa=4, threads_per_core=2, memory_per_numa_bytes=8 << 30
    )
    ResourceManager(machine, {"topologyManager": {"policy": "single-numa-node"}}).admit(pod)
    assert len(calls) == 1
    assert preferences.allocation_request(pod) is preferences.allocation_request(pod)
    changed = pod.with_changes(annotations={"numaplane.io/cpu-strategy": "bogus"})
    assert preferences.allocation_request(changed).invalid is not None  # a changed pod computes its own
