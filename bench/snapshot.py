"""Benchmark: ``numaplane snapshot`` and ``numaplane simulate --from`` on a generated large cluster.

Usage: ``python bench/snapshot.py [--quick] [--nodes N] [--pods-per-node K] [--pending P]``. The
fake API server (in this process) is filled with a generated cluster (:mod:`numaplane_harness.clustergen`:
5,000 nodes × 20 bound pods + 1,000 pending pods by default; ``--quick``: 500 × 20 + 100), then the
two commands run as child processes, as a user runs them. Prints ``metric: value unit`` lines:

* ``cluster_nodes`` / ``cluster_pods``: the generated cluster;
* ``snapshot_seconds``: wall time of ``numaplane snapshot --server URL -o FILE`` (pages of 500);
* ``snapshot_file_mib``: the snapshot's size;
* ``snapshot_peak_rss_mib``: peak RSS of the snapshot process (bounded: one LIST page at a time);
* ``simulate_seconds``: wall time of ``numaplane simulate --from FILE -o json`` (no change, default
  scheduler: load, rebuild every node from its NRT, re-admit every pod twice — baseline and
  scenario —, schedule the pending pods);
* ``simulate_peak_rss_mib``: peak RSS of the simulate process;
* ``simulate_baseline_matches_nrt``: 1 when every zone's available resources equal its NRT's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

from numaplane.kube.resources import CRD, NODE, NODE_RESOURCE_TOPOLOGY, POD
from numaplane.nrt.crd import crd_manifest
from numaplane.testing.fakeapi import FakeApiServer

# runs the CLI and prints its own peak RSS (KiB) as the last stderr line. VmHWM, not getrusage's
# ru_maxrss: Linux carries the forking parent's (this process's, holding the whole fake cluster)
# high-water mark across exec into ru_maxrss.
_RUN = (
    "import sys\n"
    "from numaplane.cli import main\n"
    "def hwm():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            return int(line.split()[1])\n"
    "    return 0\n"
    "try:\n"
    "    main()\n"
    "finally:\n"
    "    print('peak_rss_kib', hwm(), file=sys.stderr)\n"
)

# The test harness (real control plane, kubelet, containerd) is not installed: it lives in harness/.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))
from numaplane_harness.clustergen import generate_cluster, pending_pods  # noqa: E402


def report(metric: str, value: float, unit: str) -> None:
    print(f"{metric}: {value:.1f} {unit}", flush=True)


async def fill(server: FakeApiServer, nodes: int, pods_per_node: int, pending: int) -> int:
    store = server.store
    await store.create(CRD, crd_manifest())
    count = 0
    for gen in generate_cluster(nodes, pods_per_node, seed=19):
        await store.create(NODE, gen.node)
        await store.create(NODE_RESOURCE_TOPOLOGY, gen.nrt)
        for pod in gen.pods:
            await store.create(POD, pod)
        count += len(gen.pods)
    for pod in pending_pods(pending):
        await store.create(POD, pod)
    return count + pending


async def run_cli(*args: str) -> tuple[float, float, str]:
    """(wall seconds, peak RSS MiB, stdout) of ``numaplane ARGS`` in a child process."""
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _RUN, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await proc.communicate()
    seconds = time.perf_counter() - started
    lines = err.decode().strip().splitlines()
    if proc.returncode != 0:
        raise SystemExit(f"numaplane {' '.join(args)} failed:\n" + "\n".join(lines[-20:]))
    rss = next((int(line.split()[1]) for line in reversed(lines) if line.startswith("peak_rss_kib")), 0)
    return seconds, rss / 1024, out.decode()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="500 nodes × 20 pods + 100 pending")
    parser.add_argument("--nodes", type=int)
    parser.add_argument("--pods-per-node", type=int, default=20)
    parser.add_argument("--pending", type=int)
    opts = parser.parse_args()
    nodes = opts.nodes or (500 if opts.quick else 5000)
    pending = opts.pending if opts.pending is not None else nodes // 5
    async with FakeApiServer() as server:
        started = time.perf_counter()
        pods = await fill(server, nodes, opts.pods_per_node, pending)
        report("cluster_nodes", nodes, "nodes")
        report("cluster_pods", pods, "pods")
        report("cluster_generation_seconds", time.perf_counter() - started, "s")
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "cluster.yaml"
            seconds, rss, _ = await run_cli("snapshot", "--server", server.url, "-o", str(path), "-q")
            report("snapshot_seconds", seconds, "s")
            report("snapshot_file_mib", path.stat().st_size / (1 << 20), "MiB")
            report("snapshot_peak_rss_mib", rss, "MiB")
            seconds, rss, out = await run_cli("simulate", "--from", str(path), "-o", "json", "-q")
            report("simulate_seconds", seconds, "s")
            report("simulate_peak_rss_mib", rss, "MiB")
            doc = json.loads(out)
            report("simulate_baseline_matches_nrt", 1.0 if doc["baseline"]["matchesNRT"] else 0.0, "bool")
            report("simulate_pending_placed", len(doc["schedulers"][0]["pendingNowPlaced"]), "pods")


if __name__ == "__main__":
    asyncio.run(main())
