"""Structured logs for the agent: structlog over stdlib logging, one JSON object per line on stderr.

Library code logs with ``structlog.get_logger("numaplane.agent")`` and key/value pairs (``pod``,
``container``, ``reason`` …); configuring the output is the CLI's job (:func:`configure_logging`).
Stdlib records (grpc, aiohttp, the NRI adapter) go through the same renderer, so every line carries
``timestamp`` (ISO 8601, UTC), ``level``, ``logger`` and ``event``.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

__all__ = ["configure_logging"]


def configure_logging(fmt: str = "json", level: str = "info") -> None:
    """Send every log line to stderr as JSON (``fmt="json"``) or as console text."""
    pre_chain: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        # drop filtered-out levels first, before any rendering work
        processors=[
            structlog.stdlib.filter_by_level,
            *pre_chain,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    renderer: Any = (
        structlog.processors.JSONRenderer() if fmt == "json" else structlog.dev.ConsoleRenderer(colors=False)
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=pre_chain,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                renderer,
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
