"""Fixtures of the real-cluster tests: a private containerd for the real kubelet, and the kubelet.

The control plane (``control_plane``) is the session-wide one of ``tests/conftest.py``. The kubelet runs
on its own containerd, so that the NRI plugins of other test modules never see its pods.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from numaplane_harness.containerd import make_containerd_fixture
from numaplane_harness.kubelet import STATIC_MANAGERS, make_kubelet_fixture

#: the containerd the real kubelet drives (CRI) and ``numaplane agent`` plugs into (NRI)
kubelet_containerd = make_containerd_fixture("kubelet_containerd")
#: a real kubelet v1.36.2 registered to ``control_plane``: the static CPU manager (CPU 0 reserved), the
#: Static memory manager and the single-numa-node topology policy — a NUMA-aware node as users run it.
#: Tests that need other policies restart it (``RealKubelet.restart``). One per test module: a running
#: kubelet heart-beats its Node, and kube-scheduler retries unschedulable pods on every Node event, which
#: would hide (or fake) the retries other modules measure.
real_kubelet = make_kubelet_fixture(
    scope="module",
    containerd="kubelet_containerd",
    policy=STATIC_MANAGERS,
)


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A fresh folder with a short path (unix socket paths must stay below 107 bytes)."""
    folder = Path(tempfile.mkdtemp(prefix="npn-", dir="/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
