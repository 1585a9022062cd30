"""Fixtures of the NRI tests: the real containerd (session-scoped; skips loudly where it cannot run)."""

from __future__ import annotations

from numaplane_harness.containerd import make_containerd_fixture

containerd = make_containerd_fixture()
