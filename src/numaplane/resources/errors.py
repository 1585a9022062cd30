"""Errors of the resources package.

Exception tree::

    ResourceError                 (base)
    ├── QuantityError             malformed Kubernetes quantity string (also a ValueError)
    ├── DurationError             malformed Go duration string (also a ValueError)
    ├── PodSpecError              malformed Pod JSON; ``path`` locates the field (also a ValueError)
    └── MetadataError             malformed object ``metadata``; ``path`` locates the field, ``expected``
                                  says what was wanted, ``value`` what came (also a ValueError)
"""

from __future__ import annotations


class ResourceError(Exception):
    """Base class of the resources package's errors."""


class QuantityError(ResourceError, ValueError):
    """A quantity string does not follow the Kubernetes quantity syntax."""

    def __init__(self, text: object, reason: str) -> None:
        super().__init__(f"invalid quantity {text!r}: {reason}")
        self.text = text
        self.reason = reason


class DurationError(ResourceError, ValueError):
    """A duration string does not follow Go's ``time.ParseDuration`` syntax (or is out of its range)."""

    def __init__(self, text: object, reason: str) -> None:
        super().__init__(f"{text!r} is not a duration such as 10s, 1m30s or 250ms ({reason})")
        self.text = text
        self.reason = reason


class PodSpecError(ResourceError, ValueError):
    """A Pod document is malformed at ``path`` (JSON-path-like, e.g. ``spec.containers[0].resources``)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"invalid pod at {path}: {reason}")
        self.path = path
        self.reason = reason


class MetadataError(ResourceError, ValueError):
    """An object's ``metadata`` is malformed at ``path`` (``metadata.annotations.x``, ``$.metadata.name``).

    ``expected`` is one of the ``EXPECT_*`` phrases of :mod:`numaplane.resources.meta` (``"a string"``,
    ``"an object"``...), ``value`` the offending JSON value; callers with their own error vocabulary
    translate on these two fields, never on the message text.
    """

    def __init__(self, path: str, expected: str, value: object) -> None:
        super().__init__(f"invalid metadata at {path}: expected {expected}, got {value!r}")
        self.path = path
        self.expected = expected
        self.value = value
