"""Benchmark: ``takeByTopologyNUMADistributed`` against an earlier revision, in the same run.

Usage: ``python bench/take_distributed.py [--quick] [--baseline REV] [--seed N]``. The baseline's
``policy/cpu_assignment.py`` and ``policy/cpu_combinations.py`` are read with ``git show REV:...``
and imported under other names; both implementations then take the same random free sets on the
256-CPU, 8-NUMA fixture, alternately, in several rounds (the machine is noisy: the best round of
each counts). Every answer is compared: a difference is an error, not a figure. Prints
``metric: value unit`` lines: ``distributed_g<G>_rate`` and ``baseline_distributed_g<G>_rate``
(calls/s, group 1 and 2), and ``speedup_g<G>`` (ratio).
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from admission_cpu import FIXTURE, load_fixture

from numaplane.policy import cpu_assignment
from numaplane.policy.errors import UnexpectedAdmissionError

REPO = Path(__file__).resolve().parent.parent


def baseline_module(rev: str, folder: Path) -> ModuleType:
    """The revision's ``cpu_assignment``, importing that revision's ``cpu_combinations``."""
    sources = {}
    for name in ("cpu_combinations", "cpu_assignment"):
        text = subprocess.run(
            ["git", "show", f"{rev}:src/numaplane/policy/{name}.py"],
            cwd=REPO,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        sources[name] = text.replace("numaplane.policy.cpu_combinations", "baseline_cpu_combinations")
    module: ModuleType | None = None
    for name in ("cpu_combinations", "cpu_assignment"):
        path = folder / f"baseline_{name}.py"
        path.write_text(sources[name])
        spec = importlib.util.spec_from_file_location(f"baseline_{name}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    assert module is not None
    return module


def answers(take: Callable[[int, int, int], int], cases: list[tuple[int, int, int]]) -> list[object]:
    out: list[object] = []
    for free, count, group in cases:
        try:
            out.append(take(free, count, group))
        except UnexpectedAdmissionError as error:
            out.append(str(error))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="300 calls per group, 3 rounds")
    parser.add_argument("--baseline", default="HEAD~1", help="git revision to compare with (default HEAD~1)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    calls, rounds = (300, 3) if args.quick else (1000, 5)
    topology = load_fixture(FIXTURE)
    cpus = topology.all_cpus.sorted()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as scratch:
        old = baseline_module(args.baseline, Path(scratch))
        new_idx, old_idx = cpu_assignment.index_for(topology), old.index_for(topology)
        for group in (1, 2):
            cases = []
            for _ in range(calls):
                free = 0
                for c in rng.sample(cpus, rng.randint(len(cpus) // 4, len(cpus))):
                    free |= 1 << c
                count = rng.randint(1, min(64, free.bit_count()))
                cases.append((free, count - count % group or group, group))

            def new_take(f: int, n: int, g: int) -> int:
                return cpu_assignment.take_distributed(new_idx, f, n, g)

            def old_take(f: int, n: int, g: int) -> int:
                return int(old.take_distributed(old_idx, f, n, g))

            if answers(new_take, cases) != answers(old_take, cases):
                raise SystemExit(f"group {group}: the two revisions answer differently")
            best = {"new": 0.0, "old": 0.0}
            for _ in range(rounds):
                for label, take in (("old", old_take), ("new", new_take)):
                    started = time.perf_counter()
                    answers(take, cases)
                    best[label] = max(best[label], calls / (time.perf_counter() - started))
            print(f"distributed_g{group}_rate: {best['new']:.0f} calls/s")
            print(f"baseline_distributed_g{group}_rate: {best['old']:.0f} calls/s")
            print(f"speedup_g{group}: {best['new'] / best['old']:.2f} x")


if __name__ == "__main__":
    main()
