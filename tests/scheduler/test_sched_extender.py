"""The extender over HTTP, answering the real kube-scheduler v1.36 request bodies of the wire captures.

The captured cluster had two nodes (``numaplane-fake-node``, ``rig-node``) and pods ``gu-ncc-*``
(Guaranteed, 1 CPU / 64Mi) and ``be-ncc-*`` (BestEffort). Here the fake API server holds those Node
objects and NRTs made for the test: ``rig-node`` has two zones of 1 CPU (the pod fits), and
``numaplane-fake-node`` has zones whose CPUs are all taken (``available`` 0 of ``allocatable`` 4: the pod
would fit if pods were evicted → FailedNodes) or, in one test, a zone too small ever to hold it
(→ FailedAndUnresolvableNodes).
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import structlog
from sched_helpers import eventually, load_capture, node_doc, nrt_doc, pod_doc, seed_crd, zone_doc
from structlog.testing import LogCapture
from test_sched_state import state_with, two_zone_nrt

import numaplane.scheduler.extender as extender_module
from numaplane.kube.memory import InMemoryKube
from numaplane.kube.resources import CRD, NAMESPACE, NODE, NODE_RESOURCE_TOPOLOGY, POD
from numaplane.nrt.crd import crd_manifest
from numaplane.resources.pod import parse_pod
from numaplane.scheduler.config import SchedulerConfig
from numaplane.scheduler.extender import NOT_READY, Extender
from numaplane.scheduler.metrics import SchedulerMetrics
from numaplane.scheduler.service import ExtenderService
from numaplane.scheduler.wire import ExtenderArgs, scale_score
from numaplane.testing.fakeapi import FakeApiServer

PROFILE = "numaplane-extender-test"
NAMESPACE_NAME = "numaplane-wire"


def rig_nrt() -> dict[str, Any]:
    return nrt_doc(
        "rig-node",
        [
            zone_doc(0, {"cpu": (1, 1), "memory": ("8Gi", "8Gi")}),
            zone_doc(1, {"cpu": (1, 1), "memory": ("8Gi", "8Gi")}),
        ],
    )


def fake_node_nrt(*, resolvable: bool = True) -> dict[str, Any]:
    if resolvable:
        zones = [zone_doc(i, {"cpu": (4, 0), "memory": ("8Gi", "8Gi")}) for i in range(2)]
    else:
        zones = [zone_doc(i, {"cpu": (4, 4), "memory": ("32Mi", "32Mi")}) for i in range(2)]
    return nrt_doc("numaplane-fake-node", zones)


async def seed(server: FakeApiServer, shared: Path, *, resolvable: bool = True) -> dict[str, str]:
    """Nodes from the capture, our NRTs, and the captured pods (returns pod name → uid)."""
    store = server.store
    await seed_crd(store)
    await store.create(NAMESPACE, {"metadata": {"name": NAMESPACE_NAME}})
    for node in load_capture(shared, "nodecachecapable-false.filter.guaranteed.json")["Nodes"]["items"]:
        await store.create(NODE, node)
    await store.create(NODE_RESOURCE_TOPOLOGY, rig_nrt())
    await store.create(NODE_RESOURCE_TOPOLOGY, fake_node_nrt(resolvable=resolvable))
    uids = {}
    for mode in ("false", "true"):
        for qos in ("guaranteed", "besteffort"):
            pod = copy.deepcopy(load_capture(shared, f"nodecachecapable-{mode}.filter.{qos}.json")["Pod"])
            meta = pod["metadata"]
            pod["metadata"] = {"name": meta["name"], "namespace": meta["namespace"], "labels": meta.get("labels", {})}
            pod.pop("status", None)
            created = await store.create(POD, pod)
            uids[meta["name"]] = created["metadata"]["uid"]
    return uids


def filter_with_uid(shared: Path, capture: str, uid: str) -> dict[str, Any]:
    """The captured filter request ``capture`` for the seeded pod of UID ``uid`` (kube-scheduler sends
    the pod as the API server holds it; the captures hold the UIDs of the captured cluster)."""
    request = load_capture(shared, capture)
    request["Pod"]["metadata"]["uid"] = uid
    return request


@pytest_asyncio.fixture
async def server() -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer() as api:
        yield api


async def start(server: FakeApiServer, config: SchedulerConfig | None = None) -> ExtenderService:
    service = ExtenderService(
        server.port_client(), config or SchedulerConfig(scheduler_names=(PROFILE,)), address="127.0.0.1:0"
    )
    await service.start()
    return service


async def post(port: int, verb: str, body: Any) -> tuple[int, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"http://127.0.0.1:{port}/{verb}", data=data, headers={"Content-Type": "application/json"}
        ) as response,
    ):
        return response.status, await response.json()


async def get(port: int, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}{path}") as response:
        return response.status, await response.text()


@pytest.mark.parametrize("mode", ["false", "true"])
async def test_captured_requests_get_exact_shapes(server: FakeApiServer, shared_dir: Path, mode: str) -> None:
    await seed(server, shared_dir)
    service = await start(server)
    try:
        await eventually(lambda: _ready(service))
        port = service.ports["extender"]
        status, body = await post(
            port, "filter", load_capture(shared_dir, f"nodecachecapable-{mode}.filter.guaranteed.json")
        )
        assert status == 200
        assert set(body) == {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
        assert body["Error"] == ""
        assert body["FailedNodes"] == {"numaplane-fake-node": "cannot align container"}
        assert body["FailedAndUnresolvableNodes"] == {}
        if mode == "true":
            assert body["Nodes"] is None and body["NodeNames"] == ["rig-node"]
        else:
            request = load_capture(shared_dir, "nodecachecapable-false.filter.guaranteed.json")
            assert body["NodeNames"] is None
            assert body["Nodes"]["items"] == [
                n for n in request["Nodes"]["items"] if n["metadata"]["name"] == "rig-node"
            ]
            assert body["Nodes"]["metadata"] == request["Nodes"]["metadata"]

        status, body = await post(
            port, "filter", load_capture(shared_dir, f"nodecachecapable-{mode}.filter.besteffort.json")
        )
        assert status == 200 and body["FailedNodes"] == {} and body["FailedAndUnresolvableNodes"] == {}
        passing = body["NodeNames"] if mode == "true" else [n["metadata"]["name"] for n in body["Nodes"]["items"]]
        assert passing == ["numaplane-fake-node", "rig-node"]

        status, scores = await post(
            port, "prioritize", load_capture(shared_dir, f"nodecachecapable-{mode}.prioritize.guaranteed.json")
        )
        assert status == 200
        assert [set(s) for s in scores] == [{"Host", "Score"}] * 2
        by_host = {s["Host"]: s["Score"] for s in scores}
        # the pod fits no zone of the fake node; it is still scored as upstream's Score does (49 -> 5)
        assert by_host["numaplane-fake-node"] == 5 and 0 < by_host["rig-node"] <= 10
        assert all(isinstance(s["Score"], int) for s in scores)
        status, scores = await post(
            port, "prioritize", load_capture(shared_dir, f"nodecachecapable-{mode}.prioritize.besteffort.json")
        )
        assert status == 200 and {s["Score"] for s in scores} == {10}  # not Guaranteed: 100 → 10
    finally:
        await service.close()


async def _ready(service: ExtenderService) -> bool:
    return service.ready


async def test_unresolvable_when_no_eviction_can_help(server: FakeApiServer, shared_dir: Path) -> None:
    await seed(server, shared_dir, resolvable=False)
    service = await start(server)
    try:
        await eventually(lambda: _ready(service))
        status, body = await post(
            service.ports["extender"],
            "filter",
            load_capture(shared_dir, "nodecachecapable-true.filter.guaranteed.json"),
        )
        assert status == 200
        assert body["FailedNodes"] == {}
        assert body["FailedAndUnresolvableNodes"] == {"numaplane-fake-node": "cannot align container"}
        # a node name we have never seen is unresolvable too
        request = load_capture(shared_dir, "nodecachecapable-true.filter.guaranteed.json")
        request["NodeNames"] = ["rig-node", "ghost"]
        status, body = await post(service.ports["extender"], "filter", request)
        assert body["NodeNames"] == ["rig-node"]
        assert body["FailedAndUnresolvableNodes"] == {"ghost": "node not found"}
    finally:
        await service.close()


async def test_bind_creates_binding_and_cache_learns_synchronously(server: FakeApiServer, shared_dir: Path) -> None:
    uids = await seed(server, shared_dir)
    service = await start(server, SchedulerConfig(scheduler_names=(PROFILE,), cache_mode="overreserve"))
    try:
        await eventually(lambda: _ready(service))
        port = service.ports["extender"]
        captured = load_capture(shared_dir, "nodecachecapable-true.bind.guaranteed.json")
        # the captured UID belongs to the capture's cluster: refused, nothing bound
        status, body = await post(port, "bind", captured)
        assert status == 200 and set(body) == {"Error"} and "UID" in body["Error"]
        assert not (await server.store.get(POD, "gu-ncc-true", namespace=NAMESPACE_NAME))["spec"].get("nodeName")

        # bind only follows this extender's own filter (issue 15, item 1)
        status, body = await post(port, "bind", {**captured, "PodUID": uids["gu-ncc-true"]})
        assert status == 200 and "did not pass this extender's filter" in body["Error"]
        status, body = await post(
            port,
            "filter",
            filter_with_uid(shared_dir, "nodecachecapable-true.filter.guaranteed.json", uids["gu-ncc-true"]),
        )
        assert body["NodeNames"] == ["rig-node"]
        status, body = await post(port, "bind", {**captured, "PodUID": uids["gu-ncc-true"]})
        assert (status, body) == (200, {"Error": ""})
        pod = await server.store.get(POD, "gu-ncc-true", namespace=NAMESPACE_NAME)
        assert pod["spec"]["nodeName"] == "rig-node"
        # No NRT update happened, yet the next Guaranteed pod no longer fits rig-node's 1-CPU zones.
        status, body = await post(
            port, "filter", load_capture(shared_dir, "nodecachecapable-true.filter.guaranteed.json")
        )
        assert body["NodeNames"] == []
        assert body["FailedNodes"] == {
            "numaplane-fake-node": "cannot align container",
            "rig-node": "cannot align container",
        }

        # binding an already bound pod again: refused (its own reservation fills the node, and its
        # filter result was used up) ...
        for node in ("numaplane-fake-node", "rig-node"):
            status, body = await post(port, "bind", {**captured, "PodUID": uids["gu-ncc-true"], "Node": node})
            assert status == 200 and "does not fit" in body["Error"]
        # ... and the first binding's reservation stays
        status, body = await post(
            port, "filter", load_capture(shared_dir, "nodecachecapable-true.filter.guaranteed.json")
        )
        assert body["NodeNames"] == [] and "rig-node" in body["FailedNodes"]
        metrics = (await get(port, "/metrics"))[1]
        assert 'numaplane_scheduler_binds_total{result="success"} 1.0' in metrics
        assert 'numaplane_scheduler_binds_total{result="error"} 1.0' in metrics
        assert 'numaplane_scheduler_binds_total{result="refused"} 3.0' in metrics
        assert 'numaplane_scheduler_extender_requests_total{code="200",verb="bind"} 5.0' in metrics
    finally:
        await service.close()


async def test_bad_requests_get_400_with_reason(server: FakeApiServer, shared_dir: Path) -> None:
    await seed(server, shared_dir)
    service = await start(server)
    try:
        await eventually(lambda: _ready(service))
        port = service.ports["extender"]
        cases: list[tuple[str, Any, str]] = [
            ("filter", b"{not json", "not JSON"),
            ("filter", b"", "empty"),
            ("filter", [1, 2], "JSON object"),
            ("filter", {"NodeNames": ["rig-node"]}, "Pod is missing"),
            ("filter", {"Pod": {"metadata": {"name": "p"}}}, "neither Nodes nor NodeNames"),
            ("filter", {"Pod": {"metadata": {"name": "p"}}, "NodeNames": "rig-node"}, "NodeNames must be a list"),
            ("filter", {"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": [{}]}}, "Nodes.items[0]"),
            (
                "prioritize",
                {
                    "Pod": {
                        "metadata": {"name": "p"},
                        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]},
                    },
                    "NodeNames": [],
                },
                "Pod: invalid pod",
            ),
            ("bind", {"PodName": "p", "PodNamespace": "default"}, "Node is missing"),
            ("bind", {"PodName": 3, "Node": "n"}, "PodName must be a string"),
        ]
        for verb, body, reason in cases:
            status, answer = await post(port, verb, body)
            assert status == 400, (verb, body)
            assert reason in answer["Error"], (reason, answer)
        # keys are matched case-insensitively, like Go's decoder
        request = load_capture(shared_dir, "nodecachecapable-true.filter.guaranteed.json")
        lowered = {"pod": request["Pod"], "nodenames": request["NodeNames"], "NODES": None}
        status, body = await post(port, "filter", lowered)
        assert status == 200 and body["NodeNames"] == ["rig-node"]
        metrics = (await get(port, "/metrics"))[1]
        assert 'numaplane_scheduler_extender_requests_total{code="400",verb="filter"} 7.0' in metrics
    finally:
        await service.close()


async def test_not_ready_until_the_nrt_crd_exists(server: FakeApiServer, shared_dir: Path) -> None:
    store = server.store
    await store.create(NAMESPACE, {"metadata": {"name": NAMESPACE_NAME}})
    service = await start(server)
    try:
        port = service.ports["extender"]
        await eventually(lambda: _informer_tried(service))
        assert (await get(port, "/readyz"))[0] == 503
        assert (await get(port, "/healthz"))[0] == 200
        request = load_capture(shared_dir, "nodecachecapable-false.filter.guaranteed.json")
        status, body = await post(port, "filter", request)
        assert status == 200 and body["Error"] == NOT_READY and body["Nodes"]["items"] == []
        status, body = await post(port, "prioritize", request)
        assert status == 503
        await store.create(CRD, crd_manifest())
        await eventually(lambda: _ready(service), timeout=10)
        assert (await get(port, "/readyz"))[0] == 200
        status, body = await post(port, "filter", request)
        assert body["Error"] == ""
        # the request's Node objects are not nodes the informer knows: never adopted (issue 15, item 3)
        assert body["Nodes"]["items"] == []
        assert set(body["FailedAndUnresolvableNodes"].values()) == {"node not found"}
        for node in request["Nodes"]["items"]:
            await store.create(NODE, node)
        await eventually(lambda: _has_nodes(service, 2))
        status, body = await post(port, "filter", request)
        # no NRT for either node: both pass unchecked (partial coverage, as upstream)
        assert [n["metadata"]["name"] for n in body["Nodes"]["items"]] == ["numaplane-fake-node", "rig-node"]
    finally:
        await service.close()


async def _has_nodes(service: ExtenderService, count: int) -> bool:
    return len(service.state.nodes) >= count


async def _informer_tried(service: ExtenderService) -> bool:
    return service.informers.nrts.errors > 0 and service.informers.nodes.has_synced


async def test_filter_judges_a_pod_at_its_own_preferences_and_says_why(server: FakeApiServer, shared_dir: Path) -> None:
    """Issue 24: the extender's filter reads the pod's numaplane.io/ preferences as the node admits them.
    The captured Guaranteed pod (1 CPU) fits rig-node's 1-CPU zones; asking ``memory-pinning: true``
    it still does (the zones list memory); an invalid annotation fits no node, and the answer carries
    the node's message (kube-scheduler puts it in the pod's FailedScheduling event)."""
    await seed(server, shared_dir)
    service = await start(server)
    try:
        await eventually(lambda: _ready(service))
        port = service.ports["extender"]
        request = load_capture(shared_dir, "nodecachecapable-true.filter.guaranteed.json")
        request["Pod"]["metadata"]["annotations"] = {"numaplane.io/memory-pinning": "true"}
        status, body = await post(port, "filter", request)
        assert status == 200 and body["NodeNames"] == ["rig-node"]
        request["Pod"]["metadata"]["annotations"] = {"numaplane.io/cpu-strategy": "fastest"}
        status, body = await post(port, "filter", request)
        assert status == 200 and body["NodeNames"] == []
        failed = {**body["FailedNodes"], **body["FailedAndUnresolvableNodes"]}
        assert set(failed) == {"numaplane-fake-node", "rig-node"}
        assert all(
            reason.startswith("invalid pod preference: annotation numaplane.io/cpu-strategy='fastest'")
            for reason in failed.values()
        )
    finally:
        await service.close()


def test_prioritize_logs_its_scores_only_when_debug_logs_are_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """With debug logs on, the ``prioritize`` line carries every candidate's 0..100 score, which the
    answer scales to 0..10; with them off (the map is then not built) no line is written and the
    answer is the same. The module's logger is replaced by one made under this test's own
    configuration: an earlier test may have configured logging with ``cache_logger_on_first_use``,
    which fixes the module logger's processors and level for the rest of the process."""
    state = state_with([node_doc("a"), node_doc("b")], [two_zone_nrt("a"), two_zone_nrt("b", cpu=(1, 4))])
    extender = Extender(state, InMemoryKube(), SchedulerMetrics(), ready=lambda: True)
    args = ExtenderArgs(parse_pod(pod_doc("p", 2)), node_names=("a", "b"))

    def prioritize_at(level: int) -> tuple[Any, list[Any]]:
        capture = LogCapture()
        logger = structlog.wrap_logger(
            None,
            processors=[capture],
            wrapper_class=structlog.make_filtering_bound_logger(level),
            cache_logger_on_first_use=False,
        )
        monkeypatch.setattr(extender_module, "log", logger)
        return extender.prioritize(args), capture.entries

    on, events = prioritize_at(logging.DEBUG)
    (logged,) = [e["scores"] for e in events if e["event"] == "prioritize"]
    assert on is not None and {h.Host: h.Score for h in on} == {n: scale_score(s) for n, s in logged.items()}
    off, events = prioritize_at(logging.INFO)
    assert not [e for e in events if e["event"] == "prioritize"]
    assert off == on
