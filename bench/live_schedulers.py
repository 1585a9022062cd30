"""Benchmark: the live schedulers end to end on the real v1.36.2 control plane.

Starts the private control plane of the test fixtures (etcd, kube-apiserver, kube-controller-manager;
``harness/numaplane_harness/kubecluster.py``), the NRT CRD and the RBAC ``numaplane render`` grants the
scheduler (``tests/realkube/realsched.py``), and ``--nodes`` kubelet-less Nodes (capacity and allocatable
16 CPUs, 64 GiB, 110 pods; Ready, untainted) each with a NodeResourceTopology of two zones
(``single-numa-node``, container scope) whose free CPUs vary from node to node: zone 0 has
``2 * (1 + i % 8)`` CPUs free, zone 1 ``2 * ((i // 8) % 2)``, so a node's zones hold 1 to 9 of the
bench's pods (2 CPUs, 1 GiB, Guaranteed) but its allocatable 8. The over-reserve cache charges an
assumed pod to every zone that could hold it (the kubelet's choice is unknown until the NRT says), so
numaplane counts on the larger zone only: 4.5 pods per node on average, 2,250 at 500 nodes.

Then, for each scheduler configuration, in a namespace of its own:

* ``kube`` — kube-scheduler v1.36.2 alone (default profile), its client ``qps``/``burst`` raised to 1000;
* ``standalone`` — ``numaplane scheduler run`` (over-reserve cache, defaults otherwise, ``info`` logs): the
  CLI's default ``percentageOfNodesToScore: 100`` filters and scores every node for every pod;
* ``standalone_sampled`` — the same with ``--config`` setting ``percentageOfNodesToScore: 0``,
  kube-scheduler's adaptive rule (at 500 nodes it stops once 230 feasible nodes are found, at 5,000 once
  500 are): the search width kube-scheduler alone uses, so the two do comparable work per pod;
* ``extender`` — kube-scheduler (the same qps/burst) with the rendered ``KubeSchedulerConfiguration``
  calling ``numaplane scheduler extender`` (``info`` logs);

it waits until a warm-up pod is bound (informers synced), then creates ``--pods`` pods as fast as the
API takes them (``--clients`` threads, keep-alive connections) and measures, from a watch:

* ``<c>_pods_per_second``: pods bound / (last binding seen - first POST sent);
* ``<c>_latency_p50|p90|p99`` (s): from a pod's POST answered to the first watch event showing it bound;
* ``<c>_cpu_per_pod_<process>`` (ms): utime + stime (with reaped children and live descendants) from
  ``/proc/<pid>/stat`` of each scheduling process (``kube_scheduler``, ``numaplane``) and of
  ``kube_apiserver``, from the first POST to the last binding, divided by the pods bound
  (``<c>_cpu_system_per_pod_<process>``: the kernel's part, stime);
* ``<c>_numa_overfit`` (pods): pods bound beyond what their node's zones hold (per node: bound minus the
  sum over zones of ``floor(free CPUs / 2)``) — the NUMA fit the kubelet would refuse;
* ``<c>_bound`` (pods) and ``<c>_wall`` (s);
* extender mode, ``<c>_extender_<verb>_ms`` and ``<c>_extender_<verb>_requests``: the extender's own
  handling time per request of each verb (body read to response ready, its
  ``extender_request_duration_seconds`` histogram) over the same span — what kube-scheduler waits for
  beyond it is queueing and the network.

``NUMAPLANE_BENCH_PYSPY=DIR`` (with ``py-spy`` on ``PATH`` or beside this interpreter; a profiling aid,
not a project dependency) records each numaplane process from the first POST to the last binding with
``py-spy record --nonblocking --format raw`` into ``DIR/<namespace>.txt`` (collapsed stacks of the
samples where a thread was running).

``NUMAPLANE_BENCH_PPROF=DIR`` starts each kube-scheduler with its secure port open (``--secure-port``, a
self-signed certificate, ``--authorization-always-allow-paths`` adding ``/debug/pprof/*``; profiling is
on by default) and fetches a CPU profile of ``NUMAPLANE_BENCH_PPROF_SECONDS`` (default 15) seconds from
the first POST into ``DIR/<namespace>.pprof``; read it with ``python bench/pprof_top.py``.

``--baseline OLD/src`` also runs ``<c>_old`` for every numaplane configuration ``<c>``: the same with the numaplane code
of another checkout (its ``src`` first on the processes' ``PYTHONPATH``), on the same control plane and
nodes in the same minutes — old versus new side by side.

Every pod is then deleted (grace period 0) before the next configuration starts. Ratios:
``<c>_vs_kube`` for every other configuration (mean pods/s over kube-scheduler's mean, same run).

Usage: ``flock /tmp/numaplane-real.lock python bench/live_schedulers.py [--quick] [--nodes N] [--pods P]
[--configs kube,standalone,standalone_sampled,extender] [--rounds R] [--baseline OLD/src]`` (default 500 nodes, 2,000 pods; quick: 100 nodes,
300 pods). Hold the shared lock: it starts the real control plane.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# The harness and the real-scheduler helpers are not installed: they live in harness/ and tests/realkube/.
sys.path.insert(0, str(REPO / "harness"))
sys.path.insert(0, str(REPO / "tests" / "realkube"))
from realsched import (  # noqa: E402
    NRT_PATH,
    NumaplaneProcess,
    install_nrt_crd,
    install_scheduler,
    kube_scheduler_config,
    nrt,
    standalone_args,
    zone,
)

from numaplane_harness.kubecluster import (  # noqa: E402
    ControlPlane,
    KubeUnavailable,
    control_plane_unavailable_reason,
    free_port,
    run_control_plane,
)
from numaplane_harness.nodeprobes import TICKS_PER_SECOND, percentile  # noqa: E402

POD_CPU = 2
NODE_CPU = 16
CONFIGS = ("kube", "standalone", "standalone_sampled", "extender")
STANDALONE = "numaplane-scheduler"
#: ``standalone_sampled``'s ``--config``: kube-scheduler's adaptive ``percentageOfNodesToScore`` (0), the
#: rest the CLI's defaults (the flat form of :mod:`numaplane.scheduler.config`)
SAMPLED_CONFIG = {"percentageOfNodesToScore": 0}
EXTENDER = "numaplane-extender"
CLIENT_QPS = 1000


def zone_free(i: int) -> tuple[int, int]:
    """Free CPUs of node ``i``'s two zones."""
    return 2 * (1 + i % 8), 2 * ((i // 8) % 2)


def node_name(i: int) -> str:
    return f"bench-{i:05d}"


class Api:
    """Keep-alive HTTPS connections to the API server as the cluster admin, one per thread."""

    def __init__(self, cp: ControlPlane) -> None:
        parsed = urllib.parse.urlsplit(cp.url)
        self.host, self.port = parsed.hostname or "127.0.0.1", parsed.port or 443
        self.ctx = ssl.create_default_context(cafile=str(cp.pki.ca_cert))
        self.ctx.load_cert_chain(str(cp.pki.admin_cert), str(cp.pki.admin_key))
        self.local = threading.local()

    def connection(self) -> http.client.HTTPSConnection:
        conn: http.client.HTTPSConnection | None = getattr(self.local, "conn", None)
        if conn is None:
            conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=60)
            self.local.conn = conn
        return conn

    def call(self, method: str, path: str, body: bytes | None = None, ctype: str = "application/json") -> Any:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = ctype
        for attempt in range(3):
            conn = self.connection()
            try:
                conn.request(method, path, body=body, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
            except (OSError, http.client.HTTPException):
                conn.close()
                self.local.conn = None
                if attempt == 2:
                    raise
                continue
            if resp.status == 429 and attempt < 2:
                time.sleep(0.1)
                continue
            if resp.status >= 300:
                raise RuntimeError(f"{method} {path}: HTTP {resp.status}: {raw[:300]!r}")
            return json.loads(raw) if raw else None
        raise AssertionError("unreachable")


def make_nodes(api: Api, count: int, clients: int) -> None:
    """``count`` Ready, untainted kubelet-less Nodes with their NRTs."""

    def one(i: int) -> None:
        name = node_name(i)
        alloc = {"cpu": str(NODE_CPU), "memory": "64Gi", "pods": "110"}
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}},
            "status": {
                "capacity": alloc,
                "allocatable": alloc,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "bench (no kubelet)",
                        "lastHeartbeatTime": now,
                        "lastTransitionTime": now,
                    }
                ],
                "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
                "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux", "kubeletVersion": "v1.36.2"},
            },
        }
        api.call("POST", "/api/v1/nodes", json.dumps(node).encode())
        # the TaintNodesByCondition admission plugin taints new Nodes not-ready (no node-lifecycle controller here)
        api.call(
            "PATCH", f"/api/v1/nodes/{name}", b'{"spec":{"taints":null}}', "application/merge-patch+json"
        )  # fmt: skip
        # the status sent with the POST is kept for a Node; patched again in case an admission dropped it
        api.call(
            "PATCH",
            f"/api/v1/nodes/{name}/status",
            json.dumps({"status": {"capacity": alloc, "allocatable": alloc}}).encode(),
            "application/merge-patch+json",
        )
        free = zone_free(i)
        zones = [zone(f"node-{z}", free[z], 16, allocatable_cpu=16, allocatable_gib=32) for z in range(2)]
        api.call("POST", NRT_PATH, json.dumps(nrt(name, zones)).encode())

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(one, range(count)))


def pod_body(name: str, scheduler: str) -> bytes:
    res = {"cpu": str(POD_CPU), "memory": "1Gi"}
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "schedulerName": scheduler,
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": res, "limits": res},
                    }
                ],
            },
        }
    ).encode()


class BoundWatch:
    """A watch on one namespace's pods in a thread: the monotonic time each pod is first seen bound."""

    def __init__(self, api: Api, namespace: str) -> None:
        self.api = api
        self.namespace = namespace
        self.bound: dict[str, tuple[float, str]] = {}
        self.cond = threading.Condition()
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def __enter__(self) -> BoundWatch:
        listed = self.api.call("GET", f"/api/v1/namespaces/{self.namespace}/pods")
        self.version = listed["metadata"]["resourceVersion"]
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)

    def loop(self) -> None:
        try:
            while not self.stop.is_set():
                conn = http.client.HTTPSConnection(self.api.host, self.api.port, context=self.api.ctx, timeout=30)
                path = (
                    f"/api/v1/namespaces/{self.namespace}/pods?watch=1&allowWatchBookmarks=true"
                    f"&timeoutSeconds=10&resourceVersion={self.version}"
                )
                conn.request("GET", path, headers={"Accept": "application/json"})
                resp = conn.getresponse()
                while not self.stop.is_set():
                    line = resp.readline()
                    if not line:
                        break
                    event = json.loads(line)
                    obj = event["object"]
                    if event["type"] == "ERROR":
                        raise RuntimeError(f"watch error: {obj}")
                    self.version = obj["metadata"].get("resourceVersion", self.version)
                    node = (obj.get("spec") or {}).get("nodeName")
                    if node and event["type"] != "BOOKMARK":
                        now = time.monotonic()
                        with self.cond:
                            self.bound.setdefault(obj["metadata"]["name"], (now, node))
                            self.cond.notify_all()
                conn.close()
        except Exception as exc:  # handed to the waiting thread
            self.error = exc
            with self.cond:
                self.cond.notify_all()

    def wait(self, names: set[str], timeout: float) -> bool:
        """Until every pod of ``names`` is bound (True) or ``timeout`` s pass (False)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while not names <= self.bound.keys():
                if self.error is not None:
                    raise RuntimeError(f"pod watch failed: {self.error}")
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(min(left, 1.0))
        return True


def tree_ticks(root: int) -> tuple[int, int]:
    """(utime + cutime, stime + cstime) of ``root`` and its live descendants (clock ticks)."""
    table: dict[int, tuple[int, int, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            line = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = line[line.rindex(")") + 2 :].split()
        table[int(entry)] = (int(fields[1]), int(fields[11]) + int(fields[13]), int(fields[12]) + int(fields[14]))
    wanted = {root}
    changed = True
    while changed:  # descendants: parents before children is not guaranteed by pid order
        changed = False
        for pid, (ppid, _, _) in table.items():
            if ppid in wanted and pid not in wanted:
                wanted.add(pid)
                changed = True
    user = sum(table[pid][1] for pid in wanted if pid in table)
    system = sum(table[pid][2] for pid in wanted if pid in table)
    return user, system


def namespace(api: Api, name: str) -> None:
    api.call("POST", "/api/v1/namespaces", json.dumps({"metadata": {"name": name}}).encode())
    deadline = time.monotonic() + 60
    while True:  # pods are refused until the controller-manager made the namespace's default ServiceAccount
        try:
            api.call("GET", f"/api/v1/namespaces/{name}/serviceaccounts/default")
            return
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def delete_pods(api: Api, ns: str) -> None:
    api.call("DELETE", f"/api/v1/namespaces/{ns}/pods?gracePeriodSeconds=0")
    deadline = time.monotonic() + 120
    while api.call("GET", f"/api/v1/namespaces/{ns}/pods?limit=1")["items"]:
        if time.monotonic() > deadline:
            raise TimeoutError(f"pods of {ns} not gone in 120 s")
        time.sleep(0.3)


def overfit(bound: dict[str, tuple[float, str]]) -> int:
    """Pods bound beyond what their node's zones hold (module docstring)."""
    per_node: dict[str, int] = {}
    for _, node in bound.values():
        per_node[node] = per_node.get(node, 0) + 1
    excess = 0
    for node, count in per_node.items():
        i = int(node.rsplit("-", 1)[1])
        excess += max(0, count - sum(f // POD_CPU for f in zone_free(i)))
    return excess


VERB_METRIC = "numaplane_scheduler_extender_request_duration_seconds"


def verb_seconds(port: int | None) -> dict[str, tuple[float, float]]:
    """The extender's ``(sum of seconds, count)`` per verb from its ``/metrics`` (none without a port)."""
    if port is None:
        return {}
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, list[float]] = {}
    for line in text.splitlines():
        for part, slot in (("_sum{", 0), ("_count{", 1)):
            if line.startswith(VERB_METRIC + part):
                verb = line.split('verb="', 1)[1].split('"', 1)[0]
                out.setdefault(verb, [0.0, 0.0])[slot] = float(line.rsplit(" ", 1)[1])
    return {verb: (v[0], v[1]) for verb, v in out.items()}


def profilers(ns: str, processes: dict[str, int]) -> list[subprocess.Popen[bytes]]:
    """``py-spy record`` of the numaplane process when ``NUMAPLANE_BENCH_PYSPY`` names a folder (module
    docstring); none otherwise."""
    folder = os.environ.get("NUMAPLANE_BENCH_PYSPY")
    if not folder or "numaplane" not in processes:
        return []
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    out = Path(folder) / f"{ns}.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    args = [spy, "record", "--nonblocking", "--format", "raw", "--rate", "200", "-o", str(out)]
    proc = subprocess.Popen(
        [*args, "--pid", str(processes["numaplane"])], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    time.sleep(1.0)  # py-spy attaches
    return [proc]


def pprof_port() -> int | None:
    """The secure port to open on kube-scheduler for ``NUMAPLANE_BENCH_PPROF`` (``None`` when unset)."""
    return free_port() if os.environ.get("NUMAPLANE_BENCH_PPROF") else None


def kube_scheduler_flags(port: int | None) -> list[str]:
    if port is None:
        return []
    allowed = "/healthz,/readyz,/livez,/metrics,/debug/pprof/*"
    return [f"--secure-port={port}", "--bind-address=127.0.0.1", f"--authorization-always-allow-paths={allowed}"]


def pprof_fetch(ns: str, port: int | None) -> threading.Thread | None:
    """Fetch kube-scheduler's CPU profile in a thread (module docstring); ``None`` without a port."""
    folder = os.environ.get("NUMAPLANE_BENCH_PPROF")
    if port is None or not folder:
        return None
    seconds = int(os.environ.get("NUMAPLANE_BENCH_PPROF_SECONDS", "15"))
    out = Path(folder) / f"{ns}.pprof"
    out.parent.mkdir(parents=True, exist_ok=True)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # kube-scheduler's self-signed serving certificate, on loopback

    def fetch() -> None:
        url = f"https://127.0.0.1:{port}/debug/pprof/profile?seconds={seconds}"
        try:
            with urllib.request.urlopen(url, timeout=seconds + 30, context=ctx) as resp:
                out.write_bytes(resp.read())
        except OSError as exc:
            print(f"# pprof of {ns} failed: {exc}", file=sys.stderr)

    thread = threading.Thread(target=fetch, daemon=True)
    thread.start()
    return thread


def measure(
    api: Api,
    config: str,
    ns: str,
    scheduler: str,
    pods: int,
    clients: int,
    processes: dict[str, int],
    metrics_port: int | None = None,
    pprof: int | None = None,
) -> dict[str, float]:
    """Warm up, create ``pods`` pods as fast as the API takes them, wait for their bindings: the figures."""
    with BoundWatch(api, ns) as watch:
        api.call("POST", f"/api/v1/namespaces/{ns}/pods", pod_body("warmup", scheduler))
        if not watch.wait({"warmup"}, 120):
            raise TimeoutError(f"{config}: the warm-up pod was not bound in 120 s")
        api.call("DELETE", f"/api/v1/namespaces/{ns}/pods/warmup?gracePeriodSeconds=0")
        time.sleep(1.0)
        names = [f"p{k:05d}" for k in range(pods)]
        bodies = {n: pod_body(n, scheduler) for n in names}
        created: dict[str, float] = {}
        spies = profilers(ns, processes)
        verbs0 = verb_seconds(metrics_port)
        ticks0 = {p: tree_ticks(pid) for p, pid in processes.items()}
        start = time.monotonic()
        profiling = pprof_fetch(ns, pprof)

        def post(name: str) -> None:
            api.call("POST", f"/api/v1/namespaces/{ns}/pods", bodies[name])
            created[name] = time.monotonic()

        with ThreadPoolExecutor(clients) as pool:
            list(pool.map(post, names))
        posted = time.monotonic()
        complete = watch.wait(set(names), max(60.0, pods / 10))
        ticks1 = {p: tree_ticks(pid) for p, pid in processes.items()}
        verbs1 = verb_seconds(metrics_port)
        for spy in spies:
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
        if profiling is not None:
            profiling.join()
        with watch.cond:
            bound = {n: watch.bound[n] for n in names if n in watch.bound}
    last = max((t for t, _ in bound.values()), default=time.monotonic())
    latencies = [bound[n][0] - created[n] for n in bound]
    n = max(1, len(bound))
    out: dict[str, float] = {
        "bound": float(len(bound)),
        "wall": last - start,
        "create_seconds": posted - start,
        "pods_per_second": len(bound) / (last - start),
        "latency_p50": percentile(latencies, 50),
        "latency_p90": percentile(latencies, 90),
        "latency_p99": percentile(latencies, 99),
        "numa_overfit": float(overfit(bound)),
    }
    for proc in processes:
        user, system = (b - a for a, b in zip(ticks0[proc], ticks1[proc], strict=True))
        out[f"cpu_per_pod_{proc}"] = (user + system) * 1000 / TICKS_PER_SECOND / n
        out[f"cpu_system_per_pod_{proc}"] = system * 1000 / TICKS_PER_SECOND / n
    for verb, (total, count) in verbs1.items():
        before = verbs0.get(verb, (0.0, 0.0))
        if count > before[1]:
            out[f"extender_{verb}_ms"] = (total - before[0]) * 1000 / (count - before[1])
            out[f"extender_{verb}_requests"] = count - before[1]
    if not complete:
        print(f"# {config}: only {len(bound)} of {pods} pods bound", file=sys.stderr)
    return out


@contextmanager
def numaplane_process(
    args: list[str], log: Path, health_port: int, source: str | None = None
) -> Iterator[NumaplaneProcess]:
    """``numaplane <args>`` as a subprocess, from ``source`` (a ``src`` folder put first on its
    ``PYTHONPATH``: another checkout's code, e.g. main's, with this interpreter) or this checkout."""
    saved = os.environ.get("PYTHONPATH")
    if source is not None:
        os.environ["PYTHONPATH"] = source + (os.pathsep + saved if saved else "")
    try:
        proc = NumaplaneProcess(args, log)
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    try:
        proc.wait_ready(health_port, timeout=180)
        yield proc
    finally:
        proc.stop()


def run_config(cp: ControlPlane, api: Api, work: Path, label: str, tag: str, opts: argparse.Namespace) -> None:
    """One configuration (``label``: a name of :data:`CONFIGS`, ``_old`` appended for ``--baseline``'s code)."""
    old = label.endswith("_old")
    config = label.removesuffix("_old")
    source = opts.baseline if old else None
    ns = f"bench-{label.replace('_', '-')}-{tag}"
    namespace(api, ns)
    apiserver = cp.processes["kube-apiserver"].pid
    metrics_port: int | None = None
    pprof = pprof_port() if not config.startswith("standalone") else None  # no kube-scheduler to profile
    with ExitStack() as stack:
        if config == "kube":
            sched = stack.enter_context(
                cp.scheduler(qps=CLIENT_QPS, burst=CLIENT_QPS, extra_args=kube_scheduler_flags(pprof))
            )
            procs = {"kube_scheduler": sched.pid, "kube_apiserver": apiserver}
            name = "default-scheduler"
        elif config.startswith("standalone"):
            _, kubeconfig = install_scheduler(cp, work, mode="standalone", scheduler_name=STANDALONE)
            port = free_port()
            # the CLI's defaults (over-reserve cache, JSON logs at info), as the operator runs it
            args = [a for a in standalone_args(kubeconfig, STANDALONE, port, overreserve=False) if "console" not in a]
            if config == "standalone_sampled":
                settings = work / "sampled.json"
                settings.write_text(json.dumps(SAMPLED_CONFIG))
                args.append(f"--config={settings}")
            proc = stack.enter_context(numaplane_process(args, work / f"{label}-{tag}.log", port, source))
            procs = {"numaplane": proc.process.pid, "kube_apiserver": apiserver}
            name = STANDALONE
        else:
            docs, kubeconfig = install_scheduler(cp, work, mode="extender", scheduler_name=EXTENDER)
            port = free_port()
            args = [
                "scheduler", "extender", "--kubeconfig", str(kubeconfig), f"--address=127.0.0.1:{port}",
                f"--scheduler-name={EXTENDER}",
            ]  # fmt: skip
            proc = stack.enter_context(numaplane_process(args, work / f"{label}-{tag}.log", port, source))
            ks = kube_scheduler_config(docs, port)
            sched = stack.enter_context(
                cp.scheduler(
                    ks["profiles"],
                    ks["extenders"],
                    kubeconfig_file=kubeconfig,
                    leader_election=ks["leaderElection"],
                    qps=CLIENT_QPS,
                    burst=CLIENT_QPS,
                    extra_args=kube_scheduler_flags(pprof),
                )
            )
            procs = {"kube_scheduler": sched.pid, "numaplane": proc.process.pid, "kube_apiserver": apiserver}
            name = EXTENDER
            metrics_port = port
        try:
            figures = measure(api, label, ns, name, opts.pods, opts.clients, procs, metrics_port, pprof)
        finally:
            delete_pods(api, ns)
    units = {"pods_per_second": "pods/s", "bound": "pods", "numa_overfit": "pods"}
    for key, value in figures.items():
        unit = units.get(key, "ms" if key.startswith("cpu_") or key.endswith("_ms") else "s")
        unit = "requests" if key.endswith("_requests") else unit
        print(f"{label}_{key}: {value:.3f} {unit}", flush=True)
    RESULTS.setdefault(label, []).append(figures)


RESULTS: dict[str, list[dict[str, float]]] = {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 nodes, 300 pods")
    parser.add_argument("--nodes", type=int, default=None)
    parser.add_argument("--pods", type=int, default=None)
    parser.add_argument("--clients", type=int, default=4, help="threads creating pods")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument(
        "--baseline",
        metavar="SRC",
        help="also run the numaplane configurations with the code of this src folder (e.g. a worktree of main)",
    )
    opts = parser.parse_args()
    opts.nodes = opts.nodes or (100 if opts.quick else 500)
    opts.pods = opts.pods or (300 if opts.quick else 2000)
    configs = [c for c in opts.configs.split(",") if c]
    unknown = sorted(set(configs) - set(CONFIGS))
    if unknown or opts.nodes < 1 or opts.pods < 1 or opts.rounds < 1:
        print(f"live_schedulers: bad arguments (configs {unknown or configs}, nodes, pods, rounds >= 1)")
        return 2
    reason = control_plane_unavailable_reason()
    if reason:
        print(f"live_schedulers: the control plane cannot run here: {reason}")
        return 2
    # SIGTERM (timeout, kill) unwinds like Ctrl-C: every process this run started is stopped on the way out
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        with run_control_plane() as cp, tempfile.TemporaryDirectory(prefix="live-sched-") as tmp:
            api = Api(cp)
            started = time.monotonic()
            install_nrt_crd(cp)
            make_nodes(api, opts.nodes, 8)
            print(f"nodes: {opts.nodes} nodes")
            print(f"pods: {opts.pods} pods")
            print(f"setup_seconds: {time.monotonic() - started:.1f} s", flush=True)
            labels = [*configs]
            if opts.baseline:
                labels += [f"{c}_old" for c in configs if c != "kube"]
            for r in range(opts.rounds):
                for label in labels:
                    run_config(cp, api, Path(tmp), label, f"r{r}", opts)
    except KubeUnavailable as exc:
        print(f"live_schedulers: the control plane did not start: {str(exc).splitlines()[0]}")
        return 2
    if "kube" in RESULTS:
        base = sum(f["pods_per_second"] for f in RESULTS["kube"]) / len(RESULTS["kube"])
        for other, runs in RESULTS.items():
            if other != "kube" and base > 0:
                mean = sum(f["pods_per_second"] for f in runs) / len(runs)
                print(f"{other}_vs_kube: {mean / base:.2f} x")
    return 0 if all(not math.isnan(f["latency_p50"]) for fs in RESULTS.values() for f in fs) else 1


if __name__ == "__main__":
    sys.exit(main())
