"""The real kubelet v1.36.2 on real multi-NUMA machines' snapshots against numaplane's core, pod by pod.

Each machine's sysfs is shown to the kubelet only (``numaplane_harness.machineoverlay``: its own mount
namespace); the same seeded pod sequence — adds, deletions, init containers, shared pods, memory and
hugepages — is played on it and on ``ResourceManager`` over ``discover(view="kubelet")``, and every
decision (admit/reject and reason, CPUs, NUMA memory per container) and the final checkpoints compared
(``numaplane_harness.kubeletdiff``). CI runs 4 machines × a reduced matrix; ``bench/kubelet_differential.py``
runs all 25 machines × the whole matrix.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from numaplane_harness.containerd import ContainerdInstance
from numaplane_harness.kubecluster import ControlPlane
from numaplane_harness.kubelet import kubelet_unavailable_reason
from numaplane_harness.kubeletdiff import AddPod, ContainerSpec, DiffConfig, describe, run_machine
from numaplane_harness.unavailable import component_unavailable

SHARED = Path(os.environ["NUMAPLANE_SHARED"])
#: the CI subset: the machine where cAdvisor's cores differ from thread_siblings, a hugepages one, an ARM
#: one (no clock speed in cpuinfo), and one with two sockets in a NUMA node whose caches cAdvisor cannot
#: read (no cache ``id``: the kubelet's uncore cache is the socket) and whose snapshot has no node meminfo
#: (memory manager None)
CI_MACHINES = (
    "amd-opteron6276-4s8n-64c",
    "intel-xeon-2s-snc2-4n-80t-hugepages",
    "arm64-kunpeng920-2s4n-128c",
    "intel-xeon-x7550-4s-64t-3nodes",
)


@pytest.fixture(scope="module")
def diff_runtime(request: pytest.FixtureRequest) -> Iterator[tuple[ControlPlane, ContainerdInstance]]:
    reason = kubelet_unavailable_reason()
    if reason:
        component_unavailable("a kubelet", reason, "NUMAPLANE_REQUIRE_KUBELET")
    plane: ControlPlane = request.getfixturevalue("control_plane")
    runtime: ContainerdInstance = request.getfixturevalue("kubelet_containerd")
    yield plane, runtime


@pytest.mark.parametrize("machine", CI_MACHINES)
def test_real_kubelet_and_numaplane_decide_alike(
    machine: str, diff_runtime: tuple[ControlPlane, ContainerdInstance], short_tmp: Path
) -> None:
    plane, runtime = diff_runtime
    results = run_machine(
        plane,
        runtime,
        SHARED / "topologies" / "real" / f"{machine}.tar.gz",
        short_tmp,
        reduced=True,
        count=10,
        check_hwloc=True,
    )
    lines = []
    for r in results:
        lines.append(
            f"{r.machine} {r.config}: {r.equal}/{r.compared} equal ({r.pods} pods, {r.seconds:.1f} s;"
            f" hwloc view: {r.hwloc_mismatches} mismatches)"
        )
        for m in r.mismatches:
            lines.append(f"  {m.what}: kubelet {m.kubelet} / numaplane {m.numaplane}")
        if r.minimal:
            lines.append(f"  minimal: {describe(r.minimal)}")
    print("\n" + "\n".join(lines), file=sys.stderr)
    assert results and all(r.compared > r.pods for r in results)
    if machine == "amd-opteron6276-4s8n-64c":
        # the differential has teeth: thread_siblings cores (hwloc, numaplane before issue 27) differ from
        # the kubelet's on this machine in every configuration
        assert all(r.hwloc_mismatches > 0 for r in results), lines
    assert [m for r in results for m in r.mismatches] == [], "\n".join(lines)


def test_real_kubelet_node_admission_out_of_cpu(
    diff_runtime: tuple[ControlPlane, ContainerdInstance], short_tmp: Path
) -> None:
    """The kubelet's generic admission beside the managers: on 20 CPUs (19 allocatable), a shared pod of
    1500m and two 8-CPU pods leave 1500m, so a 2-CPU pod is given CPUs by the CPU manager and then
    rejected ``OutOfcpu``; a 1-CPU pod after it fits, and its CPUs are chosen with the rejected pod's
    released. numaplane's side models it (``node_admission``) and must decide alike."""
    plane, runtime = diff_runtime
    ops = [
        AddPod("shared", (ContainerSpec("c0", "1500m", 64),)),
        AddPod("a", (ContainerSpec("c0", "8", 64),)),
        AddPod("b", (ContainerSpec("c0", "8", 64),)),
        AddPod("c", (ContainerSpec("c0", "2", 64),)),
        AddPod("d", (ContainerSpec("c0", "1", 64),)),
    ]
    (result,) = run_machine(
        plane,
        runtime,
        SHARED / "topologies" / "real" / "intel-desktop-1s1n-20t.tar.gz",
        short_tmp,
        configs=[DiffConfig("best-effort/container", "best-effort", "container")],
        ops=ops,
    )
    detail = "\n".join(f"{m.what}: kubelet {m.kubelet} / numaplane {m.numaplane}" for m in result.mismatches)
    assert result.rejected == ["OutOfcpu"], detail
    assert result.mismatches == [], detail
