"""Per pod shape, the rows already evaluated: refresh only the nodes changed since (issue 30).

Pods come in few *shapes*: what the NUMA filter and score read of a pod — every container's requests,
init / sidecar kind, the overhead, pod-level requests, the QoS class and the effective placement
preferences (``placement/model/effective.py``). Names, labels and the rest of the pod never change a verdict
or a score. Each row's verdict and score depend on that row alone (``placement/arrays/pipeline.py``), and a
:class:`~numaplane.placement.arrays.cluster.ClusterArrays` gives a row a new ``stamp`` whenever it writes or
clears it, so a result row computed for a shape stays exact until the row's stamp changes.

:class:`RowMemo` keeps, per shape, one array of results with the stamps it was computed at, and asks
its caller to recompute only the rows whose stamp changed (and rows added since). At most
``capacity`` shapes and about ``budget`` bytes of rows are kept (least recently used dropped); rows of
small integers (scores 0..100) are kept in a ``narrow`` integer type when every value fits it, so that a
large cluster keeps as many shapes as a small one (with int64 rows, 4 MiB held 26 shapes of 20,000
nodes: every pod of a 128-shape workload missed). Pure: no I/O.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from numaplane.placement.arrays.cluster import I64
from numaplane.placement.model.effective import effective_placement
from numaplane.resources.pod import Container, Pod
from numaplane.resources.quantity import Quantity

__all__ = ["RowMemo", "pod_shape"]

_SHAPE = "_numaplane_placement_shape"
_T = TypeVar("_T", bound=np.generic)


def _items(resources: Mapping[str, Quantity] | None) -> tuple[tuple[str, Quantity], ...] | None:
    return None if resources is None else tuple(sorted(resources.items()))


def _container(c: Container) -> Hashable:
    return (c.init, c.restart_policy, _items(c.requests))


def pod_shape(pod: Pod) -> Hashable:
    """What the NUMA filter and score read of ``pod``: equal shapes get equal verdicts and scores on
    every node (computed once per pod; a pod changed by ``Pod.with_changes`` computes its own)."""
    inputs = (pod.containers, pod.init_containers, pod.overhead, pod.pod_requests_spec, pod.annotations)
    memo = pod.__dict__.get(_SHAPE)
    if (
        memo is not None
        and memo[0][0] is inputs[0]
        and memo[0][1] is inputs[1]
        and memo[0][2] is inputs[2]
        and memo[0][3] is inputs[3]
        and memo[0][4] is inputs[4]
        and memo[1] == pod.qos_class
    ):
        shape: Hashable = memo[2]
        return shape
    shape = _Shape(
        (
            pod.qos_class,
            effective_placement(pod),
            tuple(_container(c) for c in pod.init_containers),
            tuple(_container(c) for c in pod.containers),
            _items(pod.overhead),
            _items(pod.pod_requests_spec),
        )
    )
    pod.__dict__[_SHAPE] = (inputs, pod.qos_class, shape)
    return shape


class _Shape:
    """A shape with its hash computed once (hashing exact quantities is not free)."""

    __slots__ = ("_hash", "key")

    def __init__(self, key: tuple[Hashable, ...]) -> None:
        self.key = key
        self._hash = hash(key)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Shape) and self._hash == other._hash and self.key == other.key


class _Entry(Generic[_T]):
    __slots__ = ("issued", "values")

    def __init__(self, values: npt.NDArray[_T], issued: int) -> None:
        self.values = values
        self.issued = issued  # the last stamp issued when ``values`` were computed


class RowMemo(Generic[_T]):
    """Result rows per shape, refreshed only where a row's stamp changed (module docstring).

    Stamps only grow (a row's new stamp is the cluster's next one), so a row changed since an entry
    was computed is one whose stamp is above the last stamp issued then: an entry keeps one number,
    not a copy of the stamps."""

    def __init__(self, capacity: int = 128, budget: int = 4 << 20, narrow: type[np.integer] | None = None) -> None:
        self.capacity = capacity  # at most this many keys
        self.budget = budget  # and at most about this many bytes of results (a large cluster keeps fewer)
        self.narrow = None if narrow is None else np.iinfo(narrow)  # kept rows' type when the values fit
        self._entries: OrderedDict[Hashable, _Entry[Any]] = OrderedDict()

    def _fits(self, values: npt.NDArray[Any]) -> bool:
        """Whether every value of ``values`` fits :attr:`narrow` (exactly representable there)."""
        narrow = self.narrow
        return narrow is not None and (not len(values) or (narrow.min <= values.min() and values.max() <= narrow.max))

    def _kept(self, values: npt.NDArray[_T]) -> npt.NDArray[Any]:
        return values.astype(self.narrow.dtype) if self.narrow is not None and self._fits(values) else values

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def rows(
        self,
        key: Hashable,
        stamp: I64,
        issued: int,
        compute_all: Callable[[], npt.NDArray[_T]],
        compute_rows: Callable[[I64], npt.NDArray[_T]],
        share: int = 4,
    ) -> npt.NDArray[_T]:
        """The results of every row ``0 .. len(stamp)-1`` for ``key`` (the memo's own array: do not
        modify it; of the ``narrow`` type when the values fit it, so take results out with ``astype``);
        ``issued`` is the last stamp issued. ``compute_all()`` computes every row,
        ``compute_rows(rows)`` the ascending ``rows`` only; more than ``1/share`` of the rows stale
        recompute every row."""
        n = len(stamp)
        entry = self._entries.get(key)
        if entry is None:
            entry = _Entry(self._kept(compute_all()), issued)
            self._entries[key] = entry
            keep = min(self.capacity, max(1, self.budget // max(1, entry.values.nbytes)))
            while len(self._entries) > keep:
                self._entries.popitem(last=False)
            return entry.values
        self._entries.move_to_end(key)
        if entry.issued == issued and len(entry.values) == n:
            return entry.values
        known = min(len(entry.values), n)
        stale = np.flatnonzero(stamp[:known] > entry.issued)
        if n > known:
            stale = np.concatenate((stale, np.arange(known, n)))
        if len(stale) * share > n:
            entry.values, entry.issued = self._kept(compute_all()), issued
            return entry.values
        values = entry.values
        if len(values) != n:
            grown = np.zeros(n, values.dtype)
            grown[:known] = values[:known]
            values = grown
        if len(stale):
            fresh = compute_rows(stale)
            if values.dtype != fresh.dtype and not self._fits(fresh):
                values = values.astype(fresh.dtype)  # a value the narrow type cannot hold: widen the row
            values[stale] = fresh
        entry.values, entry.issued = values, issued
        return values
