"""Issue 23 item 3 on the real control plane: the scheduler stops trusting an NRT whose exporter is gone.

A real ``numaplane exporter`` (its own ServiceAccount and rendered RBAC; a synthetic machine and
``fake://`` PodResources answers) publishes a node's NRT with a short heartbeat (1 s: stale after 3 s);
the standalone ``numaplane scheduler run`` (rendered RBAC) places a pod there. The exporter is then
killed (SIGKILL: no goodbye write). Measured: the time from the exporter's last write (its heartbeat
annotation) and from the kill to the scheduler's ``node topology stale``; a pod created then is refused
on that node; the exporter's return makes the node trusted again and places the held pod.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from realsched import (
    CLI,
    NRT_PATH,
    REPO,
    TEST_LABEL,
    install_scheduler,
    numaplane,
    render,
    scoped_cluster,
    standalone_args,
)

from numaplane_harness.containerd import terminate_process
from numaplane_harness.kubecluster import ApiStatus, ControlPlane, free_port

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "exporter"))
from exp_helpers import build_sysfs

pytestmark = pytest.mark.timeout(240)

SCHEDULER = "numa-stale"
NS = "numaplane-stale"
HEARTBEAT_SECONDS = 1
STALE_LINE = re.compile(r"node topology stale")


def exporter_rbac(cp: ControlPlane) -> Path:
    """The exporter's ServiceAccount and RBAC exactly as rendered (in ``NS``); its kubeconfig."""
    docs = [
        d
        for d in render(
            "--from", str(REPO / "deploy/samples/numaresourcesoperator.yaml"), "--no-install", "--node-namespace", NS
        )
        if d["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding")
        and d["metadata"]["name"] == "numaplane-exporter"
    ]
    with contextlib.suppress(ApiStatus):
        cp.request("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
    got = cp.kubectl(
        "apply", "--server-side", "--force-conflicts", "--field-manager=numaplane-test", "-f", "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}),
    )  # fmt: skip
    assert got.returncode == 0, got.stderr
    return cp.service_account_kubeconfig(NS, "numaplane-exporter")


@contextlib.contextmanager
def exporter(node: str, work: Path, kubeconfig: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    fake = work / "podres"
    fake.mkdir(exist_ok=True)
    memory = [{"memory_type": "memory", "size": 4 << 30, "topology": {"nodes": [{"ID": n}]}} for n in (0, 1)]
    (fake / "get_allocatable_resources.json").write_text(json.dumps({"cpu_ids": [1, 2, 3, 5, 6, 7], "memory": memory}))
    (fake / "list.json").write_text(json.dumps({"pod_resources": []}))
    sysfs = work / "host"
    if not sysfs.exists():
        build_sysfs(sysfs)
    args = [
        "exporter", f"--node-name={node}", f"--podresources-socket=fake://{fake}", f"--sysfs-root={sysfs}",
        "--topology-manager-policy=single-numa-node", "--topology-manager-scope=container",
        "--refresh-mode=periodic", "--period=60", f"--heartbeat={HEARTBEAT_SECONDS}",
        f"--kubeconfig={kubeconfig}", "--include-terminal-pods", "--metrics-address=", "--health-address=",
        "--log-format=console",
    ]  # fmt: skip
    with open(log, "ab") as out:
        process = subprocess.Popen([*CLI, *args], stdout=out, stderr=out, cwd=REPO)
    try:
        yield process
    finally:
        terminate_process(process)


def heartbeat_of(cp: ControlPlane, node: str) -> float | None:
    """The wall-clock time (epoch seconds) of the exporter's last write, from its heartbeat annotation."""
    try:
        obj = cp.request("GET", f"{NRT_PATH}/{node}")
    except ApiStatus:
        return None
    text = (obj["metadata"].get("annotations") or {}).get("numaplane.io/heartbeat")
    if not text:
        return None
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.UTC).timestamp()


def test_the_scheduler_stops_trusting_an_nrt_whose_exporter_is_gone(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    cp = control_plane
    _, scheduler_kubeconfig = install_scheduler(cp, tmp_path, mode="standalone", scheduler_name=SCHEDULER)
    exporter_kubeconfig = exporter_rbac(cp)
    health = free_port()
    args = standalone_args(scheduler_kubeconfig, SCHEDULER, health)
    exporter_log = tmp_path / "exporter.log"
    with scoped_cluster(cp) as cluster, numaplane(args, tmp_path / "scheduler.log", health) as scheduler:
        node = f"{cluster.tag}-n"
        cp.register_node(node, {"cpu": "8", "memory": "16Gi", "pods": "110"}, labels={TEST_LABEL: cluster.tag})
        cluster.nodes.append(node)
        with exporter(node, tmp_path, exporter_kubeconfig, exporter_log) as process:
            cp.wait_for("the NRT with a heartbeat", lambda: heartbeat_of(cp, node), timeout=60)
            cluster.pod("before", 2, scheduler=SCHEDULER)
            assert cluster.wait_bound("before", extra=scheduler.log()) == node
            first = heartbeat_of(cp, node)
            cp.wait_for("a heartbeat write", lambda: (heartbeat_of(cp, node) or 0) > (first or 0), timeout=10)
            process.send_signal(signal.SIGKILL)  # gone, without a last word
            killed = time.time()
            process.wait(10)
        last_write = heartbeat_of(cp, node)
        assert last_write is not None

        def stale_line() -> str | None:
            lines = [line for line in scheduler.log(400).splitlines() if STALE_LINE.search(line) and node in line]
            return lines[-1] if lines else None

        try:
            cp.wait_for("the scheduler distrusts the NRT", stale_line, timeout=30, interval=0.05)
        except TimeoutError:
            pytest.fail(f"never stale; scheduler log:\n{scheduler.log()}")
        distrusted = time.time()
        since_write, since_kill = distrusted - last_write, distrusted - killed
        bound = 3 * HEARTBEAT_SECONDS
        # never before the bound (the writer's stamp precedes the write's arrival); at most the bound +
        # two scheduler ticks (1 s each: the one dating the write, the one finding it stale) + this poll
        print(
            f"\nexporter killed → scheduler distrusts its NRT: {since_kill:.2f} s after the kill, "
            f"{since_write:.2f} s after its last write (heartbeat {HEARTBEAT_SECONDS} s, bound {bound} s)"
        )
        assert bound <= since_write <= bound + 2.5, (since_write, stale_line())
        # a pod now is refused on that node: its data is not trusted. (1 CPU: the over-reserve cache
        # still charges "before" to every zone — no kubelet runs it, so no fingerprint ever covers it)
        cluster.pod("after", 1, scheduler=SCHEDULER)
        event = cluster.wait_event("after", "FailedScheduling", "malformed node topology data")
        assert not cluster.node_of("after"), event
        # the exporter comes back: the node is trusted again at its first write, the held pod placed
        with exporter(node, tmp_path, exporter_kubeconfig, exporter_log):
            back = time.monotonic()
            assert cluster.wait_bound("after", timeout=60, extra=scheduler.log()) == node
            placed = time.monotonic() - back
        assert not scheduler.denials(), scheduler.denials()[:5]
    print(f"exporter restarted → the held pod placed in {placed:.2f} s (exporter start included)")
