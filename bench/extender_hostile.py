"""Benchmark: the extender's memory and latency under hostile request bodies below the size limit (issue 25 item 1).

Setup: the real ``numaplane scheduler extender`` command as a subprocess (as deployed; its RSS is its own),
served by a fake API server in this process with ``--nodes`` Nodes and their NRTs (default 100). A
"normal" request is a kube-scheduler-shaped ``filter`` with ``NodeNames`` for every node.

1. idle: after 100 normal requests, the extender's RSS (``VmRSS``) is ``idle_rss``; then the p50/p99 of
   normal requests sent one after another (``baseline_p99``).
2. for each hostile body (all below ``MAX_EXTENDER_BODY_BYTES`` on the wire and
   ``MAX_EXTENDER_DECODED_BYTES`` once inflated): the peak-RSS counter is reset (``/proc/PID/clear_refs``
   ``5``), the body is posted from a worker thread while this loop keeps sending normal requests, one
   after another, until the hostile one is answered (at least ``--min-normal`` of them). Then:
   ``<body>_peak_rss`` (``VmHWM``), ``<body>_target`` = 2 × idle RSS + the body size (the decoded size
   for a gzip body: the extender must hold it inflated), ``<body>_status`` (HTTP code),
   ``<body>_seconds`` (until the hostile answer), ``<body>_normal_p99`` of the concurrent normal
   requests and ``<body>_within_target`` (1 when the peak is at most the target).
3. the same for the process tree (``tree_*``): the extender decodes bodies over 1 MiB in worker processes
   (:mod:`numaplane.scheduler.decodepool`), whose memory is the extender's too. ``tree_idle_rss`` is the sum
   of every process's ``VmRSS`` at idle (workers started), ``<body>_tree_peak_rss`` the sum of their
   ``VmHWM`` (each reset before the body): an upper bound of the tree's peak, pages shared counted once
   per process; ``<body>_tree_target`` = 2 × ``tree_idle_rss`` + the body size.

To compare with another tree (e.g. main) in the same minutes, run this file with ``PYTHONPATH=<that
tree>/src``: the extender subprocess inherits it.

Hostile bodies (the shapes of issue 25 item 1):

* ``gzip_pod_objects`` — 48 KB of gzip inflating to ``{"Pod": {..., "x": [{}, {}, ... 16 M]}}``;
* ``top_level_list`` — a 47 MiB top-level JSON list of empty objects;
* ``gzip_top_level_list`` — the same, gzip-compressed;
* ``nodes_items`` — ``{"Pod": ..., "Nodes": {"items": [{}, ... 16 M]}}``, 47 MiB;
* ``node_names`` — ``{"Pod": ..., "NodeNames": ["a", "a", ... 9 M]}``, 47 MiB;
* ``many_members`` — a top-level object with 4 M members;
* ``deep_nesting`` — 47 MiB of ``[``;
* ``pod_containers`` — a 3 MiB Pod (under the Pod limit) made of 1 M empty objects;
* ``many_nodes`` — 15,000 full Node objects (the node limit), padded to ~47 MiB: a large but legal body.

Prints ``metric: value unit`` lines. ``--quick`` uses fewer normal requests and four bodies.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import aiohttp
from scheduler_extender import node_doc, nrt_doc, pod_doc

from numaplane.kube.resources import CRD, NODE, NODE_RESOURCE_TOPOLOGY
from numaplane.limits import MAX_EXTENDER_BODY_BYTES, MAX_EXTENDER_DECODED_BYTES
from numaplane.nrt.crd import crd_manifest
from numaplane.testing.fakeapi import FakeApiServer

MIB = 1 << 20
#: Below both limits, with room for the framing of each body.
SIZE = min(MAX_EXTENDER_BODY_BYTES, MAX_EXTENDER_DECODED_BYTES) - MIB
CLI = [sys.executable, "-c", "from numaplane.cli import main; main()"]


def _repeat(prefix: bytes, unit: bytes, suffix: bytes, size: int) -> bytes:
    """``prefix + unit*n + suffix`` of at most ``size`` bytes (``unit`` ends with its separator)."""
    count = (size - len(prefix) - len(suffix)) // len(unit)
    body = prefix + unit * count
    return body[:-1] + suffix if unit.endswith(b",") else body + suffix


def hostile_bodies(quick: bool, count: int) -> dict[str, tuple[bytes, dict[str, str], int]]:
    """name → (wire body, headers, size the target counts)."""
    pod = json.dumps(pod_doc()).encode()
    pod_open = pod[:-1] + b', "x": ['
    plain: dict[str, bytes] = {
        "top_level_list": _repeat(b"[", b"{},", b"]", SIZE),
        "nodes_items": _repeat(b'{"Pod": ' + pod + b', "Nodes": {"items": [', b"{},", b"]}}", SIZE),
        "node_names": _repeat(b'{"Pod": ' + pod + b', "NodeNames": [', b'"a",', b"]}", SIZE),
        "many_members": _repeat(b"{", b'"":0,', b"}", SIZE),
        "deep_nesting": b"[" * SIZE,
        "pod_containers": _repeat(b'{"NodeNames": ["worker-0000"], "Pod": ' + pod_open, b"{},", b"]}}", 3 * MIB - 64),
    }
    # 15,000 Node objects of the cluster (names repeat), padded by an annotation to fill the limit
    nodes = [node_doc(i % count) for i in range(15_000)]
    unpadded = len(json.dumps({"Pod": pod_doc(), "Nodes": {"items": nodes}, "NodeNames": None}))
    pad = max(0, (SIZE - unpadded) // len(nodes) - 16)
    for node in nodes:
        node["metadata"]["annotations"]["bench/padding"] = "p" * pad
    plain["many_nodes"] = json.dumps({"Pod": pod_doc(), "Nodes": {"items": nodes}, "NodeNames": None}).encode()
    gz = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    js = {"Content-Type": "application/json"}
    out: dict[str, tuple[bytes, dict[str, str], int]] = {}
    inflated = _repeat(b'{"NodeNames": ["worker-0000"], "Pod": ' + pod_open, b"{},", b"]}}", SIZE)
    out["gzip_pod_objects"] = (gzip.compress(inflated, 9), gz, len(inflated))
    out["top_level_list"] = (plain["top_level_list"], js, len(plain["top_level_list"]))
    out["gzip_top_level_list"] = (gzip.compress(plain["top_level_list"], 9), gz, len(plain["top_level_list"]))
    for name in ("nodes_items", "node_names", "many_members", "deep_nesting", "pod_containers", "many_nodes"):
        out[name] = (plain[name], js, len(plain[name]))
    if quick:
        out = {k: out[k] for k in ("gzip_pod_objects", "top_level_list", "nodes_items", "many_nodes")}
    for name, (body, _, _) in out.items():
        assert len(body) <= MAX_EXTENDER_BODY_BYTES, name
    return out


def _status(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) * 1024
    return out


def _reset_peak(pid: int) -> None:
    for one in _tree(pid):
        Path(f"/proc/{one}/clear_refs").write_text("5")


def _tree(pid: int) -> list[int]:
    """``pid`` and its children (the decode workers, multiprocessing's resource tracker), any thread's."""
    children = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        children.update(int(c) for c in (task / "children").read_text().split())
    return [pid, *sorted(children)]


def _tree_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM summed over the process tree. The sum of the peaks is an upper bound of the tree's
    peak (the processes need not peak at the same moment), and counts pages they share once per process."""
    out = {"VmRSS": 0, "VmHWM": 0}
    for one in _tree(pid):
        with contextlib.suppress(FileNotFoundError):
            for key, value in _status(one).items():
                out[key] += value
    return out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _post_blocking(port: int, body: bytes, headers: dict[str, str], out: dict[str, Any]) -> None:
    """POST ``body`` to /filter from a worker thread (the loop's requests are not delayed by sending it)."""
    began = time.perf_counter()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        conn.request("POST", "/filter", body=body, headers=headers)
        response = conn.getresponse()
        out["text"] = response.read()[:200].decode(errors="replace")
        out["status"] = response.status
        conn.close()
    except OSError as exc:  # a connection closed by the server after an early refusal
        out["status"] = 0
        out["text"] = str(exc)
    out["seconds"] = time.perf_counter() - began


async def run(quick: bool, count: int, min_normal: int) -> None:
    async with FakeApiServer() as api:
        kube = api.port_client()
        await kube.create(CRD, crd_manifest())
        for i in range(count):
            await kube.create(NODE, node_doc(i))
            await kube.create(NODE_RESOURCE_TOPOLOGY, nrt_doc(i))
        port = _free_port()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        command = [
            *CLI, "scheduler", "extender", "--api-server", api.url, f"--address=127.0.0.1:{port}",
            "--scheduler-name=default-scheduler", "--log-format=json", "--log-level=error",
        ]  # fmt: skip
        process = subprocess.Popen(
            command,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            await _measure(process, port, count, quick, min_normal)
        finally:
            process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(10)
            await kube.close()


async def _measure(process: subprocess.Popen[bytes], port: int, count: int, quick: bool, min_normal: int) -> None:
    base = f"http://127.0.0.1:{port}"
    names = [f"worker-{i:04d}" for i in range(count)]
    normal = json.dumps({"Pod": pod_doc(), "Nodes": None, "NodeNames": names}).encode()
    bodies = hostile_bodies(quick, count)
    async with aiohttp.ClientSession() as http_:
        for _ in range(300):
            with contextlib.suppress(aiohttp.ClientError):
                async with http_.get(f"{base}/readyz") as r:
                    if r.status == 200:
                        break
            await asyncio.sleep(0.1)
        else:
            raise SystemExit("the extender did not become ready")

        async def one() -> float:
            began = time.perf_counter()
            async with http_.post(f"{base}/filter", data=normal, headers={"Content-Type": "application/json"}) as r:
                await r.read()
                assert r.status == 200, r.status
            return (time.perf_counter() - began) * 1000

        for _ in range(100):
            await one()
        await asyncio.sleep(0.5)
        idle = _status(process.pid)["VmRSS"]
        tree_idle = _tree_status(process.pid)["VmRSS"]
        baseline = [await one() for _ in range(min_normal * 2)]
        print(f"nodes: {count} count")
        print(f"processes: {len(_tree(process.pid))} count")
        print(f"idle_rss: {idle / MIB:.1f} MiB")
        print(f"tree_idle_rss: {tree_idle / MIB:.1f} MiB")
        print(f"baseline_normal_p50: {statistics.median(baseline):.2f} ms")
        print(f"baseline_normal_p99: {pct(baseline, 0.99):.2f} ms")
        worst = worst_tree = 0.0
        worst_p99 = 0.0
        for name, (body, headers, size) in bodies.items():
            await asyncio.sleep(0.3)
            _reset_peak(process.pid)
            before = _status(process.pid)["VmRSS"]
            result: dict[str, Any] = {}
            sender = threading.Thread(target=_post_blocking, args=(port, body, headers, result), daemon=True)
            sender.start()
            samples: list[float] = []
            while sender.is_alive() or len(samples) < min_normal:
                samples.append(await one())
            sender.join()
            peak = _status(process.pid)["VmHWM"]
            tree_peak = _tree_status(process.pid)["VmHWM"]
            target = 2 * idle + size
            tree_target = 2 * tree_idle + size
            worst = max(worst, peak / target)
            worst_tree = max(worst_tree, tree_peak / tree_target)
            worst_p99 = max(worst_p99, pct(samples, 0.99))
            print(f"{name}_wire_bytes: {len(body)} bytes")
            print(f"{name}_counted_bytes: {size} bytes")
            print(f"{name}_status: {result['status']} code")
            print(f"{name}_seconds: {result['seconds']:.3f} s")
            print(f"{name}_rss_before: {before / MIB:.1f} MiB")
            print(f"{name}_peak_rss: {peak / MIB:.1f} MiB")
            print(f"{name}_target: {target / MIB:.1f} MiB")
            print(f"{name}_within_target: {int(peak <= target)} bool")
            print(f"{name}_tree_peak_rss: {tree_peak / MIB:.1f} MiB")
            print(f"{name}_tree_target: {tree_target / MIB:.1f} MiB")
            print(f"{name}_tree_within_target: {int(tree_peak <= tree_target)} bool")
            print(f"{name}_normal_requests: {len(samples)} count")
            print(f"{name}_normal_p50: {statistics.median(samples):.2f} ms")
            print(f"{name}_normal_p99: {pct(samples, 0.99):.2f} ms")
            print(f"{name}_normal_max: {max(samples):.2f} ms")
            print(f"{name}_reply: {json.dumps(result['text'][:120])} text")
        print(f"worst_peak_over_target: {worst:.2f} ratio")
        print(f"worst_tree_peak_over_target: {worst_tree:.2f} ratio")
        print(f"worst_normal_p99: {worst_p99:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="four bodies, fewer normal requests")
    parser.add_argument("--nodes", type=int, default=100, help="cluster size (default %(default)s)")
    args = parser.parse_args()
    asyncio.run(run(args.quick, args.nodes, 30 if args.quick else 100))


if __name__ == "__main__":
    main()
