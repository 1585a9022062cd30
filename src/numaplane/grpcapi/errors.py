"""Errors of the grpcapi package (gRPC adapters), mapped from gRPC status codes at the edge.

Exception tree::

    GrpcApiError                       (base)
    ├── ServeError                     a server cannot bind or start (bad or too long socket path, ...)
    └── PodResourcesError              the kubelet PodResources API
        ├── PodResourcesUnavailable    socket missing / refusing / not ready (UNAVAILABLE, channel not ready)
        │   └── PodResourcesTimeout    the call's deadline passed (DEADLINE_EXCEEDED)
        ├── PodResourcesUnsupported    the method is not served (UNIMPLEMENTED, or the kubelet's "method
        │                              disabled" error when its feature gate is off)
        ├── PodNotFound                ``Get`` for a pod the server does not know
        └── PodResourcesCallFailed     any other status (``code`` and ``details`` kept)
            └── PodResourcesMalformed  the response bytes do not decode as the expected message

Every error carries ``method`` (e.g. ``List``) and, where it came from a status, ``code`` (the
``grpc.StatusCode`` name) and ``details``.
"""

from __future__ import annotations


class GrpcApiError(Exception):
    """Base class of the grpcapi package's errors."""


class ServeError(GrpcApiError):
    """A server could not bind its socket or start."""


class PodResourcesError(GrpcApiError):
    """A PodResources call failed."""

    def __init__(self, method: str, message: str, *, code: str = "", details: str = "") -> None:
        super().__init__(f"podresources {method}: {message}")
        self.method = method
        self.code = code
        self.details = details


class PodResourcesUnavailable(PodResourcesError):
    """The server cannot be reached (no socket, connection refused, not ready)."""


class PodResourcesTimeout(PodResourcesUnavailable):
    """The call's deadline passed."""


class PodResourcesUnsupported(PodResourcesError):
    """The server does not offer this method (old kubelet or feature gate off)."""


class PodNotFound(PodResourcesError):
    """``Get`` named a pod the server does not know."""


class PodResourcesCallFailed(PodResourcesError):
    """Any other error status."""


class PodResourcesMalformed(PodResourcesCallFailed):
    """The server answered, but its response does not decode as the expected message."""
