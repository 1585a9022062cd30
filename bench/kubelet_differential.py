"""The real kubelet v1.36.2 against numaplane's core on every real machine snapshot, pod by pod.

For each snapshot in ``shared/topologies/real/`` the kubelet sees that machine (its own mount
namespace, ``numaplane_harness.machineoverlay``) and each configuration of the matrix
(``numaplane_harness.kubeletdiff.default_matrix``: topology policy × scope, the CPU manager options,
reserved CPUs; the memory manager Static where every node reports memory, None elsewhere) plays the
same seeded pod sequence there and on numaplane's manager. Prints the table per machine ×
configuration, every mismatch (the first minimised), and ``metric: value unit`` lines.

Run as root: ``.venv/bin/python bench/kubelet_differential.py [--machines a,b] [--reduced] [--pods N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "harness"))

from numaplane_harness.agentdiff import Case  # noqa: E402
from numaplane_harness.containerd import ContainerdUnavailable, fetch_packages, run_containerd  # noqa: E402
from numaplane_harness.kubecluster import KubeUnavailable, control_plane_unavailable_reason, run_control_plane  # noqa: E402
from numaplane_harness.kubelet import KubeletUnavailable, kubelet_unavailable_reason  # noqa: E402
from numaplane_harness.kubeletdiff import ConfigResult, Host, describe, run_machine  # noqa: E402

SHARED = Path(os.environ.get("NUMAPLANE_SHARED", str(HERE.parent.parent / "shared"))).resolve()


def table(results: list[ConfigResult]) -> str:
    width = max((len(r.machine) for r in results), default=7)
    cwidth = max((len(r.config) for r in results), default=6)
    rows = [f"{'machine':<{width}}  {'config':<{cwidth}}  pods  equal/compared  seconds  rejected by the kubelet"]
    for r in results:
        if r.refused:
            rows.append(
                f"{r.machine:<{width}}  {r.config:<{cwidth}}  {r.pods:>4}  {r.equal:>5}/{r.compared:<8}  {r.seconds:7.1f}"
                f"  the kubelet refuses to start: {r.refused.split(': ')[-1]}"
            )
            continue
        if r.crash is not None:
            rows.append(
                f"{r.machine:<{width}}  {r.config:<{cwidth}}  {r.pods:>4}  {r.equal:>5}/{r.compared:<8}  {r.seconds:7.1f}"
                f"  kubelet panics: {r.crash[0].name}"
            )
            continue
        rows.append(
            f"{r.machine:<{width}}  {r.config:<{cwidth}}  {r.pods:>4}  {r.equal:>5}/{r.compared:<8}  {r.seconds:7.1f}"
            f"  {', '.join(r.rejected) or '-'}"
        )
    return "\n".join(rows)


def record(path: Path, results: list[ConfigResult], args: argparse.Namespace) -> None:
    """The kubelet's decisions per machine × configuration, in ``bench/agent_differential.py --record``'s format."""
    machines: dict[str, list[dict[str, object]]] = {}
    for r in results:
        if r.diff_config is not None and r.kubelet is not None:
            machines.setdefault(r.machine, []).append(
                Case(r.machine, r.diff_config, r.ops, r.kubelet, r.node or {}).to_dict()
            )
    here = Host.here()
    doc = {
        "kubelet": "v1.36.2",
        "host": {"cpus": here.cpus.format(), "nodes": sorted(here.nodes)},
        "seed": args.seed,
        "operations": args.pods,
        "machines": machines,
    }
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--machines", default="", help="comma-separated snapshot names (default: all)")
    parser.add_argument("--reduced", action="store_true", help="4 configurations per machine (CI's)")
    parser.add_argument("--pods", type=int, default=12, help="operations per sequence (adds and deletions)")
    parser.add_argument("--seed", type=int, default=27)
    parser.add_argument("--minimise", type=int, default=4, help="kubelet replays allowed to shrink a mismatch")
    parser.add_argument(
        "--record",
        type=Path,
        help="write the kubelet's decisions here (what bench/agent_differential.py --from replays)",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.pods <= 200:
        parser.error("--pods must be within 1..200")
    available = sorted(p.name.removesuffix(".tar.gz") for p in (SHARED / "topologies" / "real").glob("*.tar.gz"))
    machines = [m for m in args.machines.split(",") if m] or available
    if unknown := [m for m in machines if m not in available]:
        parser.error(f"unknown machines {unknown} (have: {', '.join(available)})")
    if reason := control_plane_unavailable_reason() or kubelet_unavailable_reason():
        print(f"kubelet_differential: cannot run here: {reason}", file=sys.stderr)
        return 2
    began = time.monotonic()
    load_before = Path("/proc/loadavg").read_text().split()[0]
    results: list[ConfigResult] = []
    failed: dict[str, str] = {}
    try:
        with run_control_plane() as cp, run_containerd(fetch_packages()) as containerd:
            for machine in machines:
                with tempfile.TemporaryDirectory(prefix="npkd-", dir="/tmp") as tmp:
                    try:
                        got = run_machine(
                            cp,
                            containerd,
                            SHARED / "topologies" / "real" / f"{machine}.tar.gz",
                            Path(tmp),
                            reduced=args.reduced,
                            count=args.pods,
                            seed=args.seed,
                            minimise_budget=args.minimise,
                        )
                    except Exception as exc:  # one machine's failure is reported, the others still run
                        failed[machine] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                        tail = "\n    ".join(str(exc).splitlines()[-40:])
                        print(f"{machine}: FAILED {failed[machine]}\n    {tail}", file=sys.stderr, flush=True)
                        continue
                results.extend(got)
                for r in got:
                    if r.refused:
                        print(f"{r.machine} {r.config}: the kubelet refuses to start: {r.refused}", flush=True)
                    if r.crash is not None:
                        print(f"{r.machine} {r.config}: kubelet panics: {r.crash[0].name}: {r.crash[1]}", flush=True)
                    print(f"{r.machine} {r.config}: {r.equal}/{r.compared} ({r.seconds:.1f} s)", flush=True)
                    for m in r.mismatches:
                        print(f"  MISMATCH {m.what}: kubelet {m.kubelet} | numaplane {m.numaplane}", flush=True)
                    for known, m in r.known:
                        print(
                            f"  KNOWN {known.name} {m.what}: kubelet {m.kubelet} | numaplane {m.numaplane}", flush=True
                        )
                    if r.minimal:
                        print(f"  minimal: {describe(r.minimal)}", flush=True)
    except (KubeUnavailable, ContainerdUnavailable, KubeletUnavailable) as exc:
        print(f"kubelet_differential: cannot run here: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    if args.record:
        record(args.record, results, args)
    print(table(results))
    compared = sum(r.compared for r in results)
    equal = sum(r.equal for r in results)
    print(f"machines: {len({r.machine for r in results})} count")
    print(f"machines_failed: {len(failed)} count")
    print(f"configurations: {len(results)} count")
    print(f"pods: {sum(r.pods for r in results)} count")
    print(f"decisions_compared: {compared} count")
    print(f"decisions_equal: {equal} count")
    known = sum(len(r.known) for r in results)
    print(f"mismatches: {compared - equal - known} count")
    print(f"known_divergences: {known} count")
    print(f"rejections: {sum(len(r.rejected) for r in results)} count")
    print(f"kubelet_panics: {sum(r.crash is not None for r in results)} count")
    print(f"configurations_refused: {sum(bool(r.refused) for r in results)} count")
    print(f"wall: {time.monotonic() - began:.1f} s")
    print(f"load_before: {load_before} loadavg")
    print(f"load_after: {Path('/proc/loadavg').read_text().split()[0]} loadavg")
    for machine, why in failed.items():
        print(f"failed {machine}: {why}")
    return 1 if failed or compared != equal + known else 0


if __name__ == "__main__":
    sys.exit(main())
