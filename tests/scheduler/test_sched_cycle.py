"""The standalone decision drives the shared scheduling cycle: ``percentageOfNodesToScore`` below 100
makes it search as kube-scheduler does (a share of the nodes, from a rotating start, in the order the
nodes were added); the default, 100, scores every node."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sched_helpers import node_doc, pod_doc

from numaplane.resources.pod import parse_pod
from numaplane.scheduler.config import SchedulerConfig
from numaplane.scheduler.decision import decide
from numaplane.scheduler.state import SchedulerState


def _state(percentage: int, nodes: int) -> SchedulerState:
    config = replace(SchedulerConfig(cache_mode="passthrough"), percentage_of_nodes_to_score=percentage)
    state = SchedulerState(config)
    for i in range(nodes):
        state.node_upserted(node_doc(f"n{i:03d}"))
    return state


def test_every_node_is_scored_by_default() -> None:
    state = _state(100, 200)
    pod = parse_pod(pod_doc("p"))
    for _ in range(2):
        decision = decide(state, pod)
        assert (decision.node, len(decision.scores), decision.rejected) == ("n000", 200, 0)


@pytest.mark.parametrize(("percentage", "found"), [(50, 100), (0, 100), (75, 150)])
def test_a_lower_percentage_searches_a_share_from_a_rotating_start(percentage: int, found: int) -> None:
    state = _state(percentage, 200)
    pod = parse_pod(pod_doc("p"))
    first = decide(state, pod)
    assert (first.node, sorted(first.scores)) == ("n000", [f"n{i:03d}" for i in range(found)])
    second = decide(state, pod)  # the next search starts where the last one stopped, wrapping around
    expect = sorted(f"n{(found + i) % 200:03d}" for i in range(found))
    assert (second.node, sorted(second.scores)) == (expect[0], expect)
