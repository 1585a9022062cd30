"""Filter verdicts: :class:`Fit` and :class:`Reject`, with enough detail to explain them.

A :class:`Reject` carries the plugin's exact status message in :attr:`Reject.reason` and its status
code in :attr:`Reject.code` (``Unschedulable`` or ``Error``), so a kube-scheduler extender can return
them verbatim. Everything else (which container, which resource emptied the NUMA mask, what each zone
lacks, zones that were skipped) is explanation for humans and for ``numaplane explain``; it never
changes the verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from numaplane.resources.quantity import Quantity

__all__ = [
    "ALIGN_REASONS",
    "MSG_APP",
    "MSG_INCONSISTENT",
    "MSG_INIT",
    "MSG_INVALID_DATA",
    "MSG_MALFORMED",
    "MSG_NODE_NOT_FOUND",
    "MSG_NO_USABLE_ZONE",
    "MSG_POD",
    "MSG_SIDECAR",
    "MSG_UNEXPLAINED",
    "Fit",
    "Reject",
    "StatusCode",
    "Verdict",
    "ZoneShortfall",
]

StatusCode = Literal["Unschedulable", "Error"]

# Upstream status messages (scheduler-nrt.md A.9).
MSG_NODE_NOT_FOUND = "node not found"
MSG_INVALID_DATA = "invalid node topology data"
MSG_POD = "cannot align pod"
MSG_INIT = "cannot align init container"
MSG_SIDECAR = "cannot align sidecar container"
MSG_APP = "cannot align container"
MSG_INCONSISTENT = "inconsistent resource accounting"
# numaplane's own messages for data upstream cannot even load (never produced by upstream).
MSG_MALFORMED = "malformed node topology data"
#: The reason of a node the vectorised NUMA filter rejects but the per-node explanation does not.
MSG_UNEXPLAINED = "node(s) rejected by the NUMA filter"
#: The ``cannot align`` rejections: the only ones evicting pods can help.
ALIGN_REASONS = frozenset({MSG_POD, MSG_INIT, MSG_SIDECAR, MSG_APP})
MSG_NO_USABLE_ZONE = "no usable NUMA zone in node topology data"


@dataclass(frozen=True, slots=True)
class ZoneShortfall:
    """Zone ``zone`` (NUMA ``numa_id``) cannot give ``requested`` of ``resource``.

    ``available`` is ``None`` when the zone does not list the resource at all. Units: counts for CPUs
    and devices, bytes for memory and hugepages.
    """

    zone: str
    numa_id: int
    resource: str
    requested: Quantity
    available: Quantity | None

    def __str__(self) -> str:
        have = "not listed" if self.available is None else f"{self.available} available"
        return f"{self.zone}: {self.resource} {self.requested} requested, {have}"


@dataclass(frozen=True)
class Fit:
    """The node passes the NUMA filter.

    ``checked`` is False when the node passed without a per-zone check (no NRT, policy not filtered,
    BestEffort pod without devices); ``notes`` says why. ``placements`` lists ``(unit, numa_id)`` for
    each aligned unit (``"pod"`` in pod scope, container names in container scope): the NUMA node the
    kubelet would most likely pick (the lowest feasible id).
    """

    checked: bool = True
    placements: tuple[tuple[str, int], ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def fit(self) -> bool:
        return True

    def explain(self) -> str:
        parts = [f"{unit} → NUMA {numa}" for unit, numa in self.placements]
        return "; ".join(["fits", *parts, *self.notes])


@dataclass(frozen=True)
class Reject:
    """The node fails the NUMA filter with status ``code`` and message ``reason`` (upstream text).

    ``unit`` names the failing container (or ``"pod"``); ``resource`` is the requested resource that
    left no feasible zone or that the node does not advertise; ``shortfalls`` says, zone by zone, what
    was missing for the failing unit; ``notes`` carries anything else (skipped zones, data problems).
    """

    reason: str
    code: StatusCode = "Unschedulable"
    unit: str | None = None
    resource: str | None = None
    shortfalls: tuple[ZoneShortfall, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def fit(self) -> bool:
        return False

    def explain(self) -> str:
        parts = [self.reason]
        if self.unit is not None:
            parts.append(f"unit {self.unit}")
        if self.resource is not None:
            parts.append(f"resource {self.resource}")
        parts.extend(str(s) for s in self.shortfalls)
        parts.extend(self.notes)
        return "; ".join(parts)


Verdict = Fit | Reject
