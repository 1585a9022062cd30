"""Live reconfiguration: watch the config file, apply valid changes, reject invalid ones.

The watcher polls the file's identity (``mtime_ns``, size, inode) every ``interval_seconds`` (works
with editors that replace the file and with Kubernetes ConfigMap volumes, whose symlink swap changes
the inode); a changed identity with the same content as the config in force is ignored. A changed
content is parsed (YAML or JSON, :func:`read_config`) and handed to ``apply`` — the agent's
``ResourceManager.reconfigure`` inside its state-machine serialisation, which changes policies for *new*
admissions only and leaves existing allocations untouched.

An invalid document (syntax, schema, or a conflict with current allocations, e.g. reserving a CPU a
container holds) is rejected as a whole: the reason is logged, counted
(``numaplane_agent_config_reloads{result="rejected"}``), exposed as
``numaplane_agent_config_rejected{reason=…}`` and in ``/readyz``'s details, and the old config stays.
A file that disappears keeps the old config too.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import structlog
import yaml

from numaplane.agent.background import BackgroundLoop
from numaplane.agent.errors import AgentConfigError
from numaplane.agent.metrics import AgentMetrics
from numaplane.documents import load_yaml
from numaplane.policy.errors import PolicyConfigError

__all__ = ["ConfigWatcher", "read_config"]

log = structlog.get_logger("numaplane.agent")

#: Applies a parsed document; raises ``PolicyConfigError`` (incl. ``ReconfigureRejected``) to refuse it.
Apply = Callable[[Mapping[str, Any]], Awaitable[None]]


def read_config(path: str | os.PathLike[str]) -> tuple[dict[str, Any], str]:
    """Parse the config file; return ``(document, content digest)``. Raises :class:`AgentConfigError`."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise AgentConfigError(f"cannot read config file {path}: {exc}") from None
    digest = hashlib.sha256(raw).hexdigest()
    try:
        doc = load_yaml(raw.decode("utf-8")) if raw.strip() else {}
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise AgentConfigError(f"config file {path} is not valid YAML/JSON: {exc}") from None
    except RecursionError:
        raise AgentConfigError(f"config file {path} nests too deeply") from None
    except ValueError as exc:  # e.g. an integer over 4,300 digits (PyYAML converts with int())
        raise AgentConfigError(f"config file {path} holds an unusable value: {str(exc)[:200]}") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise AgentConfigError(f"config file {path} must hold a mapping, not {type(doc).__name__}")
    return doc, digest


def _identity(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


class ConfigWatcher(BackgroundLoop):
    """Polls ``path`` and applies changes (see the module docstring). ``last_error`` is ``""`` when fine."""

    task_name = "config-watcher"

    def __init__(
        self,
        path: str | os.PathLike[str],
        apply: Apply,
        *,
        interval_seconds: float = 1.0,
        metrics: AgentMetrics | None = None,
        initial_digest: str = "",
    ) -> None:
        self.path = Path(path)
        self.apply = apply
        self.interval_seconds = interval_seconds
        self.metrics = metrics
        self.applied_digest = initial_digest
        self.last_error = ""
        self.applied = 0
        self.rejected = 0
        self._identity = _identity(self.path)
        self._missing_logged = False

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_seconds)
            try:
                await self.check()
            except Exception as exc:  # the watcher must survive anything
                log.error("config watcher error", error=str(exc))

    async def check(self) -> bool:
        """Look at the file once; apply a changed content. Returns whether a new config was applied."""
        identity = await asyncio.to_thread(_identity, self.path)
        if identity is None:
            if not self._missing_logged:
                log.warning("config file missing; keeping the config in force", path=str(self.path))
                self._missing_logged = True
            return False
        self._missing_logged = False
        if identity == self._identity:
            return False
        self._identity = identity
        try:
            doc, digest = await asyncio.to_thread(read_config, self.path)
        except AgentConfigError as exc:
            self._reject(str(exc))
            return False
        if digest == self.applied_digest:
            return False
        try:
            await self.apply(doc)
        except PolicyConfigError as exc:
            self._reject(str(exc), digest)
            return False
        self.applied_digest = digest
        self.applied += 1
        self.last_error = ""
        if self.metrics is not None:
            self.metrics.config_reloads.labels(result="applied").inc()
            self.metrics.config_valid.set(1)
            self.metrics.config_generation.inc()
            self.metrics.set_config_rejected("")
        log.info("config applied", path=str(self.path), digest=digest[:12])
        return True

    def _reject(self, reason: str, digest: str = "") -> None:
        self.rejected += 1
        self.last_error = reason
        if self.metrics is not None:
            self.metrics.config_reloads.labels(result="rejected").inc()
            self.metrics.config_valid.set(0)
            self.metrics.set_config_rejected(reason)
        log.error("config rejected; the previous config stays in force", path=str(self.path), reason=reason)
