"""Acceptance: exporter → lightkube → the project's fake API server, reading a real gRPC PodResources server.

One scenario, in order: the object is created; not rewritten when unchanged; updated on change (the
notify file); terminal pods drop out; a foreign edit is undone; a deletion is repaired; the API's
409 / 410 / 500 and the PodResources server's failures and restarts are survived with the last good
object left in place; the API server restarts (state kept, then state lost). Every object version the
server stores is validated against the CRD schema.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from exp_helpers import ALLOCATABLE, NODE, assert_valid, eventually, pod, sample, zone_row

from numaplane.exporter.daemon import Exporter
from numaplane.exporter.errors import ExporterConfigError
from numaplane.exporter.options import ExporterOptions, RefreshMode
from numaplane.grpcapi.podresources.server import PodResourcesServer, StaticProvider
from numaplane.kube.errors import Gone, NotFound
from numaplane.kube.memory import InMemoryKube
from numaplane.kube.port import JsonObj
from numaplane.kube.resources import CRD, NODE_RESOURCE_TOPOLOGY, POD
from numaplane.kube.resources import NODE as NODE_RES
from numaplane.nrt.crd import crd_manifest
from numaplane.nrt.podresources import PodResources
from numaplane.testing.fakeapi import FakeApiServer

NRT = NODE_RESOURCE_TOPOLOGY


async def seed(store: InMemoryKube) -> str:
    """Serve the NRT CRD and register the Node; returns the Node's uid."""
    await store.create(CRD, crd_manifest())
    node = await store.create(NODE_RES, {"metadata": {"name": NODE}})
    return str(node["metadata"]["uid"])


@pytest_asyncio.fixture
async def api() -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer() as server:
        yield server


class Recorder:
    """Every NodeResourceTopology version a store holds (ADDED/MODIFIED events of a direct watch)."""

    def __init__(self) -> None:
        self.objects: list[JsonObj] = []
        self._tasks: list[asyncio.Task[None]] = []

    def follow(self, store: InMemoryKube) -> None:
        async def run() -> None:
            version: str | None = None
            while True:  # the test expires watches on purpose: resume, or relist (duplicates are harmless)
                try:
                    async for event in store.watch(NRT, resource_version=version):
                        version = event.resource_version or version
                        if event.type.value in ("ADDED", "MODIFIED"):
                            self.objects.append(event.object)
                except Gone:
                    version = None

        self._tasks.append(asyncio.create_task(run()))

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


async def current(api: FakeApiServer) -> JsonObj | None:
    try:
        return await api.store.get(NRT, NODE)
    except NotFound:
        return None


async def wait_object(api: FakeApiServer, check: Any, timeout: float = 5.0) -> JsonObj:
    """The server's object once ``check(obj)`` holds."""
    found: dict[str, JsonObj] = {}

    async def poll() -> None:
        while True:
            obj = await current(api)
            if obj is not None and check(obj):
                found["obj"] = obj
                return
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), timeout)
    return found["obj"]


def cpu_free(obj: JsonObj, zone: str = "node-0") -> str:
    return str(zone_row(obj, zone, "cpu")["available"])


def touch(path: Path) -> None:
    path.write_text("")


async def get(session: aiohttp.ClientSession, port: int, path: str) -> tuple[int, str]:
    async with session.get(f"http://127.0.0.1:{port}{path}") as response:
        return response.status, await response.text()


async def test_exporter_end_to_end(
    api: FakeApiServer,
    podres_server: PodResourcesServer,
    provider: StaticProvider,
    base_options: ExporterOptions,
    short_dir: Path,
) -> None:
    node_uid = await seed(api.store)
    recorder = Recorder()
    recorder.follow(api.store)
    notify = short_dir / "notify" / "file"
    options = dataclasses.replace(
        base_options,
        refresh_mode=RefreshMode.BOTH,
        period_seconds=0.4,
        notify_file=notify,
        max_events_per_second=50.0,
        retry_initial_seconds=0.05,
        retry_max_seconds=0.2,
        metrics_address="127.0.0.1:0",
        health_address="127.0.0.1:0",
    )
    kube = api.port_client()
    exporter = Exporter(options, kube=kube, initial_sync_seconds=2.0)
    registry = exporter.metrics.registry
    pods: list[PodResources] = [pod("gu", cpus=(1, 2), memory_gib=1), pod("be")]

    def set_pods(new: Sequence[PodResources]) -> None:
        pods[:] = list(new)
        provider.update(ALLOCATABLE, pods)

    await exporter.start()
    session = aiohttp.ClientSession()
    try:
        # --- created, with the owner reference to the Node
        obj = await wait_object(api, lambda o: True)
        assert obj["metadata"]["ownerReferences"][0]["uid"] == node_uid
        assert cpu_free(obj) == "1"
        await eventually(lambda: exporter.readiness()[0])
        assert (await get(session, exporter.probes.ports["health"], "/readyz"))[0] == 200
        assert (await get(session, exporter.probes.ports["health"], "/healthz"))[0] == 200

        # --- not rewritten when unchanged (notify events and periodic ticks alike)
        version = obj["metadata"]["resourceVersion"]
        cycles = exporter.status.cycles
        touch(notify)
        await eventually(lambda: exporter.status.cycles >= cycles + 2)
        assert (await current(api))["metadata"]["resourceVersion"] == version  # type: ignore[index]
        assert sample(registry, "numaplane_exporter_skips_total", {"trigger": "reactive"}) >= 1
        assert sample(registry, "numaplane_exporter_writes_total", {"operation": "create", "trigger": "initial"}) == 1

        # --- updated on change, reactively
        set_pods([*pods, pod("batch", cpus=(3,))])
        touch(notify)
        obj = await wait_object(api, lambda o: cpu_free(o) == "0", timeout=1.0)
        # (a periodic tick may win the race against the notify event)
        assert obj["metadata"]["annotations"]["k8stopoawareschedwg/rte-update"] in ("reactive", "periodic")

        # --- a pod the kubelet still lists but the API says Succeeded stops counting
        client_pod = {
            "metadata": {"name": "batch", "namespace": "default"},
            "spec": {"nodeName": NODE, "containers": [{"name": "main", "image": "busybox"}]},
        }
        await api.store.create(POD, client_pod)
        await api.store.patch_status(POD, "batch", {"status": {"phase": "Succeeded"}}, namespace="default")
        await wait_object(api, lambda o: cpu_free(o) == "1")

        # --- a foreign edit of our content is undone; a deletion is repaired
        edited = await current(api)
        assert edited is not None
        edited["zones"][0]["resources"][0]["available"] = "3"
        await api.store.replace(NRT, edited)
        await wait_object(api, lambda o: cpu_free(o) == "1" and o["metadata"]["resourceVersion"] != version)
        old_uid = (await current(api))["metadata"]["uid"]  # type: ignore[index]
        await api.store.delete(NRT, NODE)
        obj = await wait_object(api, lambda o: o["metadata"]["uid"] != old_uid)
        assert cpu_free(obj) == "1"

        # --- API 409 (conflict on update) and 410 (on read and on the watches): retried at once
        conflict = api.faults.add(409, verb="update", resource="noderesourcetopologies", reason="Conflict")
        gone = api.faults.add(410, verb="get", resource="noderesourcetopologies")
        api.expire_watches()
        set_pods([pod("gu", cpus=(1,), memory_gib=1), pod("be")])
        touch(notify)
        await wait_object(api, lambda o: cpu_free(o) == "2")
        assert conflict.hits == 1 and gone.hits == 1

        # --- API 500 twice: counted, backed off, retried; the last good object stays meanwhile
        errors_before = sample(registry, "numaplane_exporter_errors_total", {"kind": "api_server"})
        failing = api.faults.add(500, verb="update", resource="noderesourcetopologies", times=2)
        set_pods([pod("be")])
        touch(notify)
        await wait_object(api, lambda o: cpu_free(o) == "3")
        assert failing.hits == 2
        assert sample(registry, "numaplane_exporter_errors_total", {"kind": "api_server"}) == errors_before + 2

        # --- a failing PodResources provider and a kubelet restart: typed errors, object kept, recovery
        good = await current(api)

        async def broken() -> Sequence[PodResources]:
            raise RuntimeError("checkpoint corrupt")

        original_list = provider.list_pods
        provider.list_pods = broken  # type: ignore[method-assign]
        touch(notify)
        await eventually(lambda: sample(registry, "numaplane_exporter_errors_total", {"kind": "podresources_call"}))
        assert not exporter.readiness()[0]
        assert (await get(session, exporter.probes.ports["health"], "/readyz"))[0] == 503
        provider.list_pods = original_list  # type: ignore[method-assign]
        await podres_server.stop()
        touch(notify)
        await eventually(
            lambda: sample(registry, "numaplane_exporter_errors_total", {"kind": "podresources_unavailable"})
        )
        assert (await current(api)) == good  # the last good object stays published
        set_pods([pod("gu", cpus=(1, 2, 3))])
        await podres_server.start()
        touch(notify)
        await wait_object(api, lambda o: cpu_free(o) == "0")
        await eventually(lambda: exporter.readiness()[0])

        # --- API server restart, state kept: a change made while it is down is published after
        await api.stop()
        set_pods([pod("gu", cpus=(1,))])
        touch(notify)
        await eventually(lambda: sample(registry, "numaplane_exporter_errors_total", {"kind": "api_unavailable"}))
        await asyncio.sleep(0.2)
        await api.start()
        await wait_object(api, lambda o: cpu_free(o) == "2")

        # --- API server restart, state lost: CRD and Node come back (new uid); the object is recreated
        await api.restart(keep_state=False)
        new_uid = await seed(api.store)
        recorder.follow(api.store)
        obj = await wait_object(api, lambda o: o["metadata"].get("ownerReferences", [{}])[0].get("uid") == new_uid)
        assert cpu_free(obj) == "2"

        # --- metrics
        status, text = await get(session, exporter.probes.ports["metrics"], "/metrics")
        assert status == 200
        for family in (
            "numaplane_exporter_writes_total",
            "numaplane_exporter_skips_total",
            "numaplane_exporter_errors_total",
            "numaplane_exporter_event_to_published_seconds_bucket",
            "numaplane_exporter_scan_duration_seconds_bucket",
            'numaplane_exporter_zone_available{node="worker-1",resource="cpu",zone="node-0"}',
        ):
            assert family in text, family
        writes = [
            s.value
            for family in registry.collect()
            for s in family.samples
            if s.name == "numaplane_exporter_writes_total"
        ]
        assert sum(writes) >= 10
        live, details = exporter.liveness()
        assert live, details
        ready = json.loads((await get(session, exporter.probes.ports["health"], "/readyz"))[1])
        assert ready["ok"] and ready["podresources_fetched"]
    finally:
        await session.close()
        await exporter.close()
        await recorder.close()
        await kube.close()
    assert not exporter.liveness()[0]
    assert len(recorder.objects) >= 10
    for version_obj in recorder.objects:
        assert_valid(version_obj)


async def test_no_publish_and_oneshot_need_no_api_server(
    podres_server: PodResourcesServer, base_options: ExporterOptions
) -> None:
    result = await Exporter(base_options).oneshot()
    assert_valid(result.nrt.to_dict())
    options = dataclasses.replace(base_options, publish=False, period_seconds=0.05)
    exporter = Exporter(options)
    await exporter.start()
    try:
        await eventually(lambda: exporter.readiness()[0])
        assert exporter.publisher is None and exporter.last_result is not None
    finally:
        await exporter.close()


async def test_a_foreign_object_blocks_publishing_but_not_the_exporter(
    api: FakeApiServer, podres_server: PodResourcesServer, base_options: ExporterOptions
) -> None:
    await seed(api.store)
    foreign = {
        "metadata": {"name": NODE, "labels": {"app.kubernetes.io/managed-by": "someone-else"}},
        "zones": [{"name": "node-0", "type": "Node"}],
    }
    created = await api.store.create(NRT, foreign)
    kube = api.port_client()
    options = dataclasses.replace(base_options, retry_initial_seconds=0.05, retry_max_seconds=0.1)
    exporter = Exporter(options, kube=kube)
    await exporter.start()
    try:
        registry = exporter.metrics.registry
        await eventually(lambda: sample(registry, "numaplane_exporter_errors_total", {"kind": "foreign_object"}) >= 2)
        assert not exporter.readiness()[0] and exporter.liveness()[0]
        assert (await current(api)) == created
        await api.store.delete(NRT, NODE)  # the other owner goes away: we take over
        await wait_object(
            api, lambda o: o["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "numaplane-exporter"
        )
    finally:
        await exporter.close()
        await kube.close()


async def test_a_busy_probe_address_is_a_config_error(base_options: ExporterOptions) -> None:
    first = Exporter(dataclasses.replace(base_options, metrics_address="127.0.0.1:0", publish=False))
    await first.probes.start("127.0.0.1:0", None)
    busy = f"127.0.0.1:{first.probes.ports['metrics']}"
    second = Exporter(dataclasses.replace(base_options, health_address=busy, publish=False))
    try:
        with pytest.raises(ExporterConfigError, match="cannot listen"):
            await second.start()
    finally:
        await second.close()
        await first.probes.stop()
        await first.podresources.close()
