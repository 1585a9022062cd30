"""Errors of the e2e suite.

::

    E2EError                 base: the suite itself could not run (not a failed check)
    └── SetupError           the cluster cannot be reached, or an argument is unusable
"""

from __future__ import annotations

__all__ = ["E2EError", "SetupError"]


class E2EError(Exception):
    """The suite could not run; a failed *check* is a result, never an exception."""


class SetupError(E2EError):
    """The cluster cannot be reached, or an option is unusable."""
