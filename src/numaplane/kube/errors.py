"""Errors of the Kubernetes adapter layer.

Every implementation of :class:`numaplane.kube.port.KubePort` (the lightkube client, the in-memory
store, the fake API server as seen through the client) raises exactly these types; HTTP statuses
and transport failures are translated at the edge, so callers never see lightkube or httpx errors.

Exception tree::

    KubeError                         (base of everything raised here)
    ├── ApiError                      the server answered with a failure ``Status`` (``code``, ``reason``)
    │   ├── NotFound                  404: the object (or its resource type) does not exist
    │   ├── Conflict                  409: stale ``resourceVersion``, a pod already bound,
    │   │                             a server-side-apply field conflict
    │   ├── AlreadyExists             409 with reason ``AlreadyExists``: create of an existing name
    │   ├── Gone                      410: the ``resourceVersion`` is too old (watch history
    │   │                             compacted); the caller must list again
    │   ├── Invalid                   400 / 422: the request or object is malformed
    │   ├── Forbidden                 401 / 403: not allowed
    │   └── ServerError               500 and other 5xx not listed under Unavailable
    └── Unavailable                   no usable answer: connection refused or reset, timeout,
                                      429 / 502 / 503 / 504 (``code`` is ``None`` for transport errors)

    QueueShutDown                     (not an API error) ``WorkQueue.get`` after ``shutdown()``

``ApiError`` carries ``code`` (HTTP status), ``reason`` (the ``Status.reason`` string, e.g.
``"Conflict"``) and ``message``. :func:`from_status` builds the right subclass from a status code and
reason; :func:`to_status` renders any ``KubeError`` as a Kubernetes ``Status`` object (used by the
fake API server). ``retryable`` tells a control loop whether retrying the same request can succeed.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "AlreadyExists",
    "ApiError",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "KubeError",
    "NotFound",
    "QueueShutDown",
    "ServerError",
    "Unavailable",
    "from_status",
    "to_status",
]


class KubeError(Exception):
    """Base class of the Kubernetes adapter's errors."""

    retryable: ClassVar[bool] = False

    def __init__(self, message: str, *, code: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason


class ApiError(KubeError):
    """The API server answered with a failure ``Status``."""

    default_code: ClassVar[int] = 500
    default_reason: ClassVar[str] = "InternalError"

    def __init__(self, message: str, *, code: int | None = None, reason: str = "") -> None:
        super().__init__(
            message,
            code=self.default_code if code is None else code,
            reason=reason or self.default_reason,
        )


class NotFound(ApiError):
    """404: the object, or the resource type itself, does not exist."""

    default_code = 404
    default_reason = "NotFound"


class Conflict(ApiError):
    """409: optimistic-concurrency failure (stale ``resourceVersion``), a second bind, an SSA conflict."""

    default_code = 409
    default_reason = "Conflict"
    retryable = True


class AlreadyExists(ApiError):
    """409 with reason ``AlreadyExists``: an object with that name exists already."""

    default_code = 409
    default_reason = "AlreadyExists"


class Gone(ApiError):
    """410: the requested ``resourceVersion`` is no longer in the watch history; list again."""

    default_code = 410
    default_reason = "Expired"
    retryable = True


class Invalid(ApiError):
    """400 / 422: the request or the object is malformed."""

    default_code = 422
    default_reason = "Invalid"


class Forbidden(ApiError):
    """401 / 403: the caller may not do this."""

    default_code = 403
    default_reason = "Forbidden"


class ServerError(ApiError):
    """5xx that is not a plain unavailability."""

    default_code = 500
    default_reason = "InternalError"
    retryable = True


class Unavailable(KubeError):
    """No usable answer: transport failure, timeout, or 429/502/503/504."""

    retryable = True


class QueueShutDown(Exception):
    """The work queue was shut down and has nothing left to hand out."""


_UNAVAILABLE_CODES = frozenset({429, 502, 503, 504})


def from_status(code: int, message: str = "", reason: str = "") -> KubeError:
    """The error for an HTTP failure ``code`` (and the ``Status.reason`` when there is one)."""
    message = message or f"HTTP {code}"
    cls: type[KubeError]
    if code == 404:
        cls = NotFound
    elif code == 409:
        cls = AlreadyExists if reason == "AlreadyExists" else Conflict
    elif code == 410:
        cls = Gone
    elif code in (400, 422):
        cls = Invalid
    elif code in (401, 403):
        cls = Forbidden
    elif code in _UNAVAILABLE_CODES:
        cls = Unavailable
    elif code >= 500:
        cls = ServerError
    else:
        cls = ApiError
    return cls(message, code=code, reason=reason)


_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def to_status(error: KubeError) -> dict[str, Any]:
    """Render ``error`` as a Kubernetes ``meta/v1 Status`` object (``code`` defaults to 503)."""
    code = error.code if error.code is not None else 503
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": error.message,
        "reason": error.reason or _REASONS.get(code, ""),
        "code": code,
    }


def status_reason(code: int) -> str:
    """The conventional ``Status.reason`` for an HTTP status code ("" if none)."""
    return _REASONS.get(code, "")
