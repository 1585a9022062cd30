"""Derive the simulator's built-in machine topologies from the real sysfs snapshots.

Usage: python scripts/gen_sim_topologies.py [--shared DIR] [--check]

Each snapshot in ``<shared>/topologies/real/*.tar.gz`` is unpacked into a temporary folder, read with
numaplane's own sysfs discovery, and written as topology JSON to
``src/numaplane/sim/data/topologies/<machine>.json``; the package then needs no shared folder at run
time. ``--check`` fails when a committed file differs from what discovery produces now.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from numaplane.topology.document import topology_to_dict
from numaplane.topology.snapshot import unpack_snapshot
from numaplane.topology.sysfs import discover

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "src" / "numaplane" / "sim" / "data" / "topologies"


def _scratch() -> str | None:
    """Unpack into memory when possible: the snapshots are ~77,000 small files."""
    return "/dev/shm" if os.access("/dev/shm", os.W_OK) else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    snapshots = sorted((args.shared / "topologies" / "real").glob("*.tar.gz"))
    if not snapshots:
        print(f"no snapshots under {args.shared}/topologies/real", file=sys.stderr)
        return 2
    OUT.mkdir(parents=True, exist_ok=True)
    drift = []
    for snap in snapshots:
        name = snap.name.removesuffix(".tar.gz")
        with tempfile.TemporaryDirectory(dir=_scratch()) as tmp:
            topo = discover(unpack_snapshot(snap, tmp))
        doc = topology_to_dict(topo)
        doc["name"] = name
        doc["source"] = f"numaplane sysfs discovery of the real snapshot {snap.name}"
        doc.pop("attributes", None)
        text = json.dumps(doc, indent=1, sort_keys=False) + "\n"
        path = OUT / f"{name}.json"
        if args.check:
            if not path.is_file() or path.read_text() != text:
                drift.append(name)
        else:
            path.write_text(text)
    if drift:
        print("out of date: " + ", ".join(drift), file=sys.stderr)
        return 1
    print(f"{'checked' if args.check else 'wrote'} {len(snapshots)} topologies in {OUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
