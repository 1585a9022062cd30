"""Structured logging for the daemon: structlog over stdlib logging, JSON lines on stderr.

structlog's own events and stdlib records (grpc, aiohttp, asyncio) go through one renderer, so every
line is one JSON object with ``timestamp`` (ISO 8601, UTC), ``level``, ``logger`` and ``event``,
plus the bound keys (``node``, ``trigger``, ``kind``, ...). ``fmt="console"`` renders the same
events for humans. Configuring is the CLI's job; library code only calls
``structlog.get_logger("numaplane.exporter")``, so tests can use ``structlog.testing.capture_logs``.
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
