"""Benchmark: sysfs discovery time on the largest real-machine snapshots.

Usage: ``python bench/discovery.py [--quick] [--all]``. Each snapshot is unpacked once into a temporary
folder (RAM-backed ``/dev/shm`` when available), discovered once to warm the page cache, then timed.
Prints ``metric: value unit`` lines:

* ``discover_<machine>_p50`` / ``_p99``: one :func:`numaplane.topology.sysfs.discover` call;
* ``unpack_<machine>``: one :func:`unpack_snapshot` of the archive (for reference);
* ``render_svg_<machine>``: one SVG picture of the discovered topology (``--quick`` skips it).

Target: discovery under 200 ms for every machine. The snapshots come from
``$NUMAPLANE_SHARED/topologies/real`` (default ``../shared`` next to the repository).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from numaplane.topology.render import render
from numaplane.topology.snapshot import unpack_snapshot
from numaplane.topology.sysfs import discover

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("NUMAPLANE_SHARED", str(REPO.parent / "shared")))
LARGEST = [
    "ibm-power7-8n-256t-smt4",
    "intel-xeon-4s4n-144t",
    "arm64-kunpeng920-2s4n-128c",
    "intel-xeon-gold6330-2s2n-112t-pci",
    "intel-xeon-2s-snc2-4n-4pmem-112t",
    "intel-xeon-gold6230-2s2n-80t-pci",
]


def timed(fn: object, rounds: int) -> list[float]:
    assert callable(fn)
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000.0)
    return out


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, no picture timing")
    parser.add_argument("--all", action="store_true", help="every snapshot, not only the largest")
    args = parser.parse_args()
    rounds = 5 if args.quick else 30
    real = SHARED / "topologies" / "real"
    names = sorted(p.name.removesuffix(".tar.gz") for p in real.glob("*.tar.gz")) if args.all else LARGEST
    shm = Path("/dev/shm")
    base = Path(tempfile.mkdtemp(prefix="numaplane-bench-", dir=shm if os.access(shm, os.W_OK) else None))
    worst = 0.0
    try:
        for name in names:
            start = time.perf_counter()
            root = unpack_snapshot(real / f"{name}.tar.gz", base / name)
            unpack_ms = (time.perf_counter() - start) * 1000.0
            topology = discover(root)  # warm the page cache
            samples = timed(lambda root=root: discover(root), rounds)
            p50 = statistics.median(samples)
            worst = max(worst, p50)
            print(f"discover_{name}_p50: {p50:.1f} ms")
            print(f"discover_{name}_p99: {percentile(samples, 0.99):.1f} ms")
            print(f"unpack_{name}: {unpack_ms:.0f} ms")
            if not args.quick:
                svg = timed(lambda t=topology: render(t, "svg"), 3)
                print(f"render_svg_{name}: {statistics.median(svg):.0f} ms")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"discover_worst_p50: {worst:.1f} ms")
    print(f"discover_target_met: {int(worst < 200.0)} bool")


if __name__ == "__main__":
    main()
