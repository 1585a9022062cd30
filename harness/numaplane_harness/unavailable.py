"""How a test fixture for a real component says it cannot run here: loudly, and as a failure when required.

Each real-component fixture (containerd, the control plane, the kubelet) skips with the reason where the
machine cannot run it — printed in a banner on stderr, so that a quiet skip is never mistaken for a
pass — and fails instead when its ``NUMAPLANE_REQUIRE_*`` variable is ``1`` (as ``.ci/run`` sets).
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

__all__ = ["component_unavailable"]


def component_unavailable(what: str, reason: str, require_env: str) -> NoReturn:
    """Skip the test (or fail it when ``$require_env`` is ``1``), saying that ``what`` cannot run and why."""
    import pytest

    message = f"REAL {what.upper()} TESTS NOT RUN — this machine cannot run {what}: {reason}"
    print(f"\n{'!' * 100}\n{message}\n{'!' * 100}", file=sys.stderr)
    if os.environ.get(require_env) == "1":
        pytest.fail(message)
    pytest.skip(message)
