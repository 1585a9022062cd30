"""The standalone scheduler never binds a pod whose DRA claims nobody allocated: it stays pending, with an Event."""

from __future__ import annotations

import asyncio
from typing import Any

from sched_helpers import events_for, node_doc, pod_doc
from test_sched_state import state_with, two_zone_nrt

from numaplane.kube.memory import InMemoryKube
from numaplane.kube.resources import POD
from numaplane.scheduler.informers import ClusterInformers
from numaplane.scheduler.loop import StandaloneScheduler


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
    assert event["message"].startswith("pod uses ResourceClaims (accel) and numaplane scheduler run does not allocate")
    (condition,) = [c for c in gpu["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    assert "ResourceClaims (accel)" in condition["message"]
