"""The condition-transition rule's one home (``numaplane.kube.conditions``)."""

from __future__ import annotations

from numaplane.kube.conditions import condition, find_condition, transition_time

EARLIER = "2025-01-01T00:00:00Z"
NOW = "2025-01-01T00:05:00Z"


def test_a_new_condition_transitions_now() -> None:
    assert transition_time(None, "True", NOW) == NOW


def test_the_same_status_keeps_the_previous_transition_time() -> None:
    previous = {"type": "Ready", "status": "True", "lastTransitionTime": EARLIER, "reason": "Old"}
    got = condition("Ready", "True", "New", "a new message", previous=previous, now=NOW)
    assert got == {
        "type": "Ready",
        "status": "True",
        "lastTransitionTime": EARLIER,
        "reason": "New",
        "message": "a new message",
    }


def test_a_flipped_status_moves_the_transition_time() -> None:
    previous = {"type": "Ready", "status": "False", "lastTransitionTime": EARLIER}
    assert condition("Ready", "True", "Up", "", previous=previous, now=NOW)["lastTransitionTime"] == NOW


def test_a_previous_condition_without_a_time_takes_now() -> None:
    assert transition_time({"status": "True"}, "True", NOW) == NOW
    assert transition_time({"status": "True", "lastTransitionTime": ""}, "True", NOW) == NOW


def test_extra_fields_are_kept() -> None:
    got = condition(
        "Available", "True", "Available", "", previous=None, now=NOW, observedGeneration=3, lastProbeTime=NOW
    )
    assert got["observedGeneration"] == 3
    assert got["lastProbeTime"] == NOW


def test_find_condition_by_type() -> None:
    conditions = [{"type": "A", "status": "True"}, {"type": "B", "status": "False"}]
    assert find_condition(conditions, "B") == {"type": "B", "status": "False"}
    assert find_condition(conditions, "C") is None
    assert find_condition(None, "A") is None
