"""Tell the node's exporter which policy the agent enforces now, in a small node-local file.

The exporter publishes the Topology Manager policy and scope as attributes of the node's
NodeResourceTopology; schedulers filter with them. In agent mode they are the agent's, which change
live when the policy ConfigMap changes. So the agent writes the configuration *in force* to
``--applied-policy-file`` — at start (once the checkpoint and the config file are reconciled) and after
every applied reconfiguration, never after a rejected one — and the exporter
(``numaplane exporter --applied-policy-file``, the same host file) watches it and republishes at once,
without a restart.

Format: the agent's own configuration document (``NodeResourceConfig``, :func:`numaplane.policy.config.parse_config`
reads it back), JSON, with ``metadata.revision`` (the policy revision, when the document had one),
``metadata.node`` and ``metadata.appliedAt`` (UTC, RFC 3339). Written atomically (temp file, ``fsync``,
rename: a reader sees the old or the new document, never a mix), mode 0644 (nothing secret in it).

A failing write never stops the agent: it is counted (``numaplane_agent_applied_policy_writes{result="error"}``),
logged once per streak, shown in ``/readyz``'s details (``appliedPolicyFile``), and retried with the
next change. A path that exists and is not a regular file is a configuration error at start.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import structlog

from numaplane.agent.checkpoint import write_atomically
from numaplane.agent.errors import AgentConfigError
from numaplane.kube.clock import Clock, SystemClock, format_time
from numaplane.policy.config import NodeResourceConfig

__all__ = ["AppliedPolicyWriter", "applied_document"]

log = structlog.get_logger("numaplane.agent")


def applied_document(config: NodeResourceConfig, *, node: str, revision: str | None, now: datetime) -> bytes:
    """The file's bytes for ``config`` (see the module docstring); ``now`` is the wall time written as
    ``appliedAt`` (Kubernetes ``Time``)."""
    metadata: dict[str, str] = {"node": node, "appliedAt": format_time(now)}
    if revision is not None:
        metadata["revision"] = revision
    doc = {**config.to_dict(), "metadata": metadata}
    return (json.dumps(doc, sort_keys=True, indent=1) + "\n").encode()


class AppliedPolicyWriter:
    """Writes the configuration in force to ``path``; ``on_result(ok)`` counts writes; ``last_error``
    is ``""`` while the file is current."""

    def __init__(
        self, path: Path, node: str, *, on_result: Callable[[bool], None] | None = None, clock: Clock | None = None
    ) -> None:
        self.path = path
        self.clock: Clock = clock or SystemClock()
        self.node = node
        self.writes = 0
        self.last_error = ""
        self._on_result = on_result or (lambda _ok: None)
        self._lock = asyncio.Lock()

    def prepare(self) -> None:
        """Refuse a path that exists and is not a regular file."""
        if (self.path.exists() or self.path.is_symlink()) and not self.path.is_file():
            raise AgentConfigError(f"applied policy file {self.path} exists and is not a regular file")

    async def write(self, config: NodeResourceConfig, revision: str | None) -> bool:
        """Replace the file with ``config`` (off the event loop; writes never interleave)."""
        payload = applied_document(config, node=self.node, revision=revision, now=self.clock.now())
        async with self._lock:
            try:
                await asyncio.to_thread(write_atomically, self.path, payload, 0o644)
            except OSError as exc:
                self._on_result(False)
                if not self.last_error:
                    log.error(
                        "cannot write the applied policy file; the exporter keeps publishing the previous policy",
                        path=str(self.path),
                        error=str(exc),
                    )
                self.last_error = f"{self.path}: {exc}"
                return False
        self.writes += 1
        if self.last_error:
            log.info("applied policy file writable again", path=str(self.path))
        self.last_error = ""
        self._on_result(True)
        log.info(
            "applied policy file written",
            path=str(self.path),
            topology_policy=config.topology_policy,
            topology_scope=config.topology_scope,
            revision=revision,
        )
        return True
