"""Errors of the scheduler component (extender, standalone scheduler, explain).

Exception tree::

    SchedulerError                 (base)
    ├── SchedulerConfigError       an invalid configuration file or flag value (also a ValueError)
    └── ExtenderRequestError       a malformed kube-scheduler extender request body; the HTTP server
                                   answers 400 with :attr:`ExtenderRequestError.reason` (also a ValueError)
        ├── DecodeBusy             every decode worker holds a large body already (HTTP 429, Retry-After)
        └── DecodeWorkerLost       the worker decoding the body died or timed out (HTTP 503)

Kubernetes API failures keep their own types (:mod:`numaplane.kube.errors`); per-node data problems
never raise, they become rejections with a reason (:mod:`numaplane.placement`).
"""

from __future__ import annotations

__all__ = ["DecodeBusy", "DecodeWorkerLost", "ExtenderRequestError", "SchedulerConfigError", "SchedulerError"]


class SchedulerError(Exception):
    """Base class of the scheduler component's errors."""


class SchedulerConfigError(SchedulerError, ValueError):
    """A configuration value (file or flag) is invalid; the message names it."""


class ExtenderRequestError(SchedulerError, ValueError):
    """An extender request body cannot be used; ``reason`` says why (sent back with HTTP 400)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class DecodeBusy(ExtenderRequestError):
    """Every worker of the decode pool holds a large body already (HTTP 429 with ``Retry-After``)."""


class DecodeWorkerLost(ExtenderRequestError):
    """The worker process decoding this body died or did not answer in time (HTTP 503); it is replaced."""
