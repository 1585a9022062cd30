"""What the exporter's probes report about its last cycles (``/readyz`` details)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from numaplane.exporter.errors import ExporterError

__all__ = ["ExporterStatus"]


@dataclass(slots=True)
class ExporterStatus:
    """What the probes report. Times are the exporter's ``clock.monotonic()`` seconds (``None``: never)."""

    podresources_fetched: bool = False
    topology_updated: bool = False
    last_success_at: float | None = None
    last_error: ExporterError | None = None
    last_error_at: float | None = None
    cycles: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    #: With ``--lock-file``: ``held: <path>`` or ``waiting: <path> is held by another exporter (...)``.
    node_lock: str | None = None

    def to_dict(self, now: float) -> dict[str, Any]:
        """The ``/readyz`` details at ``now`` (the same clock's monotonic seconds as the times held)."""
        return {
            "podresources_fetched": self.podresources_fetched,
            "topology_updated": self.topology_updated,
            "seconds_since_success": None if self.last_success_at is None else round(now - self.last_success_at, 3),
            "last_error": None
            if self.last_error is None
            else {"kind": self.last_error.kind, "message": self.last_error.message},
            "cycles": self.cycles,
            "outcomes": dict(self.outcomes),
            **({"node_lock": self.node_lock} if self.node_lock is not None else {}),
        }
