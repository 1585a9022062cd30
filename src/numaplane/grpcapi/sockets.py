"""Unix sockets created with their final mode from the start.

gRPC creates a server's socket file when it binds, with the process umask; a ``chmod`` afterwards
leaves a window in which anyone may connect. :func:`socket_umask` narrows the umask around the bind
(the umask is process-wide: keep the block short, binding only).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

__all__ = ["socket_umask"]


@contextlib.contextmanager
def socket_umask(mode: int) -> Iterator[None]:
    """Files created inside get at most ``mode`` (e.g. ``0o600``)."""
    old = os.umask(0o777 & ~mode)
    try:
        yield
    finally:
        os.umask(old)
