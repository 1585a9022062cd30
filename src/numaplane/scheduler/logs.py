"""Structured logging of the scheduler processes: structlog over stdlib logging, JSON lines on stderr.

structlog's events and stdlib records (aiohttp, lightkube, the kube runtime) go through one renderer:
one JSON object per line with ``timestamp`` (ISO 8601, UTC), ``level``, ``logger``, ``event`` and the
bound keys. Decision logs use the upstream plugin's key names where they exist (``pod``, ``podUID``,
``node``, ``flow``, ``generation``) so logs of both can be compared. ``fmt="console"`` renders the same
events for humans. Library code only calls ``structlog.get_logger("numaplane.scheduler")``; tests use
``structlog.testing.capture_logs``.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

__all__ = ["configure_logging"]


def configure_logging(fmt: str = "json", level: str = "info") -> None:
    """Route structlog and stdlib logging to stderr as JSON (``fmt="json"``) or console text."""
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Any = (
        structlog.processors.JSONRenderer() if fmt == "json" else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,  # drop disabled levels before any processing
            *shared,
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            renderer,
        ],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
