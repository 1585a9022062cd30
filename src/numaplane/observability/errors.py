"""Errors of the observability adapter.

Exception tree::

    ObservabilityError          (base)
    ├── AddressError            also a ValueError: not ``HOST:PORT`` (or ``:PORT``, ``[v6]:PORT``),
    │                           or the port is outside 0-65535
    ├── ListenError             also an OSError: an address cannot be bound (busy, forbidden,
    │                           unknown host); nothing the server opened stays listening
    └── TLSConfigError          also a ValueError: a certificate, key or CA file cannot be used

Components map these to their own configuration errors at their edge (the exporter to
``ExporterConfigError``, the scheduler's command line to a usage error).
"""

from __future__ import annotations

__all__ = ["AddressError", "ListenError", "ObservabilityError", "TLSConfigError"]


class ObservabilityError(Exception):
    """Base class of the observability adapter's errors."""


class AddressError(ObservabilityError, ValueError):
    """A listen address that is not ``HOST:PORT``."""


class ListenError(ObservabilityError, OSError):
    """An address could not be bound."""


class TLSConfigError(ObservabilityError, ValueError):
    """A TLS certificate, key or CA file cannot be loaded."""
