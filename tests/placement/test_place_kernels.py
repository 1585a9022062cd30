"""Kernel helpers against straightforward per-row code."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from numaplane.placement.arrays.kernels import first_slot


@given(
    mask=st.integers(0, 20).flatmap(lambda slots: hnp.arrays(np.bool_, st.tuples(st.just(slots), st.integers(0, 30))))
)
def test_first_slot_keeps_only_the_first_true_of_each_row(mask: np.ndarray) -> None:
    got = first_slot(mask)
    assert got.shape == mask.shape
    for row in range(mask.shape[1]):
        hits = np.flatnonzero(mask[:, row])
        want = np.zeros(mask.shape[0], bool)
        if len(hits):
            want[hits[0]] = True
        assert (got[:, row] == want).all()


def test_first_slot_handles_more_slots_than_a_byte_counts() -> None:
    mask = np.zeros((300, 3), bool)
    mask[299, 0] = True
    mask[[3, 280], 1] = True
    got = first_slot(mask)
    assert [np.flatnonzero(got[:, r]).tolist() for r in range(3)] == [[299], [3], []]
