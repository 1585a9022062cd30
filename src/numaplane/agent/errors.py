"""Errors of the node agent.

Exception tree::

    AgentError                       (base)
    ├── AgentConfigError             invalid agent options or an unreadable / invalid config file at start
    ├── AdmissionRejected            the resource manager refused a container; ``reason`` is the typed
    │                                admission reason (``TopologyAffinityError``, ``SMTAlignmentError``,
    │                                ``UnexpectedAdmissionError``, ``PluginUnavailable``, ``InvalidPreference``,
    │                                ``InvalidContainer``), ``message`` the manager's text. The NRI handler turns
    │                                it into a CreateContainer error, so the runtime fails the creation.
    └── CheckpointError              a checkpoint file cannot be used; ``kind`` says why
        ├── CheckpointCorrupted      unreadable, truncated, bad JSON, checksum mismatch, inconsistent content
        └── CheckpointForeign        a valid file written for another node, topology or format version

Errors of the adapters the agent uses (NRI, gRPC, Kubernetes) are mapped at those edges; this package
only adds its own.
"""

from __future__ import annotations

__all__ = [
    "AdmissionRejected",
    "AgentConfigError",
    "AgentError",
    "CheckpointCorrupted",
    "CheckpointError",
    "CheckpointForeign",
]


class AgentError(Exception):
    """Base class of the agent's errors."""


class AgentConfigError(AgentError, ValueError):
    """Invalid agent options, or a config file that cannot be used at start."""


class AdmissionRejected(AgentError):
    """A container was not admitted. ``reason`` is CamelCase (the kubelet's admission reason style)."""

    def __init__(self, reason: str, message: str, *, pod: str = "", container: str = "") -> None:
        where = f"pod {pod} container {container}: " if pod else ""
        super().__init__(f"numaplane: {where}{reason}: {message}")
        self.reason = reason
        self.message = message
        self.pod = pod
        self.container = container


class CheckpointError(AgentError):
    """A checkpoint file cannot be used. ``kind`` is ``corrupted`` or ``foreign`` (a metric label)."""

    kind = "corrupted"


class CheckpointCorrupted(CheckpointError):
    """The file is damaged (truncated, undecodable, checksum mismatch) or its content is inconsistent."""

    kind = "corrupted"


class CheckpointForeign(CheckpointError):
    """The file is intact but belongs to another node, topology or format version."""

    kind = "foreign"
