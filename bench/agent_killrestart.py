"""Benchmark: the node agent killed with SIGKILL at random moments under pod churn on a real containerd 1.7.

The trial of issue 25 item 16: a private containerd 1.7.24 with NRI, ``numaplane agent`` as a process on a
machine described as 2 CPUs on 2 NUMA nodes with CPU 0 reserved, Guaranteed 1-CPU (and some BestEffort)
pods created and deleted through CRI without pause, and the agent killed ``--kills`` times (50) at random
moments and restarted (:func:`numaplane_harness.agenttrial.kill_restart_trial`). Printed, as JSON:

* ``survived`` / ``kills``: kills after which the agent answered ``/readyz`` (within 30 s), with its
  checkpoint restored, and converged;
* ``checkpoint_restored``: restarts whose checkpoint restored (``/readyz`` says ``restored``);
* ``ready_seconds`` / ``converged_seconds`` (p50, p95, max): from the restart to ready, and to every
  running container's cgroup matching the agent's state (after one BestEffort pod's creation, the
  runtime request that carries the changes owed to running containers);
* ``unsolicited_update_calls``: ``Runtime.UpdateContainers`` calls (0: containerd 1.7 would deadlock);
* ``slowest_cri_call_seconds`` and ``runtime_answers_after``: the runtime never wedged;
* pods created, refused (no free CPU: ``TopologyAffinityError``), deleted, created while the agent was
  down, and the most containers waiting for a CPU at a restart.

Exit status 1 when any kill was not survived. ``python bench/agent_killrestart.py --kills 50 --seed 7``
(about 2-3 minutes on the 2-CPU machine).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))

from numaplane_harness.agenttrial import kill_restart_trial
from numaplane_harness.containerd import ContainerdUnavailable, fetch_packages, run_containerd


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--max-pods", type=int, default=6)
    parser.add_argument("--quiet", action="store_true", help="only the final JSON")
    args = parser.parse_args()
    if args.kills < 1 or args.max_pods < 1:
        print("Error: --kills and --max-pods must be at least 1", file=sys.stderr)
        return 2
    started = time.monotonic()
    try:
        with run_containerd(fetch_packages()) as containerd, tempfile.TemporaryDirectory(prefix="npk-") as tmp:
            result = kill_restart_trial(
                containerd,
                Path(tmp),
                kills=args.kills,
                seed=args.seed,
                max_pods=args.max_pods,
                say=(lambda _line: None) if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True)),
            )
    except ContainerdUnavailable as exc:
        print(f"Error: containerd unavailable: {exc}", file=sys.stderr)
        return 2
    summary = {"seed": args.seed, **result.summary(), "wall_seconds": round(time.monotonic() - started, 1)}
    print(json.dumps(summary, indent=2))
    return 0 if result.survived == result.kills and not result.failures else 1


if __name__ == "__main__":
    sys.exit(main())
