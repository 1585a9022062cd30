"""The shared logging set-up: JSON or console lines, structlog and stdlib records alike, levels."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from numaplane.observability import LOG_FORMATS, LOG_LEVELS, configure_logging


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """configure_logging changes process-wide settings: put them back for the other tests."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    config = structlog.get_config()
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        structlog.configure(**config)


def lines(stream: io.StringIO) -> list[str]:
    return [line for line in stream.getvalue().splitlines() if line]


def test_json_lines_for_structlog_and_stdlib_records(restore_logging: None) -> None:
    stream = io.StringIO()
    configure_logging("json", "info", stream=stream)
    structlog.get_logger("numaplane.obs-test").info("pod admitted", pod="ns/p", cpus=3)
    structlog.get_logger("numaplane.obs-test").debug("dropped below the level")
    logging.getLogger("numaplane.obs-test.stdlib").warning("reconcile %s failed", "operator")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        structlog.get_logger("numaplane.obs-test").exception("it failed")
    first, second, third = (json.loads(line) for line in lines(stream))
    assert first["event"] == "pod admitted" and first["pod"] == "ns/p" and first["cpus"] == 3
    assert first["level"] == "info" and first["logger"] == "numaplane.obs-test"
    assert first["timestamp"].endswith("Z")
    assert second["event"] == "reconcile operator failed" and second["level"] == "warning"
    assert second["logger"] == "numaplane.obs-test.stdlib" and "timestamp" in second
    assert third["level"] == "error" and "RuntimeError: boom" in third["exception"]


def test_console_format_and_debug_level(restore_logging: None) -> None:
    stream = io.StringIO()
    configure_logging("console", "debug", stream=stream)
    structlog.get_logger("numaplane.obs-test").debug("cache resynced", nodes=2)
    [line] = lines(stream)
    assert "cache resynced" in line and "nodes=2" in line and "debug" in line
    assert not line.startswith("{") and "\x1b[" not in line  # text without colours


def test_unknown_format_or_level_is_refused(restore_logging: None) -> None:
    assert LOG_FORMATS == ("json", "console")
    assert list(LOG_LEVELS) == ["debug", "info", "warning", "error"]
    with pytest.raises(ValueError, match="log format"):
        configure_logging("xml", "info")
    with pytest.raises(ValueError, match="log level"):
        configure_logging("json", "loud")
