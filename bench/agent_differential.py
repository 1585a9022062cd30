"""The real kubelet v1.36.2 against ``numaplane agent`` deciding through NRI, pod by pod, on real machines.

For each snapshot in ``shared/topologies/real/`` the real kubelet plays the seeded pod sequence of each
configuration (``numaplane_harness.kubeletdiff.run_machine``: the kubelet sees the machine in its own
mount namespace); then a real ``numaplane agent`` process (``--sysfs-root`` the snapshot,
``--config`` that configuration, ``--watch-pods`` on the same kube-apiserver) is driven over a real NRI
socket with the same sequence (``numaplane_harness.agentdiff``), and every decision (admit/reject and
reason, CPUs, NUMA memory and hugepages per container) and the final checkpoints are compared; the
agent's PodResources answer is checked against its checkpoint, and its decisions against numaplane's
in-process manager on the same pods in agent mode's order (exactly equal, whatever the kubelet did;
the first difference shrunk, ``--minimise`` agent runs). Prints the table per machine ×
configuration and ``metric: value unit`` lines.

``--record FILE`` also writes the kubelet's decisions (what ``tests/realkube/test_real_agent_differential.py``
replays in CI, ``tests/realkube/data/kubelet_decisions.json``); ``--from FILE`` replays a recording
instead of running the kubelet (needs only the control plane).

Run as root: ``.venv/bin/python bench/agent_differential.py [--machines a,b] [--reduced] [--pods N]``.
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

from numaplane_harness.agentdiff import AgentResult, Case, run_cases  # noqa: E402
from numaplane_harness.containerd import ContainerdUnavailable, fetch_packages, run_containerd  # noqa: E402
from numaplane_harness.kubecluster import KubeUnavailable, control_plane_unavailable_reason, run_control_plane  # noqa: E402
from numaplane_harness.kubelet import KubeletUnavailable, kubelet_unavailable_reason  # noqa: E402
from numaplane_harness.kubeletdiff import Host, describe, run_machine  # noqa: E402

SHARED = Path(os.environ.get("NUMAPLANE_SHARED", str(HERE.parent.parent / "shared"))).resolve()


def table(results: list[AgentResult]) -> str:
    width = max((len(r.machine) for r in results), default=7)
    cwidth = max((len(r.config) for r in results), default=6)
    rows = [
        f"{'machine':<{width}}  {'config':<{cwidth}}  pods  equal/compared  known  in-process  seconds  podresources"
    ]
    for r in results:
        own = f"{r.inprocess_compared - len(r.inprocess)}/{r.inprocess_compared}"
        rows.append(
            f"{r.machine:<{width}}  {r.config:<{cwidth}}  {r.pods:>4}  {r.equal:>5}/{r.compared:<8}  {len(r.known):>5}"
            f"  {own:>10}  {r.seconds:7.1f}  {'agrees' if not r.podresources else f'{len(r.podresources)} differ'}"
        )
    return "\n".join(rows)


def kubelet_cases(cp: object, machines: list[str], args: argparse.Namespace) -> dict[str, list[Case]]:
    """The kubelet's outcome per machine × configuration (a failed machine is reported and left out)."""
    cases: dict[str, list[Case]] = {}
    with run_containerd(fetch_packages()) as containerd:
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
                    )
                except Exception as exc:  # one machine's failure is reported, the others still run
                    print(f"{machine}: kubelet FAILED {type(exc).__name__}: {str(exc)[:400]}", file=sys.stderr)
                    continue
            cases[machine] = [
                Case(machine, r.diff_config, r.ops, r.kubelet, r.node or {})
                for r in got
                if r.diff_config is not None and r.kubelet is not None
            ]
            print(f"{machine}: kubelet played {len(got)} configurations", flush=True)
    return cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--machines", default="", help="comma-separated snapshot names (default: all)")
    parser.add_argument("--reduced", action="store_true", help="4 configurations per machine (CI's)")
    parser.add_argument("--configs", default="", help="comma-separated configuration names to keep")
    parser.add_argument("--pods", type=int, default=12, help="operations per sequence (adds and deletions)")
    parser.add_argument("--seed", type=int, default=27)
    parser.add_argument("--record", type=Path, help="write the kubelet's decisions here")
    parser.add_argument("--from", dest="source", type=Path, help="replay these recorded kubelet decisions")
    parser.add_argument(
        "--minimise", type=int, default=4, help="agent runs allowed to shrink an agent / in-process difference"
    )
    args = parser.parse_args(argv)
    if not 1 <= args.pods <= 200:
        parser.error("--pods must be within 1..200")
    available = sorted(p.name.removesuffix(".tar.gz") for p in (SHARED / "topologies" / "real").glob("*.tar.gz"))
    machines = [m for m in args.machines.split(",") if m] or available
    if unknown := [m for m in machines if m not in available]:
        parser.error(f"unknown machines {unknown} (have: {', '.join(available)})")
    if reason := control_plane_unavailable_reason() or (None if args.source else kubelet_unavailable_reason()):
        print(f"agent_differential: cannot run here: {reason}", file=sys.stderr)
        return 2
    began = time.monotonic()
    results: list[AgentResult] = []
    try:
        with run_control_plane() as cp:
            cp.wait_for(
                "the default service account",
                lambda: cp.request("GET", "/api/v1/namespaces/default/serviceaccounts/default"),
                timeout=60,
            )
            if args.source:
                doc = json.loads(args.source.read_text())
                cases = {
                    m: [Case.from_dict(c) for c in entries] for m, entries in doc["machines"].items() if m in machines
                }
            else:
                cases = kubelet_cases(cp, machines, args)
            if args.configs:
                keep = set(args.configs.split(","))
                cases = {m: [c for c in cs if c.config.name.split(" (")[0] in keep] for m, cs in cases.items()}
            if args.record:
                args.record.write_text(
                    json.dumps(
                        {
                            "kubelet": "v1.36.2",
                            # where the kubelet ran: its containers really start where their cpuset fits
                            "host": {"cpus": Host.here().cpus.format(), "nodes": sorted(Host.here().nodes)},
                            "seed": args.seed,
                            "operations": args.pods,
                            "machines": {m: [c.to_dict() for c in cs] for m, cs in cases.items()},
                        },
                        indent=1,
                        sort_keys=True,
                    )
                    + "\n"
                )
            agent_began = time.monotonic()
            for machine, machine_cases in cases.items():
                with tempfile.TemporaryDirectory(prefix="npad-", dir="/tmp") as tmp:
                    got = run_cases(
                        cp,
                        SHARED / "topologies" / "real" / f"{machine}.tar.gz",
                        machine_cases,
                        Path(tmp),
                        minimise_budget=args.minimise,
                    )
                results.extend(got)
                for r in got:
                    print(f"{r.machine} {r.config}: {r.equal}/{r.compared} ({r.seconds:.1f} s)", flush=True)
                    for m in r.mismatches:
                        print(f"  MISMATCH {m.what}: kubelet {m.kubelet} | agent {m.numaplane}", flush=True)
                    for known, m in r.known:
                        print(f"  KNOWN {known.name} {m.what}: kubelet {m.kubelet} | agent {m.numaplane}", flush=True)
                    for p in r.podresources:
                        print(f"  PODRESOURCES {p}", flush=True)
                    for m in r.inprocess:
                        print(f"  IN-PROCESS {m.what}: in-process {m.kubelet} | agent {m.numaplane}", flush=True)
                    if r.minimal:
                        print(f"  minimal: {describe(r.minimal)}", flush=True)
            agent_seconds = time.monotonic() - agent_began
    except (KubeUnavailable, ContainerdUnavailable, KubeletUnavailable) as exc:
        print(f"agent_differential: cannot run here: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    print(table(results))
    compared = sum(r.compared for r in results)
    equal = sum(r.equal for r in results)
    print(f"machines: {len({r.machine for r in results})} count")
    print(f"configurations: {len(results)} count")
    print(f"pods: {sum(r.pods for r in results)} count")
    print(f"decisions_compared: {compared} count")
    print(f"decisions_equal: {equal} count")
    known = sum(len(r.known) for r in results)
    print(f"mismatches: {compared - equal - known} count")
    print(f"known_divergences: {known} count")
    print(f"podresources_disagreements: {sum(len(r.podresources) for r in results)} count")
    print(f"inprocess_compared: {sum(r.inprocess_compared for r in results)} count")
    print(f"inprocess_mismatches: {sum(len(r.inprocess) for r in results)} count")
    print(f"agent_seconds: {agent_seconds:.1f} s")
    print(f"wall: {time.monotonic() - began:.1f} s")
    return 1 if compared != equal + known or any(r.podresources or r.inprocess for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
