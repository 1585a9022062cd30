"""Restart under churn always converges, on the real containerd 1.7 (issue 25 item 16).

The agent is killed with SIGKILL at random moments while Guaranteed pods are created and deleted through
CRI (2 CPUs, 2 NUMA nodes, 1 CPU reserved): after every kill it must become ready with its checkpoint
restored, every running container's cgroup must match its state, the runtime must never wedge (it did
when the agent sent unsolicited ``Runtime.UpdateContainers``: containerd#13733), and no such call is
made. The 50-kill version is ``bench/agent_killrestart.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from numaplane_harness.agenttrial import kill_restart_trial
from numaplane_harness.containerd import ContainerdInstance, make_containerd_fixture

pytestmark = [pytest.mark.containerd, pytest.mark.timeout(150)]

killrestart_containerd = make_containerd_fixture("killrestart_containerd")


@pytest.mark.parametrize("seed", [11])
def test_kill_9_under_pod_churn_always_converges(
    killrestart_containerd: ContainerdInstance, short_tmp: Path, seed: int
) -> None:
    lines: list[str] = []
    result = kill_restart_trial(killrestart_containerd, short_tmp, kills=6, seed=seed, say=lines.append)
    summary = result.summary()
    assert result.failures == [], "\n".join([*result.failures, *lines])
    assert result.kills == result.survived == result.restored == 6, summary
    assert len(result.converged_after) == 6, summary
    assert result.unsolicited_calls == 0 and result.runtime_answers_after, summary
    assert result.slowest_cri_call < 10, summary
    assert result.created >= 6 and result.deleted >= 1, summary
