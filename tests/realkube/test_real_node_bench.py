"""``bench/real_node.py`` keeps working: its measurements, and a short run on the real kubelet.

* The probes (:mod:`numaplane_harness.nodeprobes`): nearest-rank percentiles, ``/proc`` parsing, and
  the CPU sampler on real processes — one that burns CPU and exits inside the block still counts.
* The bench's configurations on the module's real kubelet, 2 pods each: ``a`` (the kubelet's managers)
  and ``b`` (the managers off, ``numaplane agent``) and ``c`` (the agent's built-in CPU plugin off,
  the example CPU plugin out of process) measure a latency per pod and the CPU of every process
  group, and give every container the same cpuset.
"""

from __future__ import annotations

import importlib.util
import math
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from numaplane.topology.cpuset import CPUSet
from numaplane_harness.kubelet import RealKubelet
from numaplane_harness.nodeprobes import ProcSampler, machine_ticks, parse_proc_stat, percentile

BENCH = Path(__file__).resolve().parents[2] / "bench" / "real_node.py"
BURN = "import time\nend = time.process_time() + {seconds}\nwhile time.process_time() < end: pass\n"


def load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("real_node_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(module)
    return module


# ---- the probes ---------------------------------------------------------------------------------


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(100, 0, -1)]  # 1..100, unsorted
    assert (percentile(values, 50), percentile(values, 99), percentile(values, 100)) == (50.0, 99.0, 100.0)
    assert percentile([7.0], 99) == 7.0
    assert percentile([1.0, 2.0, 3.0], 50) == 2.0
    assert math.isnan(percentile([], 50))


def test_proc_stat_line_with_a_hostile_name() -> None:
    # pid (comm) state ppid ... utime=14 stime=15 cutime=16 cstime=17 ... starttime=22
    fields = ["S", "41", *["0"] * 9, "300", "20", "5", "1", *["0"] * 4, "123456", "0"]
    line = "4242 (a) b (c)) " + " ".join(fields)
    assert parse_proc_stat(line) == (41, 123456, 326)


def test_machine_ticks_leave_idle_and_iowait_out() -> None:
    stat = "cpu  100 5 50 1000 20 3 2 0 7 0\ncpu0 50 2 25 500 10 1 1 0 0 0\n"
    assert machine_ticks(stat) == (160, 1180)
    busy, total = machine_ticks()
    assert 0 <= busy <= total


def test_sampler_counts_a_process_that_exits_during_the_block() -> None:
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.3)  # its start-up CPU is spent before the block: not counted
        with ProcSampler({"burner": [], "idle": [idle.pid]}, interval=0.05) as sampler:
            burner = subprocess.Popen([sys.executable, "-c", BURN.format(seconds=0.4)])
            sampler.groups["burner"] = (burner.pid,)
            burner.wait(30)
        consumed = sampler.consumed_ms()
    finally:
        idle.kill()
        idle.wait()
    # the last sample is at most one interval before the exit
    assert consumed["burner"] >= 250, consumed
    assert consumed["idle"] <= 50, consumed
    assert consumed["total"] == pytest.approx(consumed["burner"] + consumed["idle"])


# ---- the bench on the real kubelet ------------------------------------------------------------------


def test_bench_configurations_on_the_real_kubelet(real_kubelet: RealKubelet, short_tmp: Path) -> None:
    began = time.monotonic()
    bench = load_bench()
    kubelet = real_kubelet
    kubelet.delete_pods()
    a = bench.run_config(kubelet, "a", 2, short_tmp, idle_seconds=1)
    b = bench.run_config(kubelet, "b", 2, short_tmp, idle_seconds=1)
    # c: the agent's built-in CPU plugin off, the example CPU plugin out of process registered for 'cpu'
    c = bench.run_config(kubelet, "c", 2, short_tmp, idle_seconds=1)
    for result in (a, b, c):
        assert len(result.latencies_ms) == 2 and all(0 < ms < 120_000 for ms in result.latencies_ms), result
        assert result.cpu_ms["kubelet"] > 0 and result.cpu_ms["containerd"] > 0, result
        # every pod got an exclusive CPU: never the reserved CPU 0
        for cpuset in result.cpusets:
            cpus, mems = (CPUSet.parse(part.split("=")[1]) for part in cpuset.split())
            assert cpus.size() == 1 and 0 not in cpus and mems.size() == 1, result
    assert b.cpu_ms["agent"] > 0 and c.cpu_ms["agent"] > 0 and "agent" not in a.cpu_ms
    for result in (b, c):
        assert set(result.idle_ms_per_s) == {"kubelet", "containerd", "agent", "total"}
        assert all(rate >= 0 for rate in result.idle_ms_per_s.values())
        assert bench.mismatches(a, result) == []
        assert a.cpusets == result.cpusets
        rows = {metric: unit for metric, _, unit in result.metrics()}
        n = result.name
        assert rows[f"{n}_latency_p99"] == "ms" and rows[f"{n}_cpu_total"] == "ms" and rows[f"{n}_wall"] == "s"
        assert rows[f"{n}_idle_cpu_agent"] == "ms/s" and rows[f"{n}_cpu_per_pod_net"] == "ms"
    assert not kubelet.control_plane.request("GET", "/api/v1/namespaces/default/pods")["items"]
    print(f"\n{bench.table([a, b, c])}\ntest duration {time.monotonic() - began:.1f} s")
