"""Errors of the operator package.

Exception tree::

    OperatorError                 (base)
    ├── SpecError                 a custom resource is invalid; ``reason`` is the CamelCase condition
    │                             reason (``InvalidSpec``, ``IncorrectName``, ``OverlappingNodeGroups``...)
    │                             and ``problems`` lists every problem found, so one fix round suffices
    └── ReconcileError            applying the desired state failed (wraps a ``numaplane.kube`` error);
                                  the controller retries with backoff

A ``SpecError`` never tears anything down: the controller marks the resource ``Degraded`` with the
reason and message and leaves every deployed object as it was.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["OperatorError", "ReconcileError", "SpecError"]


class OperatorError(Exception):
    """Base class of the operator's errors."""


class SpecError(OperatorError, ValueError):
    """A custom resource is invalid. ``reason`` is a condition reason, ``problems`` the details."""

    def __init__(self, problems: Iterable[str], reason: str = "InvalidSpec") -> None:
        self.problems = list(problems)
        self.reason = reason
        super().__init__("; ".join(self.problems) or reason)


class ReconcileError(OperatorError):
    """Writing the desired state failed; ``retryable`` says whether backing off may help."""

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable
