"""lightkube and httpx failures as :mod:`numaplane.kube.errors`, for :mod:`numaplane.kube.client`.

A lightkube ``ApiError`` (a ``Status`` from the server) and an httpx status error map by HTTP code
(:func:`~numaplane.kube.errors.from_status`, keeping the server's message and reason); transport
errors are :class:`~numaplane.kube.errors.Unavailable`; an undecodable body is a
:class:`~numaplane.kube.errors.ServerError`. Nothing else is translated.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import httpx2
import msgspec
from lightkube import ApiError as LightkubeApiError

from numaplane.kube.errors import KubeError, ServerError, Unavailable, from_status

__all__ = ["translate_exception", "translated"]


def translate_exception(exc: BaseException) -> KubeError | None:
    """The numaplane error for a lightkube / httpx / decoding failure (``None``: not one of those)."""
    if isinstance(exc, KubeError):
        return exc
    if isinstance(exc, LightkubeApiError):
        status = exc.status
        code = getattr(status, "code", None)
        if code is None and exc.response is not None:
            code = exc.response.status_code
        return from_status(
            int(code or 500), str(getattr(status, "message", "") or ""), str(getattr(status, "reason", "") or "")
        )
    if isinstance(exc, httpx2.HTTPStatusError):
        response = exc.response
        message, reason = f"HTTP {response.status_code} {response.reason_phrase}", ""
        with contextlib.suppress(Exception):  # the body may be unread (streams) or not a Status
            status = response.json()
            if isinstance(status, dict) and status.get("kind") == "Status":
                message = str(status.get("message") or message)
                reason = str(status.get("reason") or "")
        return from_status(response.status_code, message, reason)
    if isinstance(exc, httpx2.TransportError):
        return Unavailable(f"API server unreachable: {type(exc).__name__}: {exc}")
    if isinstance(exc, httpx2.HTTPError):
        return Unavailable(f"HTTP error: {type(exc).__name__}: {exc}")
    if isinstance(exc, msgspec.DecodeError):
        return ServerError(f"undecodable response: {exc}")
    return None


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Turn lightkube / httpx failures into numaplane errors."""
    try:
        yield
    except (LightkubeApiError, httpx2.HTTPError, msgspec.DecodeError) as exc:
        mapped = translate_exception(exc)
        if mapped is None:  # pragma: no cover - the except clause lists only mapped types
            raise
        raise mapped from exc
