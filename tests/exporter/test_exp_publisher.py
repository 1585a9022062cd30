"""The publisher on the in-memory port: writes only on change, ownership, repair, retries, owner reference."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
import pytest_asyncio
from exp_helpers import NODE, GiB, assert_valid

from numaplane.exporter.errors import ApiWriteError, ExporterError, ForeignObjectError, InvalidObjectError
from numaplane.exporter.publisher import TRIGGER_ANNOTATION, Outcome, Publisher
from numaplane.exporter.scan import MANAGED_BY, MANAGED_BY_LABEL
from numaplane.kube.clock import FakeClock, format_micro_time
from numaplane.kube.errors import Conflict, Invalid, ServerError
from numaplane.kube.memory import InMemoryKube
from numaplane.kube.port import JsonObj
from numaplane.kube.resources import CRD
from numaplane.kube.resources import NODE as NODE_RES
from numaplane.kube.resources import NODE_RESOURCE_TOPOLOGY as NRT
from numaplane.nrt.crd import crd_manifest
from numaplane.nrt.model import NodeResourceTopology, ResourceInfo, Zone
from numaplane.nrt.zones import make_nrt
from numaplane.resources.quantity import Quantity


def desired(available_cpus: int = 2, fingerprint: str | None = "pfp0v0010000000000000001") -> NodeResourceTopology:
    zones = (
        Zone("node-0", resources=(ResourceInfo.of_ints("cpu", 4, 3, available_cpus),)),
        Zone("node-1", resources=(ResourceInfo.of_ints("memory", 8 * GiB, 4 * GiB, 4 * GiB),)),
    )
    nrt = make_nrt(
        NODE,
        zones,
        topology_manager_policy="single-numa-node",
        topology_manager_scope="pod",
        fingerprint=fingerprint,
        fingerprint_method="all" if fingerprint else None,
    )
    meta = dataclasses.replace(nrt.metadata, labels={MANAGED_BY_LABEL: MANAGED_BY})
    return dataclasses.replace(nrt, metadata=meta)


@pytest_asyncio.fixture
async def store() -> AsyncIterator[InMemoryKube]:
    kube = InMemoryKube(strict_resources=True)
    await kube.create(CRD, crd_manifest())
    await kube.create(NODE_RES, {"metadata": {"name": NODE}})
    yield kube
    await kube.close()


def make(store: Any, errors: list[ExporterError] | None = None, **kw: Any) -> Publisher:
    return Publisher(store, NODE, on_error=(errors if errors is not None else []).append, **kw)


async def test_create_then_unchanged_then_update(store: InMemoryKube) -> None:
    node_uid = (await store.get(NODE_RES, NODE))["metadata"]["uid"]
    publisher = make(store)
    first = await publisher.publish(desired(), update_kind="periodic")
    assert first.outcome is Outcome.CREATED
    obj = await store.get(NRT, NODE)
    assert_valid(obj)
    assert obj["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": node_uid}]
    assert obj["metadata"]["annotations"][TRIGGER_ANNOTATION] == "periodic"
    version = obj["metadata"]["resourceVersion"]

    again = await publisher.publish(desired(), update_kind="reactive")
    assert again.outcome is Outcome.UNCHANGED and again.api_calls == 1  # one GET, no write
    assert (await store.get(NRT, NODE))["metadata"]["resourceVersion"] == version

    changed = await publisher.publish(desired(available_cpus=1), update_kind="reactive")
    assert changed.outcome is Outcome.UPDATED
    obj = await store.get(NRT, NODE)
    assert_valid(obj)
    assert obj["zones"][0]["resources"][0]["available"] == "1"
    assert obj["metadata"]["annotations"][TRIGGER_ANNOTATION] == "reactive"


async def test_a_live_view_saves_every_api_call(store: InMemoryKube) -> None:
    seen: dict[str, Any] = {}
    publisher = make(store, view=lambda: (True, seen.get("obj")))
    seen["obj"] = (await publisher.publish(desired())).object
    result = await publisher.publish(desired())
    assert (result.outcome, result.api_calls) == (Outcome.UNCHANGED, 0)
    stale = make(store, view=lambda: (False, seen["obj"]))  # not live: must read
    assert (await stale.publish(desired())).api_calls >= 1


async def test_quantities_compare_by_value(store: InMemoryKube) -> None:
    publisher = make(store)
    await publisher.publish(desired())
    obj = await store.get(NRT, NODE)
    obj["zones"][1]["resources"][0].update(capacity="8Gi", allocatable="4Gi", available="4096Mi")
    await store.replace(NRT, obj)
    assert (await publisher.publish(desired())).outcome is Outcome.UNCHANGED


async def test_update_keeps_what_others_added(store: InMemoryKube) -> None:
    publisher = make(store)
    await publisher.publish(desired())
    obj = await store.get(NRT, NODE)
    meta = obj["metadata"]
    meta["labels"]["team"] = "infra"
    meta["annotations"]["note"] = "keep me"
    meta["finalizers"] = ["example.com/hold"]
    meta["ownerReferences"].append({"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "rte", "uid": "ds-1"})
    meta["ownerReferences"][0]["uid"] = "stale-node-uid"
    await store.replace(NRT, obj)
    assert (await publisher.publish(desired(available_cpus=0))).outcome is Outcome.UPDATED
    meta = (await store.get(NRT, NODE))["metadata"]
    assert meta["labels"] == {MANAGED_BY_LABEL: MANAGED_BY, "team": "infra"}
    assert meta["annotations"]["note"] == "keep me" and meta["finalizers"] == ["example.com/hold"]
    kinds = [(o["kind"], o["uid"]) for o in meta["ownerReferences"]]
    node_uid = (await store.get(NODE_RES, NODE))["metadata"]["uid"]
    assert kinds == [("DaemonSet", "ds-1"), ("Node", node_uid)]
    # dropping the fingerprint drops its annotation too
    await publisher.publish(desired(available_cpus=0, fingerprint=None))
    assert "topology.node.k8s.io/fingerprint" not in (await store.get(NRT, NODE))["metadata"]["annotations"]


def foreign(labels: Mapping[str, str]) -> JsonObj:
    obj = desired(available_cpus=4).to_dict()
    obj["metadata"] = {"name": NODE, "labels": dict(labels)}
    return obj


async def test_foreign_objects_are_never_overwritten(store: InMemoryKube) -> None:
    await store.create(NRT, foreign({MANAGED_BY_LABEL: "resource-topology-exporter"}))
    version = (await store.get(NRT, NODE))["metadata"]["resourceVersion"]
    for adopt in (False, True):
        with pytest.raises(ForeignObjectError, match="resource-topology-exporter") as info:
            await make(store, adopt=adopt).publish(desired())
        assert info.value.kind == "foreign_object"
    assert (await store.get(NRT, NODE))["metadata"]["resourceVersion"] == version


async def test_unlabelled_objects_are_adopted_only_when_asked(store: InMemoryKube) -> None:
    await store.create(NRT, foreign({}))
    with pytest.raises(ForeignObjectError, match="--adopt"):
        await make(store).publish(desired())
    assert (await make(store, adopt=True).publish(desired())).outcome is Outcome.UPDATED
    assert (await store.get(NRT, NODE))["metadata"]["labels"][MANAGED_BY_LABEL] == MANAGED_BY


async def test_an_invalid_object_of_ours_is_reported_and_repaired(store: InMemoryKube) -> None:
    bad = foreign({MANAGED_BY_LABEL: MANAGED_BY})
    bad["zones"] = [{"name": "node-0", "type": "Node", "resources": [{"name": "cpu", "capacity": "lots"}]}]
    with pytest.raises(Invalid):  # the API server validates against the CRD, as kube-apiserver does
        await store.create(NRT, bad)
    store.seed(NRT, [bad])  # one stored under an older, looser CRD
    errors: list[ExporterError] = []
    assert (await make(store, errors).publish(desired())).outcome is Outcome.UPDATED
    assert [e.kind for e in errors] == ["invalid_server_object"]
    assert_valid(await store.get(NRT, NODE))


async def test_an_invalid_computed_object_is_never_sent(store: InMemoryKube) -> None:
    nrt = desired()
    broken = ResourceInfo(
        "cpu", Quantity.from_int(1), Quantity.from_int(1), Quantity.from_int(1), raw=("1", "x y", "1")
    )
    nrt = dataclasses.replace(nrt, zones=(Zone("node-0", resources=(broken,)),))
    with pytest.raises(InvalidObjectError, match="zones/0/resources/0/allocatable"):
        await make(store).publish(nrt)
    assert not (await store.list(NRT)).items


class Flaky:
    """Wraps a port: the first ``failures`` calls of ``verb`` raise ``error``."""

    def __init__(self, inner: InMemoryKube, verb: str, error: Exception, failures: int) -> None:
        self.inner, self.verb, self.error, self.failures = inner, verb, error, failures
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            if name == self.verb and self.failures > 0:
                self.failures -= 1
                raise self.error
            return await method(*args, **kwargs)

        return call


async def test_conflicts_are_retried_other_errors_raised(store: InMemoryKube) -> None:
    await make(store).publish(desired())
    flaky = Flaky(store, "replace", Conflict("stale"), failures=2)
    assert (await make(flaky).publish(desired(available_cpus=1))).outcome is Outcome.UPDATED
    assert flaky.calls.count("replace") == 3 and flaky.calls.count("get") >= 3
    always = Flaky(store, "replace", Conflict("stale"), failures=100)
    with pytest.raises(ApiWriteError, match="gave up") as info:
        await make(always).publish(desired(available_cpus=0))
    assert info.value.kind == "api_conflict"
    failing = Flaky(store, "replace", ServerError("boom"), failures=1)
    with pytest.raises(ApiWriteError) as info:
        await make(failing).publish(desired(available_cpus=0))
    assert info.value.kind == "api_server" and failing.calls.count("replace") == 1  # no hammering


async def test_missing_node_means_no_owner_reference_yet(store: InMemoryKube) -> None:
    await store.delete(NODE_RES, NODE)
    errors: list[ExporterError] = []
    publisher = make(store, errors, node_retry_seconds=0.0)
    assert (await publisher.publish(desired())).outcome is Outcome.CREATED
    assert "ownerReferences" not in (await store.get(NRT, NODE))["metadata"]
    assert [e.kind for e in errors] == ["node_lookup"]
    await store.create(NODE_RES, {"metadata": {"name": NODE}})
    assert (await publisher.publish(desired())).outcome is Outcome.UPDATED  # the reference is added
    assert (await store.get(NRT, NODE))["metadata"]["ownerReferences"][0]["kind"] == "Node"
    off = make(store, owner_reference=False)
    await store.delete(NRT, NODE)
    await off.publish(desired())
    assert "ownerReferences" not in (await store.get(NRT, NODE))["metadata"]


async def test_a_heartbeat_rewrites_unchanged_content_and_publishes_the_staleness_bound(store: InMemoryKube) -> None:
    """Issue 23 item 3: an exporter that publishes rewrites its object at least every heartbeat, so
    one that stopped is visible (the scheduler's staleness gate reads the bound written here)."""
    from numaplane.exporter import publisher as module

    clock = FakeClock()
    publisher = make(store, heartbeat_seconds=10.0, clock=clock)
    assert (await publisher.publish(desired())).outcome is Outcome.CREATED
    notes = (await store.get(NRT, NODE))["metadata"]["annotations"]
    assert notes[module.STALE_AFTER_ANNOTATION] == "30"
    assert notes[module.HEARTBEAT_ANNOTATION] == format_micro_time(clock.now())  # the clock's wall time
    version = (await store.get(NRT, NODE))["metadata"]["resourceVersion"]
    clock.advance(9.0)
    assert (await publisher.publish(desired())).outcome is Outcome.UNCHANGED  # heartbeat not due
    assert (await store.get(NRT, NODE))["metadata"]["resourceVersion"] == version
    clock.advance(1.0)
    assert (await publisher.publish(desired())).outcome is Outcome.UPDATED  # same content, heartbeat due
    assert (await store.get(NRT, NODE))["metadata"]["resourceVersion"] != version
    assert publisher.matches(await store.get(NRT, NODE))  # the heartbeat is not content


async def test_without_a_heartbeat_no_bound_is_published(store: InMemoryKube) -> None:
    from numaplane.exporter import publisher as module

    await make(store).publish(desired())
    notes = (await store.get(NRT, NODE))["metadata"]["annotations"]
    assert module.STALE_AFTER_ANNOTATION not in notes and module.HEARTBEAT_ANNOTATION not in notes
