"""Structured logs: structlog over stdlib logging, one line per event on stderr.

structlog's events and stdlib records (grpc, aiohttp, lightkube, the kube runtime, the operator's
controllers) go through one renderer, so every line carries ``timestamp`` (ISO 8601, UTC),
``level``, ``logger`` and ``event`` plus the bound keys (``node``, ``pod``, ``reason`` …), as one
JSON object (``fmt="json"``) or as console text for humans (``fmt="console"``, no colours).
Exceptions are rendered into the line (``exception``), stack info too.

Library code only calls ``structlog.get_logger("numaplane.<component>")`` (or stdlib
``logging.getLogger``); configuring the output is the command line's job, once per process
(:func:`configure_logging` replaces the root logger's handlers). Events below ``level`` are dropped
before any processing. Tests use ``structlog.testing.capture_logs``.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Final, TextIO

import structlog

__all__ = ["LOG_FORMATS", "LOG_LEVELS", "QUIET_LIBRARY_LOGGERS", "configure_logging"]

LOG_FORMATS: Final = ("json", "console")
#: The ``--log-level`` values every component accepts, and the stdlib level of each.
LOG_LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}

#: Library loggers held at warning unless ``--log-level debug``.
QUIET_LIBRARY_LOGGERS: Final = ("httpx", "httpx2", "httpcore", "httpcore2")


def configure_logging(fmt: str = "json", level: str = "info", *, stream: TextIO | None = None) -> None:
    """Send every log record to ``stream`` (default: stderr) in ``fmt`` at ``level`` and above.

    Raises ``ValueError`` for a format not in :data:`LOG_FORMATS` or a level not in :data:`LOG_LEVELS`.
    """
    if fmt not in LOG_FORMATS:
        raise ValueError(f"log format {fmt!r} is not one of {', '.join(LOG_FORMATS)}")
    threshold = LOG_LEVELS.get(level.lower())
    if threshold is None:
        raise ValueError(f"log level {level!r} is not one of {', '.join(LOG_LEVELS)}")
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
            structlog.stdlib.filter_by_level,  # drop disabled levels before any other processing
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
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(threshold)
    # HTTP client libraries log every request at info: one line per GET/PATCH/watch would drown the
    # component's own decisions (the operator printed ~190 such lines per 30 s idle). They speak at
    # --log-level debug only.
    for noisy in QUIET_LIBRARY_LOGGERS:
        logging.getLogger(noisy).setLevel(threshold if threshold <= logging.DEBUG else max(threshold, logging.WARNING))
