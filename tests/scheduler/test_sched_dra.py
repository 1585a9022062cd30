"""The standalone scheduler and DRA claims: without --dra it never binds a pod whose claims nobody
allocated (pending, with an Event); with --dra it allocates the supported claims in the zone that holds
the pod's CPUs and memory, writes the claims' status and binds (issue 28 item 2)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sched_helpers import events_for, node_doc, pod_doc
from test_sched_state import state_with, two_zone_nrt

from numaplane.kube.memory import InMemoryKube
from numaplane.kube.resources import DEVICE_CLASS, POD, RESOURCE_CLAIM, RESOURCE_SLICE
from numaplane.resources.pod import parse_pod
from numaplane.scheduler.dra import ClaimAllocator
from numaplane.scheduler.extender import Extender
from numaplane.scheduler.informers import ClusterInformers
from numaplane.scheduler.loop import StandaloneScheduler
from numaplane.scheduler.metrics import SchedulerMetrics
from numaplane.scheduler.wire import ExtenderArgs

DRIVER = "accel.example.com"


async def _settle(scheduler: StandaloneScheduler) -> None:
    while scheduler._background:
        await asyncio.gather(*list(scheduler._background))


def _with_claim(doc: dict[str, Any]) -> dict[str, Any]:
    doc["spec"]["resourceClaims"] = [{"name": "accel", "resourceClaimTemplateName": "one-accel"}]
    doc["spec"]["containers"][0]["resources"]["claims"] = [{"name": "accel"}]
    return doc


async def test_a_pod_with_claims_is_left_pending_with_an_event() -> None:
    store = InMemoryKube()
    state = state_with([node_doc("n")], [two_zone_nrt("n")])
    scheduler = StandaloneScheduler(store, state, ClusterInformers(store, state))
    for doc in (_with_claim(pod_doc("gpu", 2)), pod_doc("plain", 2)):
        created = await store.create(POD, doc)
        state.pod_upserted(None, created)
    await scheduler.schedule_one("default/gpu")
    await scheduler.schedule_one("default/plain")
    await _settle(scheduler)
    gpu = await store.get(POD, "gpu", namespace="default")
    plain = await store.get(POD, "plain", namespace="default")
    assert plain["spec"].get("nodeName") == "n"  # the same pod without a claim fits and is bound
    assert not gpu["spec"].get("nodeName")
    (event,) = await events_for(store, "gpu", "FailedScheduling")
    assert event["type"] == "Warning"
    assert event["message"].startswith(
        "pod uses ResourceClaims (accel) and numaplane scheduler run allocates DRA claims only with --dra"
    )
    (condition,) = [c for c in gpu["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    assert "ResourceClaims (accel)" in condition["message"]


# --- with --dra -------------------------------------------------------------------------------------


def _slice(node: str, devices: dict[str, int]) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{node}-accel"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": d, "attributes": {"resource.kubernetes.io/numaNode": {"int": z}}} for d, z in devices.items()
            ],
        },
    }


def _claim(name: str, exactly: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "accel", "exactly": exactly or {"deviceClassName": "accel"}}]}},
    }


async def _dra_scheduler(
    nrts: list[dict[str, Any]],
    devices: dict[str, int],
    claims: list[dict[str, Any]],
    taken: tuple[str, ...] = (),
    more: dict[str, dict[str, int]] | None = None,
) -> tuple[InMemoryKube, StandaloneScheduler, ClaimAllocator]:
    store = InMemoryKube()
    await store.create(RESOURCE_SLICE, _slice("n", devices))
    for node, node_devices in (more or {}).items():
        await store.create(RESOURCE_SLICE, _slice(node, node_devices))
    await store.create(
        DEVICE_CLASS,
        {
            "metadata": {"name": "accel"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
    )
    for claim in claims:
        await store.create(RESOURCE_CLAIM, claim)
    for i, device in enumerate(taken):  # devices another pod's claim holds
        other = await store.create(RESOURCE_CLAIM, _claim(f"other-{i}"))
        results = [{"request": "accel", "driver": DRIVER, "pool": "n", "device": device}]
        await store.update_status(
            RESOURCE_CLAIM, {**other, "status": {"allocation": {"devices": {"results": results}}}}
        )
    state = state_with([node_doc(n) for n in ["n", *(more or {})]], nrts)
    dra = ClaimAllocator(store)
    informers = ClusterInformers(store, state, extra=dra.informers)
    for informer in dra.informers:
        informer.start()
    for informer in dra.informers:
        await informer.wait_for_sync()
    return store, StandaloneScheduler(store, state, informers, dra=dra), dra


def _claim_pod(name: str, cpu: int, claim: str) -> dict[str, Any]:
    doc = pod_doc(name, cpu)
    doc["spec"]["resourceClaims"] = [{"name": "accel", "resourceClaimName": claim}]
    doc["spec"]["containers"][0]["resources"]["claims"] = [{"name": "accel"}]
    return doc


async def _schedule(store: InMemoryKube, scheduler: StandaloneScheduler, doc: dict[str, Any]) -> dict[str, Any]:
    created = await store.create(POD, doc)
    scheduler.state.pod_upserted(None, created)
    await scheduler.schedule_one(f"default/{doc['metadata']['name']}")
    await _settle(scheduler)
    return await store.get(POD, doc["metadata"]["name"], namespace="default")


async def _stop(dra: ClaimAllocator) -> None:
    for informer in dra.informers:
        await informer.stop()


async def test_the_device_is_allocated_in_the_zone_that_holds_the_cpus_and_the_pod_is_bound() -> None:
    # zone 0 has 1 free CPU, zone 1 has 4: the 2-CPU pod's device must come from NUMA node 1
    store, scheduler, dra = await _dra_scheduler([two_zone_nrt("n", cpu=(1, 4))], {"a0": 0, "a1": 1}, [_claim("c1")])
    try:
        pod = await _schedule(store, scheduler, _claim_pod("gpu", 2, "c1"))
        assert pod["spec"].get("nodeName") == "n"
        claim = await store.get(RESOURCE_CLAIM, "c1", namespace="default")
        allocation = claim["status"]["allocation"]
        assert allocation["devices"]["results"] == [{"request": "accel", "driver": DRIVER, "pool": "n", "device": "a1"}]
        assert allocation["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["n"]
        assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "gpu", "uid": pod["metadata"]["uid"]}]
    finally:
        await _stop(dra)


async def test_two_pods_in_a_row_never_get_the_same_device() -> None:
    # the second pod is scheduled before any informer shows the first claim's allocation
    store, scheduler, dra = await _dra_scheduler([two_zone_nrt("n")], {"a0": 0, "a1": 1}, [_claim("c1"), _claim("c2")])
    try:
        await _schedule(store, scheduler, _claim_pod("gpu1", 1, "c1"))
        pod2 = await _schedule(store, scheduler, _claim_pod("gpu2", 1, "c2"))
        assert pod2["spec"].get("nodeName") == "n"
        got = {}
        for name in ("c1", "c2"):
            claim = await store.get(RESOURCE_CLAIM, name, namespace="default")
            got[name] = claim["status"]["allocation"]["devices"]["results"][0]["device"]
        assert got == {"c1": "a0", "c2": "a1"}
    finally:
        await _stop(dra)


async def test_a_node_whose_devices_cannot_share_a_zone_with_the_cpus_is_passed_over() -> None:
    # the cycle picks node "n" (equal totals, name order) but its only device is on NUMA 0, where 1 CPU is free;
    # node "z" has its device on the zone with room: the pod goes there
    nrts = [two_zone_nrt("n", cpu=(1, 4)), two_zone_nrt("z", cpu=(2, 0))]
    store, scheduler, dra = await _dra_scheduler(nrts, {"a0": 0}, [_claim("c1")], more={"z": {"b0": 0}})
    try:
        created = await store.create(POD, _claim_pod("gpu", 2, "c1"))
        scheduler.state.pod_upserted(None, created)
        plain = scheduler.state.pods.get("default/gpu")
        assert plain is not None and scheduler.decide(plain).node == "n"  # the cycle alone would pick n
        await scheduler.schedule_one("default/gpu")
        await _settle(scheduler)
        pod = await store.get(POD, "gpu", namespace="default")
        assert pod["spec"].get("nodeName") == "z"
        claim = await store.get(RESOURCE_CLAIM, "c1", namespace="default")
        assert claim["status"]["allocation"]["devices"]["results"][0] == {
            "request": "accel", "driver": DRIVER, "pool": "z", "device": "b0"
        }  # fmt: skip
    finally:
        await _stop(dra)


async def test_single_numa_node_leaves_the_pod_pending_when_the_free_device_is_in_the_wrong_zone() -> None:
    # the CPUs fit only zone 1, whose device another claim holds; the device on NUMA 0 cannot be aligned
    store, scheduler, dra = await _dra_scheduler(
        [two_zone_nrt("n", cpu=(1, 4))], {"a0": 0, "a1": 1}, [_claim("c1")], taken=("a1",)
    )
    try:
        pod = await _schedule(store, scheduler, _claim_pod("gpu", 2, "c1"))
        assert not pod["spec"].get("nodeName")
        claim = await store.get(RESOURCE_CLAIM, "c1", namespace="default")
        assert not (claim.get("status") or {}).get("allocation")
        (event,) = await events_for(store, "gpu", "FailedScheduling")
        assert (
            event["message"]
            == "0/1 nodes are available: 1 cannot align the pod's claimed devices with its CPUs and memory."
        )
    finally:
        await _stop(dra)


async def test_best_effort_nodes_take_an_unaligned_device() -> None:
    store, scheduler, dra = await _dra_scheduler(
        [two_zone_nrt("n", cpu=(1, 4), policy="best-effort")], {"a0": 0, "a1": 1}, [_claim("c1")], taken=("a1",)
    )
    try:
        pod = await _schedule(store, scheduler, _claim_pod("gpu", 2, "c1"))
        assert pod["spec"].get("nodeName") == "n"
        claim = await store.get(RESOURCE_CLAIM, "c1", namespace="default")
        assert claim["status"]["allocation"]["devices"]["results"][0]["device"] == "a0"
    finally:
        await _stop(dra)


@pytest.mark.parametrize(
    ("exactly", "text"),
    [
        (
            {"deviceClassName": "accel", "allocationMode": "All"},
            "requests[0].exactly.allocationMode: 'All' is not supported",
        ),
        ({"deviceClassName": "missing"}, "DeviceClass 'missing' does not exist"),
        ({"deviceClassName": "accel", "count": 3}, "no free devices match the pod's claims"),
    ],
)
async def test_claims_it_cannot_allocate_leave_the_pod_pending_with_a_clear_event(
    exactly: dict[str, Any], text: str
) -> None:
    store, scheduler, dra = await _dra_scheduler([two_zone_nrt("n")], {"a0": 0, "a1": 1}, [_claim("c1", exactly)])
    try:
        pod = await _schedule(store, scheduler, _claim_pod("gpu", 1, "c1"))
        assert not pod["spec"].get("nodeName")
        (event,) = await events_for(store, "gpu", "FailedScheduling")
        assert text in event["message"]
    finally:
        await _stop(dra)


# --- the extender with --dra ------------------------------------------------------------------------


async def test_extender_filter_removes_nodes_whose_devices_cannot_share_a_zone_with_the_cpus() -> None:
    nrts = [two_zone_nrt("n", cpu=(1, 4)), two_zone_nrt("z", cpu=(2, 0))]
    store, scheduler, dra = await _dra_scheduler(nrts, {"a0": 0}, [_claim("c1")], more={"z": {"b0": 0}})
    try:
        created = await store.create(POD, _claim_pod("gpu", 2, "c1"))
        pod = parse_pod(created)
        extender = Extender(scheduler.state, store, SchedulerMetrics(), ready=lambda: True, dra=dra)
        result = extender.filter(ExtenderArgs(pod, node_names=("n", "z")))
        assert result["NodeNames"] == ["z"]
        assert result["FailedAndUnresolvableNodes"] == {
            "n": "cannot align the pod's claimed devices with its CPUs and memory"
        }
        without = Extender(scheduler.state, store, SchedulerMetrics(), ready=lambda: True)
        assert without.filter(ExtenderArgs(pod, node_names=("n", "z")))["NodeNames"] == ["n", "z"]
    finally:
        await _stop(dra)
