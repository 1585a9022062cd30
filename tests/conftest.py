"""Test-wide settings: where the read-only shared inputs live.

``NUMAPLANE_SHARED`` points at the shared folder (CI sets it); by default it is ``../shared`` next to
the repository, as laid out for sessions and CI.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from numaplane_harness.kubecluster import make_control_plane_fixture

pytest_plugins = ["numaplane.testing.fakeapi.pytest_plugin"]

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("NUMAPLANE_SHARED", str(REPO.parent / "shared"))).resolve()
os.environ.setdefault("NUMAPLANE_SHARED", str(SHARED))

#: The real private control plane (etcd, kube-apiserver, controller-manager; kube-scheduler on demand),
#: started once per session by the first test that asks for it.
control_plane = make_control_plane_fixture()


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The shared inputs folder (conformance cases, real topologies, wire captures)."""
    if not SHARED.is_dir():
        pytest.fail(f"shared inputs not found at {SHARED}; set NUMAPLANE_SHARED")
    return SHARED


# Tests that run the real containerd need root, the network (the first run fetches Debian's
# containerd packages) and touch /run/containerd and cgroups: mark them so that
# `pytest -m "not containerd"` runs everything else (README, "Run the tests").
_CONTAINERD_FIXTURES = frozenset({"containerd", "agent_containerd"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _CONTAINERD_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.containerd)
