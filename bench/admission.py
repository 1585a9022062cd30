"""ResourceManager admission on the 256-CPU, 8-NUMA fixture: hints + merge + allocate, per call.

Usage: python bench/admission.py [--quick] [--shared DIR]

Admits a one-container Guaranteed pod (4 CPUs) with the default plugins under single-numa-node and
removes it again; prints p50/p99 of ``admit`` and the rate of admit/remove cycles as
``metric: value unit`` lines. Target (issue "Resource manager core"): p99 <= 1 ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from numaplane.policy.manager import ResourceManager
from numaplane.resources.pod import parse_pod
from numaplane.topology.document import topology_from_dict

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    args = parser.parse_args()
    fixture = args.shared / "conformance" / "topologies" / "topoDualSocketMultiNumaPerSocketHTLarge.json"
    topology = topology_from_dict(json.loads(fixture.read_text()))
    cycles = 1_000 if args.quick else 10_000
    for policy in ("single-numa-node", "best-effort"):
        manager = ResourceManager(
            topology, {"topologyManager": {"policy": policy}, "cpuManager": {"reservedCPUCount": 2}}
        )
        # a partly used node: 40 pods of 2-6 CPUs already admitted
        for i in range(40):
            cpus = 2 + (i % 3) * 2
            res = {"cpu": str(cpus), "memory": "1Gi"}
            manager.admit(
                parse_pod(
                    {
                        "metadata": {"name": f"bg{i}", "uid": f"bg{i}"},
                        "spec": {"containers": [{"name": "c", "resources": {"requests": res, "limits": res}}]},
                    }
                )
            )
        res = {"cpu": "4", "memory": "2Gi"}
        pods = [
            parse_pod(
                {
                    "metadata": {"name": f"p{i}", "uid": f"p{i}"},
                    "spec": {"containers": [{"name": "c", "resources": {"requests": res, "limits": res}}]},
                }
            )
            for i in range(cycles)
        ]
        samples = []
        started = time.perf_counter()
        for pod in pods:
            t0 = time.perf_counter()
            admission = manager.admit(pod)
            samples.append(time.perf_counter() - t0)
            assert admission.admitted, admission
            manager.remove(pod.uid)
        total = time.perf_counter() - started
        samples.sort()
        p99 = samples[int(len(samples) * 0.99) - 1]
        print(f"admit_{policy}_p50: {statistics.median(samples) * 1e3:.3f} ms")
        print(f"admit_{policy}_p99: {p99 * 1e3:.3f} ms")
        print(f"admit_remove_cycles_{policy}: {cycles / total:.0f} cycles/s")


if __name__ == "__main__":
    main()
