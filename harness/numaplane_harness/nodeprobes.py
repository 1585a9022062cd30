"""Measuring a real node: processes' CPU time from ``/proc``, pods' Running moments from a watch.

Used by ``bench/real_node.py`` (the cost of the agent versus the kubelet's managers):

* :func:`parse_proc_stat` — ``(start_ticks, cpu_ticks)`` of one ``/proc/<pid>/stat`` line, where
  ``cpu_ticks`` is utime + stime + cutime + cstime (clock ticks; ``cutime``/``cstime`` hold the
  children the process reaped, e.g. the ``runc`` runs of a containerd shim).
* :class:`ProcSampler` — a thread sampling named groups of processes every ``interval`` seconds: each
  group is root pids and, for a group named ``containerd``, every process whose command line names the
  containerd's work folder (its shims, which re-parent themselves away). Descendants are not followed:
  what a process reaped is in its ``cutime``/``cstime`` already (following them would count it twice),
  and a shim's live children are the containers (workload, not node overhead). A process is known by
  ``(pid, start ticks)``; one that exits keeps its last sample, so a shim counts up to at most
  ``interval`` before its end. Processes that ran before the sampler started
  count from their first sample: :meth:`ProcSampler.consumed_ms` is CPU time spent *during* the run.
* :class:`PodWatch` — a watch on one namespace's pods of one node, in a thread, recording the
  monotonic time of the first event showing every container of a pod running, and of its deletion.
* :func:`percentile` — nearest rank (p99 of 100 values is the 99th smallest); :func:`machine_ticks` —
  busy and total ticks of all CPUs from ``/proc/stat``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import ssl
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from numaplane_harness.kubecluster import ControlPlane

__all__ = ["TICKS_PER_SECOND", "PodWatch", "ProcSampler", "machine_ticks", "parse_proc_stat", "percentile"]

PROC = Path("/proc")
#: clock ticks per second of ``/proc`` CPU times
TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile ``q`` (0 < q <= 100) of ``values``; NaN for none."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def parse_proc_stat(line: str) -> tuple[int, int, int]:
    """``(ppid, start_ticks, cpu_ticks)`` of a ``/proc/<pid>/stat`` line (the name may hold spaces and ')')."""
    fields = line[line.rindex(")") + 2 :].split()
    # fields[0] is field 3 (state) of proc(5): ppid 4, utime 14, stime 15, cutime 16, cstime 17, starttime 22
    ppid = int(fields[1])
    cpu = sum(int(fields[i]) for i in (11, 12, 13, 14))
    return ppid, int(fields[19]), cpu


def machine_ticks(stat: str | None = None) -> tuple[int, int]:
    """``(busy, total)`` ticks of all CPUs (``/proc/stat``'s ``cpu`` line; idle and iowait are not busy)."""
    text = stat if stat is not None else (PROC / "stat").read_text()
    first = text.splitlines()[0].split()
    assert first[0] == "cpu", first
    ticks = [int(v) for v in first[1:]]
    total = sum(ticks[:8])  # guest time is already in user/nice
    return total - ticks[3] - ticks[4], total


class ProcSampler:
    """CPU time of groups of processes during a ``with`` block (see the module docstring)."""

    def __init__(
        self, groups: Mapping[str, Sequence[int]], *, containerd_folder: str = "", interval: float = 0.2
    ) -> None:
        self.groups = {name: tuple(pids) for name, pids in groups.items()}
        self.containerd_folder = containerd_folder
        self.interval = interval
        #: (pid, start ticks) -> [group, first cpu ticks, last cpu ticks]
        self.seen: dict[tuple[int, int], list[Any]] = {}
        self._cmdlines: dict[tuple[int, int], str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="proc-sampler", daemon=True)
        self._first = True

    def __enter__(self) -> ProcSampler:
        self.sample()  # processes running now count from here
        self._first = False
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sample()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def _cmdline(self, key: tuple[int, int]) -> str:
        if key not in self._cmdlines:
            try:
                self._cmdlines[key] = (PROC / str(key[0]) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                self._cmdlines[key] = ""
        return self._cmdlines[key]

    def sample(self) -> None:
        """One pass over ``/proc``: record every process of a group."""
        table: dict[int, tuple[int, int, int]] = {}
        for entry in PROC.iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError):
                table[int(entry.name)] = parse_proc_stat((entry / "stat").read_text())
        owner: dict[int, str] = {}
        for name, roots in self.groups.items():
            for pid in roots:
                owner[pid] = name
        if self.containerd_folder and "containerd" in self.groups:
            for pid, (_, start, _) in table.items():
                if pid not in owner and self.containerd_folder in self._cmdline((pid, start)):
                    owner[pid] = "containerd"
        for pid, name in owner.items():
            if pid not in table:
                continue
            _, start, cpu = table[pid]
            record = self.seen.get((pid, start))
            if record is None:
                self.seen[(pid, start)] = [name, cpu if self._first else 0, cpu]
            else:
                record[2] = cpu

    def consumed_ms(self) -> dict[str, float]:
        """Milliseconds of CPU per group during the block, and ``total``."""
        out = dict.fromkeys(self.groups, 0.0)
        for name, first, last in self.seen.values():
            out[name] += (last - first) * 1000 / TICKS_PER_SECOND
        out["total"] = sum(out.values())
        return out


def _running(pod: Mapping[str, Any]) -> bool:
    statuses = pod.get("status", {}).get("containerStatuses") or []
    return bool(statuses) and all("running" in cs.get("state", {}) for cs in statuses)


class PodWatch:
    """Watch the pods of ``namespace`` bound to ``node`` as the cluster admin, in a thread."""

    def __init__(self, cp: ControlPlane, namespace: str, node: str) -> None:
        self.cp = cp
        self.path = f"/api/v1/namespaces/{namespace}/pods"
        self.selector = urllib.parse.quote(f"spec.nodeName={node}")
        self.running: dict[str, tuple[float, dict[str, Any]]] = {}
        self.failed: dict[str, dict[str, Any]] = {}
        self.deleted: dict[str, float] = {}
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="pod-watch", daemon=True)
        self._started = threading.Event()
        self.error: BaseException | None = None

    def __enter__(self) -> PodWatch:
        self._thread.start()
        if not self._started.wait(30):
            raise TimeoutError("the pod watch did not start in 30 s")
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(10)

    def _context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.cp.pki.ca_cert))
        ctx.load_cert_chain(str(self.cp.pki.admin_cert), str(self.cp.pki.admin_key))
        return ctx

    def _loop(self) -> None:
        version = self.cp.request("GET", f"{self.path}?fieldSelector={self.selector}")["metadata"]["resourceVersion"]
        ctx = self._context()
        try:
            while not self._stop.is_set():
                url = (
                    f"{self.cp.url}{self.path}?watch=1&allowWatchBookmarks=true&timeoutSeconds=5"
                    f"&fieldSelector={self.selector}&resourceVersion={version}"
                )
                with urllib.request.urlopen(url, context=ctx, timeout=30) as stream:
                    self._started.set()
                    for line in stream:
                        event = json.loads(line)
                        version = event["object"]["metadata"].get("resourceVersion", version)
                        self._record(event["type"], event["object"])
        except Exception as exc:  # handed to the waiting thread
            self.error = exc
            self._started.set()
            with self._cond:
                self._cond.notify_all()

    def _record(self, kind: str, pod: dict[str, Any]) -> None:
        if kind == "ERROR":
            raise RuntimeError(f"pod watch error: {pod}")
        if kind == "BOOKMARK":
            return
        now = time.monotonic()
        name = pod["metadata"]["name"]
        with self._cond:
            if kind == "DELETED":
                self.deleted.setdefault(name, now)
            elif pod.get("status", {}).get("phase") in ("Failed", "Succeeded"):
                self.failed.setdefault(name, pod)
            elif _running(pod) and name not in self.running:
                self.running[name] = (now, pod)
            self._cond.notify_all()

    def _wait(self, what: str, ready: Any, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                if self.error is not None:
                    raise RuntimeError(f"pod watch failed: {self.error}")
                got = ready()
                if got is not None:
                    return got
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{what} not seen in {timeout} s")
                self._cond.wait(min(left, 1.0))

    def wait_running(self, name: str, timeout: float = 120) -> tuple[float, dict[str, Any]]:
        """``(monotonic time, pod)`` of the first event with every container of ``name`` running."""

        def ready() -> tuple[float, dict[str, Any]] | None:
            if name in self.failed:
                raise RuntimeError(
                    f"pod {name} {self.failed[name]['status'].get('phase')}: {self.failed[name]['status']}"
                )
            return self.running.get(name)

        result: tuple[float, dict[str, Any]] = self._wait(f"pod {name} running", ready, timeout)
        return result

    def wait_deleted(self, name: str, timeout: float = 120) -> float:
        """Monotonic time of the ``DELETED`` event of ``name``."""
        result: float = self._wait(f"pod {name} deleted", lambda: self.deleted.get(name), timeout)
        return result
