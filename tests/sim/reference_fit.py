"""FitArrays as it was before its columns were laid out per resource and its scores memoised, kept
verbatim as a test oracle for ``test_sim_fit_equivalence``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from numaplane.resources.pod import Pod
from numaplane.resources.quantity import Quantity

_DEFAULT_CPU_MILLI = 100
_DEFAULT_MEMORY_MILLI = 200 * 1024 * 1024 * 1000


def _milli(amount: Fraction) -> int:
    return -((-amount.numerator * 1000) // amount.denominator)  # ceil, like MilliValue


class ReferenceFitArrays:
    """Free and allocatable resources per node (rows) and resource (columns), in thousandths."""

    def __init__(self, names: Sequence[str], allocatable: Sequence[Mapping[str, Quantity]]) -> None:
        columns: list[str] = []
        for alloc in allocatable:
            for r in alloc:
                if r not in columns:
                    columns.append(r)
        self.names = list(names)
        self.columns = {r: i for i, r in enumerate(columns)}
        self.alloc = np.zeros((len(names), len(columns)), dtype=np.int64)
        for row, alloc in enumerate(allocatable):
            for r, q in alloc.items():
                self.alloc[row, self.columns[r]] = _milli(q.amount)
        self.used = np.zeros_like(self.alloc)
        self._cpu = self.columns.get("cpu")
        self._mem = self.columns.get("memory")
        self._pods = self.columns.get("pods")

    def request_vector(self, requests: Mapping[str, Quantity]) -> tuple[npt.NDArray[np.int64], bool]:
        """The pod's request row (plus one pod) and whether every requested resource is known."""
        vec = np.zeros(len(self.columns), dtype=np.int64)
        known = True
        for r, q in requests.items():
            if q.is_zero():
                continue
            col = self.columns.get(r)
            if col is None:
                known = False
                continue
            vec[col] = _milli(q.amount)
        if self._pods is not None:
            vec[self._pods] = 1000
        return vec, known

    def feasible(self, pod: Pod) -> npt.NDArray[np.bool_]:
        """Nodes where the pod's effective requests fit in allocatable − used."""
        vec, known = self.request_vector(pod.effective_requests())
        if not known:
            return np.zeros(len(self.names), dtype=np.bool_)
        fits: npt.NDArray[np.bool_] = np.all(self.used + vec <= self.alloc, axis=1)
        return fits

    def scores(self, pod: Pod) -> npt.NDArray[np.int64]:
        """LeastAllocated over cpu and memory with the scheduler's non-zero defaults, 0–100."""
        reqs = pod.effective_requests()
        total = np.zeros(len(self.names), dtype=np.int64)
        for col, name, default in (
            (self._cpu, "cpu", _DEFAULT_CPU_MILLI),
            (self._mem, "memory", _DEFAULT_MEMORY_MILLI),
        ):
            if col is None:
                continue
            q = reqs.get(name)
            req = _milli(q.amount) if q is not None and not q.is_zero() else default
            cap = self.alloc[:, col]
            requested = self.used[:, col] + req
            ok = (cap > 0) & (requested <= cap)
            part = np.where(ok, ((cap - requested) * 100) // np.where(cap > 0, cap, 1), 0)
            total += part
        return total // 2

    def add(self, row: int, requests: Mapping[str, Quantity], sign: int = 1) -> None:
        vec, _ = self.request_vector(requests)
        self.used[row] += sign * vec

    def cpu_used_fraction(self) -> float:
        if self._cpu is None:
            return 0.0
        cap = int(self.alloc[:, self._cpu].sum())
        return float(self.used[:, self._cpu].sum()) / cap if cap else 0.0
