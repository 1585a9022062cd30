"""Errors of the nrt package (NodeResourceTopology model, per-zone accounting, fingerprint).

Exception tree::

    NRTError                      (base)
    ├── NRTFormatError            a NodeResourceTopology document (or a field of it) is malformed;
    │                             ``path`` locates the field (e.g. ``zones[1].resources[0].available``);
    │                             also a ValueError
    ├── ZoneInputError            the inputs of the per-zone computation are malformed (podresources
    │                             responses, machine view, allocation state); ``path`` locates the field;
    │                             also a ValueError
    └── FingerprintError          a pod-set fingerprint check failed; ``outcome`` is one of
        │                         ``malformed`` / ``incompatible_version`` / ``signature_mismatch``
        ├── FingerprintMalformed
        ├── FingerprintIncompatibleVersion
        └── FingerprintMismatch
"""

from __future__ import annotations


class NRTError(Exception):
    """Base class of the nrt package's errors."""


class NRTFormatError(NRTError, ValueError):
    """A NodeResourceTopology document is malformed at ``path`` (JSON-path-like, ``$`` is the root)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"invalid NodeResourceTopology at {path}: {reason}")
        self.path = path
        self.reason = reason


class ZoneInputError(NRTError, ValueError):
    """An input of the per-zone computation is malformed at ``path``."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"invalid zone computation input at {path}: {reason}")
        self.path = path
        self.reason = reason


class FingerprintError(NRTError):
    """A fingerprint check did not succeed; ``outcome`` names the upstream error class."""

    outcome = "error"


class FingerprintMalformed(FingerprintError):
    """Upstream ``ErrMalformed``: too short, or the prefix is not ``pfp0``."""

    outcome = "malformed"


class FingerprintIncompatibleVersion(FingerprintError):
    """Upstream ``ErrIncompatibleVersion``: the version field is not ``v001``."""

    outcome = "incompatible_version"


class FingerprintMismatch(FingerprintError):
    """Upstream ``ErrSignatureMismatch``: well-formed but computed over a different pod set."""

    outcome = "signature_mismatch"
