"""Errors of the plugin API adapter.

Exception tree::

    PluginApiError                   (base)
    ├── RegistrationRefused          a registration was refused; ``code`` is the gRPC status code name
    │                                (INVALID_ARGUMENT, PERMISSION_DENIED, ALREADY_EXISTS, UNAVAILABLE)
    └── PluginCallFailed             a call to a plugin failed at the transport (``code``, ``details``)

Admission-time failures of an unreachable plugin are raised to the resource manager as
:class:`numaplane.policy.errors.PluginUnavailableError` (an ``AdmissionError``), so the pod is refused
with reason ``PluginUnavailable`` and a message naming the plugin.
"""

from __future__ import annotations

__all__ = ["PluginApiError", "PluginCallFailed", "RegistrationRefused"]


class PluginApiError(Exception):
    """Base class of the plugin API adapter's errors."""


class RegistrationRefused(PluginApiError):
    """The agent refused a registration."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"registration refused ({code}): {message}")
        self.code = code
        self.message = message


class PluginCallFailed(PluginApiError):
    """A gRPC call to a plugin failed (not answered, deadline passed, or the plugin errored)."""

    def __init__(self, method: str, code: str, details: str) -> None:
        super().__init__(f"{method}: {code}: {details}")
        self.method = method
        self.code = code
        self.details = details
