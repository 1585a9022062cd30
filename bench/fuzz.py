"""Long fuzz run of every parser of untrusted input, the extender under hostile bodies, and the time of
the largest inputs the limits allow (issue 15).

* every target of ``tests/hardening/fuzz_targets.py`` gets ``--examples`` inputs (hypothesis-generated):
  the property is that only the documented error types escape and no input takes more than
  ``MAX_SECONDS``; escapes are counted (the run continues) and the slowest input is reported;
* the extender (in this process, over HTTP on 127.0.0.1, 500 nodes from an in-memory API) answers
  ``--requests`` hostile bodies (deep nesting, gzip bombs, made-up nodes, bad names, huge quantities):
  RSS before and after, nodes cached, and whether ``/healthz`` still answers;
* the largest allowed inputs: a cpuset of ``MAX_CPUSET_CHARS``, a ``MAX_QUANTITY_CHARS`` quantity, a
  workload of ``MAX_WORKLOAD_PODS`` pods, an extender filter body just under ``MAX_EXTENDER_DECODED_BYTES``.

Prints ``metric: value unit`` lines. ``--quick`` runs a short version.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "hardening"))

from fuzz_targets import MAX_SECONDS, TARGETS, Target  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from numaplane import limits  # noqa: E402


def fuzz(target: Target, examples: int) -> dict[str, float]:
    stats = {"inputs": 0.0, "escaped": 0.0, "max_seconds": 0.0}

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def run(data: st.DataObject) -> None:
        value: Any = data.draw(target.strategy)
        stats["inputs"] += 1
        started = time.perf_counter()
        try:
            target.run(value)
        except target.errors:
            pass
        except Exception as exc:  # counted, not raised: the run reports every target
            stats["escaped"] += 1
            print(f"# {target.name}: {type(exc).__name__}: {str(exc)[:120]}", file=sys.stderr)
        stats["max_seconds"] = max(stats["max_seconds"], time.perf_counter() - started)

    run()
    return stats


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def hostile_bodies(template: dict[str, Any]) -> list[tuple[str, bytes, dict[str, str]]]:
    node = template["Nodes"]["items"][0]
    made_up = []
    for i in range(2000):
        fake = json.loads(json.dumps(node))
        fake["metadata"]["name"] = f"made-up-{i}"
        made_up.append(fake)
    fake_filter = json.dumps({**template, "Nodes": {"items": made_up}}).encode()
    bomb = gzip.compress(b'{"Pod": "' + b" " * (limits.MAX_EXTENDER_DECODED_BYTES + 1024) + b'"}', 9)
    pod = json.dumps(template["Pod"]).encode()
    return [
        ("filter", b"[" * 100_000 + b"]" * 100_000, {}),
        ("filter", b'{"Pod": ' + b'{"a":' * 2000 + b"1" + b"}" * 2000 + b', "NodeNames": []}', {}),
        ("filter", fake_filter, {}),
        ("filter", bomb, {"Content-Encoding": "gzip"}),
        ("prioritize", pod.replace(b'"4"', b'"' + b"9" * 4400 + b'"', 1)[:-1] + b', "NodeNames": []}', {}),
        ("bind", b'{"PodName": "p\\u0000", "Node": "n\\r\\nx"}', {}),
        ("bind", b'{"PodName": "bench", "PodNamespace": "default", "Node": "worker-0001"}', {}),
    ]


async def extender(requests: int) -> dict[str, float]:
    import aiohttp
    from scheduler_extender import node_doc, nrt_doc, pod_doc  # type: ignore[import-not-found]

    from numaplane.kube.memory import InMemoryKube
    from numaplane.kube.resources import CRD, NODE, NODE_RESOURCE_TOPOLOGY
    from numaplane.nrt.crd import crd_manifest
    from numaplane.observability.logs import configure_logging
    from numaplane.scheduler.config import SchedulerConfig
    from numaplane.scheduler.service import ExtenderService

    configure_logging("json", "error")
    store = InMemoryKube()
    await store.create(CRD, crd_manifest())
    nodes = [node_doc(i) for i in range(500)]
    for i, node in enumerate(nodes):
        await store.create(NODE, node)
        await store.create(NODE_RESOURCE_TOPOLOGY, nrt_doc(i))
    service = ExtenderService(store, SchedulerConfig(scheduler_names=("default-scheduler",)), address="127.0.0.1:0")
    await service.start()
    await service.informers.wait_for_sync()
    base = f"http://127.0.0.1:{service.ports['extender']}"
    template = {"Pod": pod_doc(), "Nodes": {"items": nodes[:1]}}
    bodies = hostile_bodies(template)
    out: dict[str, float] = {}
    codes: dict[int, int] = {}
    async with aiohttp.ClientSession() as http:

        async def burst(n: int) -> None:
            for i in range(n):
                verb, body, headers = bodies[i % len(bodies)]
                async with http.post(f"{base}/{verb}", data=body, headers=headers) as response:
                    await response.read()
                    codes[response.status] = codes.get(response.status, 0) + 1

        await burst(len(bodies) * 3)  # warm up
        out["rss_before"] = rss_bytes() / 2**20
        started = time.perf_counter()
        await burst(requests)
        out["seconds"] = time.perf_counter() - started
        out["rss_after"] = rss_bytes() / 2**20
        async with http.get(f"{base}/healthz") as response:
            out["healthz_ok"] = 1.0 if response.status == 200 else 0.0
    out["nodes_cached"] = len(service.core.nodes)
    out["http_500"] = codes.get(500, 0)
    out["http_400"] = codes.get(400, 0)
    out["http_413"] = codes.get(413, 0)
    await service.close()
    return out


def largest_inputs() -> dict[str, float]:
    from scheduler_extender import node_doc, pod_doc  # type: ignore[import-not-found]

    from numaplane.resources.quantity import parse_quantity
    from numaplane.scheduler.wire import decode_body, parse_extender_args
    from numaplane.sim.workload import parse_workload
    from numaplane.topology.cpuset import CPUSet

    out: dict[str, float] = {}
    ids = []
    length = 0
    cpu = limits.MAX_CPU_ID
    while True:  # the longest list of single CPU ids that fits the limit
        item = str(cpu)
        if length + len(item) + 1 > limits.MAX_CPUSET_CHARS or cpu < 0:
            break
        ids.append(item)
        length += len(item) + 1
        cpu -= 2
    text = ",".join(ids)
    started = time.perf_counter()
    CPUSet.parse(text)
    out["cpuset_max_seconds"] = time.perf_counter() - started
    started = time.perf_counter()
    parse_quantity("0." + "9" * (limits.MAX_QUANTITY_CHARS - 4) + "E")
    out["quantity_max_seconds"] = time.perf_counter() - started
    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    started = time.perf_counter()
    parse_workload({"pods": [{"name": "a", "count": limits.MAX_WORKLOAD_PODS, "spec": spec}]})
    out["workload_max_seconds"] = time.perf_counter() - started
    node = json.dumps(node_doc(1)).encode()
    count = (limits.MAX_EXTENDER_DECODED_BYTES - 10_000) // (len(node) + 1)
    count = min(count, limits.MAX_EXTENDER_NODES)
    body = b'{"Pod": ' + json.dumps(pod_doc()).encode() + b', "Nodes": {"items": [' + b",".join([node] * count) + b"]}}"
    started = time.perf_counter()
    args = parse_extender_args(decode_body(body))
    out["extender_body_max_seconds"] = time.perf_counter() - started
    out["extender_body_max_bytes"] = len(body) / 2**20
    out["extender_body_max_nodes"] = len(args.names)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=3000, help="inputs per fuzz target")
    parser.add_argument("--requests", type=int, default=10_000, help="hostile requests to the extender")
    parser.add_argument("--quick", action="store_true", help="200 inputs per target, 500 requests")
    args = parser.parse_args()
    examples, requests = (200, 500) if args.quick else (args.examples, args.requests)
    sys.path.insert(0, str(REPO / "bench"))
    total = 0.0
    escaped = 0.0
    for target in TARGETS:
        stats = fuzz(target, examples)
        total += stats["inputs"]
        escaped += stats["escaped"]
        print(f"fuzz_{target.name}_inputs: {int(stats['inputs'])} count")
        print(f"fuzz_{target.name}_escaped: {int(stats['escaped'])} count")
        print(f"fuzz_{target.name}_slowest_input: {stats['max_seconds'] * 1000:.1f} ms")
    print(f"fuzz_inputs_total: {int(total)} count")
    print(f"fuzz_escaped_total: {int(escaped)} count")
    print(f"fuzz_input_time_limit: {MAX_SECONDS * 1000:.0f} ms")
    for name, value in largest_inputs().items():
        unit = "s" if name.endswith("seconds") else ("MiB" if name.endswith("bytes") else "count")
        print(f"{name.removesuffix('_seconds')}: {value:.3f} {unit}")
    result = asyncio.run(extender(requests))
    print(f"extender_hostile_requests: {requests} count")
    print(f"extender_hostile_seconds: {result['seconds']:.1f} s")
    print(f"extender_rss_before: {result['rss_before']:.1f} MiB")
    print(f"extender_rss_after: {result['rss_after']:.1f} MiB")
    print(f"extender_nodes_cached: {int(result['nodes_cached'])} count")
    print(f"extender_http_500: {int(result['http_500'])} count")
    print(f"extender_http_400: {int(result['http_400'])} count")
    print(f"extender_http_413: {int(result['http_413'])} count")
    print(f"extender_healthz_ok: {int(result['healthz_ok'])} bool")


if __name__ == "__main__":
    main()
