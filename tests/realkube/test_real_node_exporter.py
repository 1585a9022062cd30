"""``numaplane exporter`` on a real kubelet v1.36.2's PodResources socket (issue 12, 2f first half).

The kubelet runs its static CPU manager (CPU 0 reserved) with the Static memory manager and the
single-numa-node topology policy, on the private containerd. A Guaranteed pod with one CPU and a
BestEffort pod run; the exporter, configured as the operator configures it in kubelet mode
(``--kubelet-config`` = the kubelet's own file, the kubelet's socket), publishes the node's NRT to the
real API server under the CRD ``numaplane render`` prints. Every NUMA zone must say what the kubelet's
checkpoints say: CPUs (capacity, allocatable = capacity minus reserved, available = allocatable minus
the exclusive CPUs in ``cpu_manager_state``), memory (allocatable minus available = the blocks in
``memory_manager_state``), and the pod-set fingerprint of the pods with exclusive resources.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from node_helpers import ensure_nrt_crd, get_nrt, log_lines, numaplane, wait_http_ready

from numaplane.nrt.fingerprint import ANNOTATION, compute_fingerprint
from numaplane.topology.cpuset import CPUSet
from numaplane_harness.kubecluster import ControlPlane, free_port
from numaplane_harness.kubelet import KubeletPolicy, RealKubelet, with_policy

pytestmark = pytest.mark.timeout(300)

POLICY = KubeletPolicy(
    cpu_manager_policy="static",
    reserved_system_cpus="0",
    memory_manager_policy="Static",
    topology_manager_policy="single-numa-node",
)


def numa_cpus() -> dict[int, frozenset[int]]:
    """CPU ids of each NUMA node of this machine (sysfs)."""
    nodes = {}
    for folder in sorted(Path("/sys/devices/system/node").glob("node[0-9]*")):
        nodes[int(folder.name[4:])] = frozenset(CPUSet.parse((folder / "cpulist").read_text().strip()))
    return nodes


def expected_cpu_rows(state: dict[str, Any], reserved: frozenset[int]) -> dict[str, tuple[int, int, int]]:
    exclusive: set[int] = set()
    for containers in state.get("entries", {}).values():
        for cpus in containers.values():
            exclusive |= set(CPUSet.parse(cpus))
    return {
        f"node-{node}": (len(cpus), len(cpus - reserved), len(cpus - reserved - exclusive))
        for node, cpus in numa_cpus().items()
    }


def rows(nrt: dict[str, Any], resource: str) -> dict[str, tuple[int, int, int]]:
    out = {}
    for zone in nrt.get("zones", []):
        for row in zone.get("resources", []):
            if row["name"] == resource:
                out[zone["name"]] = (int(row["capacity"]), int(row["allocatable"]), int(row["available"]))
    return out


def kubelet_mode_exporter(kubelet: RealKubelet, control_plane: ControlPlane, port: int, *extra: str) -> list[str]:
    """``numaplane exporter`` as the operator runs it in kubelet mode (the kubelet's socket and config
    file), publishing to the real API server, probes on ``port``; ``extra`` adds the refresh flags."""
    return [
        "exporter",
        f"--node-name={kubelet.node_name}",
        f"--podresources-socket=unix://{kubelet.podresources_socket}",
        f"--kubelet-config={kubelet.config_file}",
        "--sysfs-root=/",
        *extra,
        f"--kubeconfig={control_plane.admin_kubeconfig}",
        f"--metrics-address=127.0.0.1:{port}",
        f"--health-address=127.0.0.1:{port}",
        "--log-level=debug",
    ]


def test_exporter_publishes_what_the_kubelet_checkpointed(
    control_plane: ControlPlane, real_kubelet: RealKubelet, short_tmp: Path
) -> None:
    began = time.monotonic()
    kubelet = real_kubelet
    if kubelet.policy != POLICY:
        kubelet.delete_pods()
        kubelet.restart(POLICY)
    ensure_nrt_crd(control_plane)
    kubelet.create_pod(kubelet.pod_manifest("nrt-g1", cpu="1", memory="64Mi"))
    kubelet.create_pod(kubelet.pod_manifest("nrt-be"))
    g1 = kubelet.wait_pod_running("nrt-g1")
    be = kubelet.wait_pod_running("nrt-be")
    # the kubelet itself pinned the Guaranteed container on CPU 1, the BestEffort one on the rest
    assert kubelet.container_cpuset(g1) == "1"
    assert kubelet.container_cpuset(be) == "0"

    port = free_port()
    log = short_tmp / "exporter.log"
    args = kubelet_mode_exporter(kubelet, control_plane, port, "--refresh-mode=periodic", "--period=1")
    with numaplane(args, log) as process:
        wait_http_ready(process, port, log)
        state = kubelet.cpu_manager_state()
        assert state["policyName"] == "static"
        assert state["entries"], state  # the Guaranteed container's exclusive CPU is checkpointed
        want_cpu = expected_cpu_rows(state, frozenset(CPUSet.parse(POLICY.reserved_system_cpus)))
        want_fp = compute_fingerprint([("default", "nrt-g1")])

        def published() -> dict[str, Any] | None:
            nrt = get_nrt(control_plane, kubelet.node_name)
            if nrt is None or rows(nrt, "cpu") != want_cpu:
                return None
            if nrt.get("metadata", {}).get("annotations", {}).get(ANNOTATION) != want_fp:
                return None
            return nrt

        try:
            nrt = control_plane.wait_for("the NRT matching cpu_manager_state", published, timeout=60)
        except TimeoutError as exc:
            raise AssertionError(
                f"{exc}\nwanted cpu rows {want_cpu}, fingerprint {want_fp}\n"
                f"got {json.dumps(get_nrt(control_plane, kubelet.node_name), indent=1)}\n"
                + log.read_text(errors="replace")[-3000:]
            ) from None

    # memory: what the Static memory manager assigned is what the NRT shows as taken
    memory_state = json.loads(kubelet.memory_manager_state_file.read_text())
    taken: dict[int, int] = {}
    for containers in memory_state.get("entries", {}).values():
        for blocks in containers.values():
            for block in blocks:
                if block["type"] == "memory":
                    for node in block["numaAffinity"]:
                        taken[node] = taken.get(node, 0) + int(block["size"])
    assert taken == {0: 64 << 20}, memory_state
    memory_rows = rows(nrt, "memory")
    for node in numa_cpus():
        _, allocatable, available = memory_rows[f"node-{node}"]
        assert allocatable - available == taken.get(node, 0)
    assert nrt["metadata"]["ownerReferences"][0]["name"] == kubelet.node_name
    print(f"\ntest duration {time.monotonic() - began:.1f} s; kubelet Ready in {kubelet.ready_history} s")


def _attribute(nrt: dict[str, Any], name: str) -> str | None:
    return next((a["value"] for a in nrt.get("attributes", []) if a["name"] == name), None)


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


@pytest.mark.parametrize("mode", ["events", "both"])
def test_exporter_in_an_event_mode_follows_the_kubelet_within_a_second(
    control_plane: ControlPlane, real_kubelet: RealKubelet, short_tmp: Path, mode: str
) -> None:
    """Issue 23, items 1 and 2: with ``--kubelet-state-dir`` the exporter scans when the kubelet
    rewrites ``cpu_manager_state`` (each allocation and each release) and re-reads the kubelet's
    configuration when it changes; no refresh period helps (``both`` has a 60 s one).

    Latency: from the checkpoint's modification time (the kubelet's write) to the first NRT read
    from the API server that matches it; p99 <= 1 s over the allocations and releases."""
    kubelet = real_kubelet
    kubelet.delete_pods()  # the node has one CPU to give: an earlier test's pods hold it
    if kubelet.policy != POLICY:
        kubelet.restart(POLICY)
    ensure_nrt_crd(control_plane)
    control_plane.wait_for(
        "earlier exclusive CPUs released", lambda: not kubelet.cpu_manager_state().get("entries"), timeout=60
    )
    reserved = frozenset(CPUSet.parse(POLICY.reserved_system_cpus))
    port = free_port()
    log = short_tmp / "exporter.log"
    args = kubelet_mode_exporter(
        kubelet,
        control_plane,
        port,
        f"--kubelet-state-dir={kubelet.root_dir}",
        f"--refresh-mode={mode}",
        *(["--period=60"] if mode == "both" else []),
    )
    latencies: list[float] = []

    def await_nrt_matching_state(what: str) -> None:
        state = kubelet.cpu_manager_state()
        written = kubelet.cpu_manager_state_file.stat().st_mtime
        want = expected_cpu_rows(state, reserved)
        deadline = time.time() + 10
        while time.time() < deadline:
            nrt = get_nrt(control_plane, kubelet.node_name)
            if nrt is not None and rows(nrt, "cpu") == want:
                latencies.append(time.time() - written)
                return
            time.sleep(0.02)
        raise AssertionError(
            f"{mode}: {what}: the NRT did not follow cpu_manager_state within 10 s; wanted {want}, got "
            f"{get_nrt(control_plane, kubelet.node_name)}\n" + log.read_text(errors="replace")[-3000:]
        )

    with numaplane(args, log) as process:
        wait_http_ready(process, port, log)
        await_nrt_matching_state("start")
        latencies.clear()
        for round_ in range(3):
            name = f"follow-{mode}-{round_}"
            before = kubelet.cpu_manager_state_file.stat().st_mtime_ns
            kubelet.create_pod(kubelet.pod_manifest(name, cpu="1", memory="64Mi"))
            kubelet.wait_pod_running(name)
            control_plane.wait_for(
                "the allocation checkpointed",
                lambda: kubelet.cpu_manager_state().get("entries") and True,
                timeout=30,
            )
            assert kubelet.cpu_manager_state_file.stat().st_mtime_ns != before
            await_nrt_matching_state(f"{name} allocated")
            kubelet.delete_pods()
            control_plane.wait_for(
                "the release checkpointed", lambda: not kubelet.cpu_manager_state().get("entries"), timeout=60
            )
            await_nrt_matching_state(f"{name} released")
        p50, p99 = _percentile(latencies, 0.5), _percentile(latencies, 0.99)
        print(
            f"\nkubelet allocation -> NRT, refresh mode {mode}: {len(latencies)} changes, p50 {p50:.3f} s, p99 {p99:.3f} s"
        )
        assert p99 <= 1.0, latencies
        assert any("kubelet-state" in line for line in log_lines(log)), "no scan was triggered by the kubelet's files"

        # item 2: the kubelet moves to another Topology Manager policy; the NRT follows, no exporter restart
        restricted = with_policy(kubelet, topology_manager_policy="restricted")
        changed_at = time.monotonic()
        kubelet.restart(restricted)
        try:
            control_plane.wait_for(
                "the NRT stating the kubelet's new policy",
                lambda: (
                    _attribute(get_nrt(control_plane, kubelet.node_name) or {}, "topologyManagerPolicy") == "restricted"
                ),
                timeout=30,
            )
        finally:
            assert process.poll() is None, "the exporter exited"
        print(f"policy change -> NRT attribute: {time.monotonic() - changed_at:.1f} s (kubelet restart included)")
    kubelet.restart(POLICY)
