"""The operator keeps its Lease on a real kube-apiserver while it is busy (issue 25 item 14).

The operator's controllers and its leader election run in this process, on the real API server,
authenticated by the operator's own ServiceAccount exactly as ``numaplane render`` grants it. The
reconciles are made CPU-bound on purpose (fault injection: a reconcile that holds the event loop longer
than the renew deadline, then one busy half-second per second) and two CPU hogs load the node. The
lease must stay with the operator, without a transition, its ``renewTime`` fresh, the starvation
logged. (Before the fix the renewal woke past its deadline and gave up without a single attempt.)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from numaplane.kube.client import LightkubePort
from numaplane.kube.clock import parse_time
from numaplane.kube.leader import LeaderElectionConfig, LeaderElector
from numaplane.operator.controller import NRT_GC_KEY, Operator
from numaplane.operator.rbac import OPERATOR_LEASE
from numaplane.operator.render_common import Settings
from numaplane_harness.containerd import terminate_process
from numaplane_harness.kubecluster import ApiStatus, ControlPlane

pytestmark = pytest.mark.timeout(240)

REPO = Path(__file__).resolve().parents[2]
CLI = (sys.executable, "-c", "from numaplane.cli import main; main()")
NS = "numaplane-op-lease"


def _burn(seconds: float) -> None:
    """CPU-bound work on the calling thread (the event loop), as a slow reconcile does."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        sum(i * i for i in range(1000))


class BusyOperator(Operator):
    """The real controllers; reconciles burn CPU on the loop. Only NRT garbage collection runs (the
    cluster-scoped custom resources of other test modules are left alone)."""

    first_block_seconds = 10.5
    blocked = False

    async def reconcile(self, key: str) -> float | None:
        if key != NRT_GC_KEY:
            return None
        _burn(0.5 if self.blocked else self.first_block_seconds)
        self.blocked = True
        await super().reconcile(key)
        return 1.0  # busy: again in a second


async def test_a_busy_operator_keeps_its_lease(control_plane: ControlPlane, caplog: pytest.LogCaptureFixture) -> None:
    cp = control_plane
    out = subprocess.run(
        [*CLI, "render", "--namespace", NS, "--image", "localhost/numaplane:e2e"],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    rest = [d for d in docs if d["kind"] != "CustomResourceDefinition"]
    for part in (crds, rest):
        got = cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=yaml.safe_dump_all(part))
        assert got.returncode == 0, got.stderr
    caplog.set_level(logging.INFO, logger="numaplane.kube.leader")
    kube = LightkubePort.from_kubeconfig(cp.service_account_kubeconfig(NS, "numaplane-operator"))
    operator = BusyOperator(kube, Settings(namespace=NS, image="localhost/numaplane:e2e"))
    elector = LeaderElector(
        kube, LeaderElectionConfig(OPERATOR_LEASE, NS, "busy-operator"), on_started_leading=operator.run
    )
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    task = asyncio.create_task(elector.run())
    try:
        deadline = time.monotonic() + 30
        while not operator.blocked and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert operator.blocked, "the operator never reconciled"
        await asyncio.sleep(25)  # well past the renew deadline (10 s) and the lease duration (15 s)
        assert not task.done(), [r.getMessage() for r in caplog.records]
        assert elector.is_leader
        lease: dict[str, Any] = cp.request(
            "GET", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{OPERATOR_LEASE}"
        )
        spec = lease["spec"]
        assert spec["holderIdentity"] == "busy-operator" and spec["leaseTransitions"] == 0
        age = time.time() - parse_time(spec["renewTime"]).timestamp()
        assert age < 6, f"renewTime {age:.1f} s old"
        messages = [r.getMessage() for r in caplog.records]
        assert any("event loop blocked" in m for m in messages), messages
        assert not any("lost the lease" in m for m in messages), messages
        print(f"lease kept; renewTime {age:.1f} s old; load {Path('/proc/loadavg').read_text().split()[:3]}")
    finally:
        for hog in hogs:
            terminate_process(hog)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        await kube.close()
        with contextlib.suppress(ApiStatus):
            cp.request("DELETE", f"/api/v1/namespaces/{NS}")
