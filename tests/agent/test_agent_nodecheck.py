"""The agent's start-up check of the Node's allocatable CPU against the CPUs its policy reserves."""

from __future__ import annotations

from typing import Any

import pytest

from numaplane.agent.nodecheck import allocatable_cpu_problem


def node(capacity: str, allocatable: str) -> dict[str, Any]:
    return {"status": {"capacity": {"cpu": capacity}, "allocatable": {"cpu": allocatable}}}


@pytest.mark.parametrize(
    ("capacity", "allocatable", "reserved"),
    [("2", "1", 1), ("2", "900m", 1), ("64", "60", 2), ("2", "2", 0), ("4", "3500m", 0)],
)
def test_no_warning_when_the_kubelet_reserves_at_least_as_much(capacity: str, allocatable: str, reserved: int) -> None:
    assert allocatable_cpu_problem(node(capacity, allocatable), reserved) is None


def test_warning_when_allocatable_includes_reserved_cpus() -> None:
    # measured on a real kubelet v1.36.2 with cpuManagerPolicy none and no reservedSystemCPUs
    problem = allocatable_cpu_problem(node("2", "2"), 1)
    assert problem is not None
    assert "allocatable cpu is 2000m" in problem and "reserves 1 of the 2000m" in problem
    assert "reservedSystemCPUs" in problem
    assert allocatable_cpu_problem(node("4", "3500m"), 1) is not None


@pytest.mark.parametrize(
    "doc",
    [{}, {"status": {}}, {"status": {"capacity": {"cpu": "2"}}}, node("2", "lots"), {"status": "x"}],
)
def test_nothing_to_say_without_a_readable_status(doc: dict[str, Any]) -> None:
    assert allocatable_cpu_problem(doc, 1) is None
