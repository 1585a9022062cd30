"""``numaplane agent`` deciding through NRI against the real kubelet v1.36.2's recorded decisions, pod by pod.

The kubelet's decisions were recorded on the same snapshots, configurations and seeded pod sequences
by ``bench/agent_differential.py --record`` (``data/kubelet_decisions.json``: the kubelet in its own
mount namespace over each machine's sysfs, as ``test_real_kubelet_differential.py`` runs it). Here a
real ``numaplane agent`` process per configuration (``--sysfs-root`` the snapshot, ``--config`` that
configuration, ``--watch-pods`` on the session's kube-apiserver) is driven over a real NRI socket by
the fake runtime (ttrpc, containerd's side) with the same sequence; its checkpoint and PodResources
answers are compared with the kubelet's decisions (``numaplane_harness.agentdiff``). CI runs 3 machines ×
1-2 configurations (:data:`CI_CASES`); ``bench/agent_differential.py`` runs the kubelet live on any
machine, or replays every recorded one (``--from``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from numaplane_harness.agentdiff import Case, run_cases
from numaplane_harness.kubecluster import ControlPlane

SHARED = Path(os.environ["NUMAPLANE_SHARED"])
RECORDED = Path(__file__).parent / "data" / "kubelet_decisions.json"
#: machine -> configurations (CI's budget: about 30 s in all). The machine whose cAdvisor cores differ
#: from thread_siblings, a policy of each scope; the hugepages one with full-pcpus-only, where the kubelet
#: refused 4 pods SMTAlignmentError (the agent's refusals compared); the x7550 (memory manager None: no
#: node meminfo). The bench runs every recorded machine and configuration.
CI_CASES = {
    "amd-opteron6276-4s8n-64c": ("single-numa-node/container", "restricted/pod"),
    "intel-xeon-2s-snc2-4n-80t-hugepages": ("restricted/pod", "best-effort/container+full-pcpus-only"),
    "intel-xeon-x7550-4s-64t-3nodes": ("restricted/pod",),
}
CI_MACHINES = tuple(CI_CASES)


def _cases(machine: str) -> list[Case]:
    doc = json.loads(RECORDED.read_text())
    wanted = CI_CASES[machine]
    return [Case.from_dict(c) for c in doc["machines"][machine] if c["config"]["name"].split(" (")[0] in wanted]


@pytest.mark.parametrize("machine", CI_MACHINES)
def test_agent_through_nri_decides_as_the_real_kubelet(
    machine: str, control_plane: ControlPlane, short_tmp: Path
) -> None:
    cases = _cases(machine)
    assert [c.config.name.split(" (")[0] for c in cases] == list(CI_CASES[machine])
    plane = control_plane
    plane.wait_for(
        "the default service account",
        lambda: plane.request("GET", "/api/v1/namespaces/default/serviceaccounts/default"),
        timeout=60,
    )
    results = run_cases(plane, SHARED / "topologies" / "real" / f"{machine}.tar.gz", cases, short_tmp)
    lines = []
    for r in results:
        lines.append(f"{r.machine} {r.config}: {r.equal}/{r.compared} equal ({r.pods} pods, {r.seconds:.1f} s)")
        lines += [f"  {m.what}: kubelet {m.kubelet} / agent {m.numaplane}" for m in r.mismatches]
        lines += [f"  PodResources: {p}" for p in r.podresources]
        lines += [f"  in-process {m.what}: {m.kubelet} / agent {m.numaplane}" for m in r.inprocess]
    print("\n" + "\n".join(lines), file=sys.stderr)
    detail = "\n".join(lines) + "\n" + (results[-1].log if results else "")
    # every pod was decided and compared, admitted ones among them
    assert all(r.compared > r.pods for r in results), detail
    assert any(c.kubelet.decisions and any(d.admitted for d in c.kubelet.decisions) for c in cases)
    if (
        "best-effort/container+full-pcpus-only" in CI_CASES[machine]
    ):  # refusals compared too: the agent refused the same 4 pods alike
        assert sum(not d.admitted for c in cases for d in c.kubelet.decisions) == 4
    assert [m for r in results for m in r.mismatches] == [], detail
    assert [k.name for r in results for k, _ in r.known] == [], detail
    assert [p for r in results for p in r.podresources] == [], detail
    # the agent against numaplane's in-process manager on the same pods (agent mode's order): exactly equal
    assert all(r.inprocess_compared > r.pods for r in results), detail
    assert [m for r in results for m in r.inprocess] == [], detail
