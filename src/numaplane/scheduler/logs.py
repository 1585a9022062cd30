"""The scheduler's logging set-up is the shared one: :func:`numaplane.observability.logs.configure_logging`.

Kept as an import path for existing callers (``bench/``); new code imports :mod:`numaplane.observability.logs`.
"""

from numaplane.observability.logs import configure_logging

__all__ = ["configure_logging"]
