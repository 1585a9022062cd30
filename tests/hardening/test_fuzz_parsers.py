"""Bounded fuzzing of every parser of untrusted input (issue 15): only the documented error types
escape, and no input takes more than ``MAX_SECONDS``. ``bench/fuzz.py`` runs the same targets longer."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import pytest
from fuzz_targets import MAX_SECONDS, TARGETS, Target
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

EXAMPLES = 120


@pytest.mark.parametrize("target", TARGETS, ids=[t.name for t in TARGETS])
def test_only_documented_errors_escape_and_work_is_bounded(target: Target) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )
    @given(st.data())
    def run(data: st.DataObject) -> None:
        value: Any = data.draw(target.strategy)
        started = time.perf_counter()
        with contextlib.suppress(target.errors):
            target.run(value)
        assert time.perf_counter() - started < MAX_SECONDS

    run()
