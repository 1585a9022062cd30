"""The NUMA filter judges a pod at its own ``numaplane.io/topology-scope`` / ``topology-policy``
(``placement/effective.py``), in the per-node function and the vectorised pipeline alike, and rejects a
pod whose preferences the node would refuse (``InvalidPreference``)."""

from __future__ import annotations

from typing import Any

import pytest
from place_helpers import container, node_doc, nrt_doc, zone

from numaplane.placement.filter import filter as filter_node
from numaplane.placement.pipeline import Pipeline
from numaplane.placement.result import Fit, Reject
from numaplane.placement.score import ScoringStrategy, score
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
    assert isinstance(verdict, Reject) and verdict.reason == "invalid pod preference"
    assert "cpu-strategy" in verdict.notes[0] and "fastest" in verdict.notes[0]
    assert not vec


def test_a_policy_laxer_than_the_nodes_is_refused_as_the_node_refuses_it() -> None:
    pod = annotated_pod({"numaplane.io/topology-policy": "best-effort"}, TWO_CONTAINERS)
    verdict, vec = verdicts(pod, nrt_doc("n1", zones(), policy="single-numa-node"))
    assert isinstance(verdict, Reject) and "relax" in verdict.notes[0]
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
