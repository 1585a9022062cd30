"""Port contract, objects: the same assertions against the in-memory port and lightkube + fake server.

CRUD, namespaces, selectors, optimistic concurrency (409), patches, server-side apply, the status
subresource, pods/binding, leases, events and custom resources.
"""

from __future__ import annotations

import contextlib

import pytest
from kube_helpers import Harness, pod, take

from numaplane.kube.clock import format_micro_time
from numaplane.kube.errors import AlreadyExists, Conflict, Gone, Invalid, NotFound, ServerError, Unavailable
from numaplane.kube.events import make_event
from numaplane.kube.memory import InMemoryKube
from numaplane.kube.port import (
    CONFIG_MAP,
    CRD,
    DEPLOYMENT,
    EVENT,
    LEASE,
    NAMESPACE,
    NODE,
    NODE_RESOURCE_TOPOLOGY,
    POD,
    KubePort,
    PatchType,
    Resource,
)
from numaplane.testing.fakeapi import FakeApiServer, FaultyKube, crd_for


async def test_crud_round_trip(harness: Harness) -> None:
    kube = harness.kube
    created = await kube.create(CONFIG_MAP, {"metadata": {"name": "cfg", "namespace": "default"}, "data": {"a": "1"}})
    meta = created["metadata"]
    assert created["apiVersion"] == "v1" and created["kind"] == "ConfigMap"
    assert meta["uid"] and meta["creationTimestamp"] and meta["resourceVersion"]
    assert meta["namespace"] == "default"

    got = await kube.get(CONFIG_MAP, "cfg", namespace="default")
    assert got["data"] == {"a": "1"}
    assert got["metadata"]["resourceVersion"] == meta["resourceVersion"]

    got["data"]["b"] = "2"
    replaced = await kube.replace(CONFIG_MAP, got)
    assert replaced["data"] == {"a": "1", "b": "2"}
    assert int(replaced["metadata"]["resourceVersion"]) > int(meta["resourceVersion"])
    assert replaced["metadata"]["uid"] == meta["uid"]

    with pytest.raises(AlreadyExists) as info:
        await kube.create(CONFIG_MAP, {"metadata": {"name": "cfg"}, "data": {}})
    assert info.value.code == 409

    await kube.delete(CONFIG_MAP, "cfg")
    with pytest.raises(NotFound) as missing:
        await kube.get(CONFIG_MAP, "cfg")
    assert missing.value.code == 404
    with pytest.raises(NotFound):
        await kube.delete(CONFIG_MAP, "cfg")
    with pytest.raises(NotFound):
        await kube.replace(CONFIG_MAP, got)


async def test_namespaces_and_cluster_scope(harness: Harness) -> None:
    kube = harness.kube
    await kube.create(NAMESPACE, {"metadata": {"name": "team-a"}})
    await kube.create(POD, pod("p1", "team-a"))
    await kube.create(POD, pod("p2", "default"))
    await kube.create(NODE, {"metadata": {"name": "n1", "labels": {"zone": "z1"}}})

    everywhere = await kube.list(POD)
    assert sorted(p["metadata"]["name"] for p in everywhere.items) == ["p1", "p2"]
    assert everywhere.resource_version
    only_a = await kube.list(POD, namespace="team-a")
    assert [p["metadata"]["name"] for p in only_a.items] == ["p1"]
    assert (await kube.get(POD, "p2"))["metadata"]["namespace"] == "default"  # None means "default"

    nodes = await kube.list(NODE)
    assert [n["metadata"]["name"] for n in nodes.items] == ["n1"]
    assert "namespace" not in nodes.items[0]["metadata"]
    namespaces = {n["metadata"]["name"] for n in (await kube.list(NAMESPACE)).items}
    assert {"default", "kube-system", "team-a"} <= namespaces

    with pytest.raises(ValueError):
        await kube.get(NODE, "n1", namespace="default")
    with pytest.raises(ValueError):
        await kube.create(POD, pod("p3", "team-a"), namespace="default")


async def test_generate_name(harness: Harness) -> None:
    created = await harness.kube.create(CONFIG_MAP, {"metadata": {"generateName": "cfg-"}, "data": {}})
    assert created["metadata"]["name"].startswith("cfg-")
    assert len(created["metadata"]["name"]) > len("cfg-")


async def test_label_selectors(harness: Harness) -> None:
    kube = harness.kube
    await kube.create(POD, pod("a", labels={"app": "web", "tier": "front"}))
    await kube.create(POD, pod("b", labels={"app": "web", "tier": "back"}))
    await kube.create(POD, pod("c", labels={"app": "db"}))
    await kube.create(POD, pod("d"))

    async def names(selector: str) -> list[str]:
        return sorted(p["metadata"]["name"] for p in (await kube.list(POD, label_selector=selector)).items)

    assert await names("app=web") == ["a", "b"]
    assert await names("app==web,tier=back") == ["b"]
    assert await names("app!=web") == ["c", "d"]
    assert await names("app in (db, web)") == ["a", "b", "c"]
    assert await names("app notin (web)") == ["c", "d"]
    assert await names("tier") == ["a", "b"]
    assert await names("!tier") == ["c", "d"]
    assert await names("app=web,tier notin (front)") == ["b"]
    assert await names("") == ["a", "b", "c", "d"]


async def test_field_selectors(harness: Harness) -> None:
    kube = harness.kube
    await kube.create(NAMESPACE, {"metadata": {"name": "other"}})
    await kube.create(POD, pod("bound", node="n1"))
    await kube.create(POD, pod("free"))
    await kube.create(POD, pod("elsewhere", "other", node="n2"))

    async def names(selector: str, namespace: str | None = None) -> list[str]:
        listing = await kube.list(POD, namespace=namespace, field_selector=selector)
        return sorted(p["metadata"]["name"] for p in listing.items)

    assert await names("metadata.name=bound") == ["bound"]
    assert await names("metadata.namespace=other") == ["elsewhere"]
    assert await names("spec.nodeName=n1") == ["bound"]
    assert await names("spec.nodeName=") == ["free"]
    assert await names("spec.nodeName!=") == ["bound", "elsewhere"]
    assert await names("spec.nodeName!=n1,metadata.namespace=default") == ["free"]
    assert await names("spec.nodeName=n2", namespace="default") == []
    both = await kube.list(POD, label_selector="", field_selector="metadata.name=free")
    assert [p["metadata"]["name"] for p in both.items] == ["free"]


async def test_stale_resource_version_conflicts(harness: Harness) -> None:
    kube = harness.kube
    first = await kube.create(CONFIG_MAP, {"metadata": {"name": "cfg"}, "data": {"v": "0"}})
    second = dict(first, data={"v": "1"})
    await kube.replace(CONFIG_MAP, second)

    stale = dict(first, data={"v": "2"})
    with pytest.raises(Conflict) as info:
        await kube.replace(CONFIG_MAP, stale)
    assert info.value.code == 409
    with pytest.raises(Conflict):
        await kube.patch(
            CONFIG_MAP,
            "cfg",
            {"metadata": {"resourceVersion": first["metadata"]["resourceVersion"]}, "data": {"v": "3"}},
        )
    # Without a resourceVersion the update is unconditional.
    unconditional = {"metadata": {"name": "cfg", "namespace": "default"}, "data": {"v": "4"}}
    assert (await kube.replace(CONFIG_MAP, unconditional))["data"] == {"v": "4"}


async def test_noop_update_keeps_version_and_generation_tracks_spec(harness: Harness) -> None:
    kube = harness.kube
    deploy = await kube.create(
        DEPLOYMENT, {"metadata": {"name": "d"}, "spec": {"replicas": 1}, "status": {"replicas": 5}}
    )
    assert deploy["metadata"]["generation"] == 1
    assert "status" not in deploy or deploy["status"] != {"replicas": 5}  # status is dropped on create
    same = await kube.replace(DEPLOYMENT, deploy)
    assert same["metadata"]["resourceVersion"] == deploy["metadata"]["resourceVersion"]
    relabelled = await kube.patch(DEPLOYMENT, "d", {"metadata": {"labels": {"x": "y"}}})
    assert relabelled["metadata"]["generation"] == 1
    scaled = await kube.patch(DEPLOYMENT, "d", {"spec": {"replicas": 3}})
    assert scaled["metadata"]["generation"] == 2


async def test_merge_and_json_patch(harness: Harness) -> None:
    kube = harness.kube
    await kube.create(CONFIG_MAP, {"metadata": {"name": "cfg", "labels": {"a": "1", "b": "2"}}, "data": {"k": "v"}})
    merged = await kube.patch(CONFIG_MAP, "cfg", {"metadata": {"labels": {"a": None, "c": "3"}}, "data": {"k2": "v2"}})
    assert merged["metadata"]["labels"] == {"b": "2", "c": "3"}
    assert merged["data"] == {"k": "v", "k2": "v2"}

    patched = await kube.patch(
        CONFIG_MAP,
        "cfg",
        [
            {"op": "test", "path": "/data/k", "value": "v"},
            {"op": "replace", "path": "/data/k", "value": "w"},
            {"op": "remove", "path": "/data/k2"},
            {"op": "add", "path": "/metadata/labels/d~1e", "value": "4"},
        ],
        patch_type=PatchType.JSON,
    )
    assert patched["data"] == {"k": "w"}
    assert patched["metadata"]["labels"]["d/e"] == "4"
    with pytest.raises(Invalid):
        await kube.patch(
            CONFIG_MAP, "cfg", [{"op": "test", "path": "/data/k", "value": "nope"}], patch_type=PatchType.JSON
        )
    with pytest.raises(NotFound):
        await kube.patch(CONFIG_MAP, "missing", {"data": {}})


async def test_server_side_apply(harness: Harness) -> None:
    kube = harness.kube
    desired = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cfg", "namespace": "default", "labels": {"owner": "one", "extra": "x"}},
        "data": {"shared": "1", "mine": "a"},
    }
    created = await kube.apply(CONFIG_MAP, desired, field_manager="one")
    assert created["data"] == {"shared": "1", "mine": "a"}
    managers = {m["manager"]: m for m in created["metadata"]["managedFields"]}
    assert managers["one"]["operation"] == "Apply"
    assert "f:data" in managers["one"]["fieldsV1"]

    # A second manager agreeing on a value is not a conflict; changing one is.
    await kube.apply(CONFIG_MAP, {"metadata": {"name": "cfg"}, "data": {"shared": "1"}}, field_manager="two")
    with pytest.raises(Conflict) as info:
        await kube.apply(CONFIG_MAP, {"metadata": {"name": "cfg"}, "data": {"mine": "b"}}, field_manager="two")
    assert info.value.code == 409
    forced = await kube.apply(
        CONFIG_MAP, {"metadata": {"name": "cfg"}, "data": {"shared": "1", "mine": "b"}}, field_manager="two", force=True
    )
    assert forced["data"]["mine"] == "b"

    # Omitting a field the applier alone owned removes it; shared fields stay.
    trimmed = await kube.apply(
        CONFIG_MAP,
        {"metadata": {"name": "cfg", "labels": {"owner": "one"}}, "data": {"shared": "1"}},
        field_manager="one",
    )
    assert trimmed["metadata"]["labels"] == {"owner": "one"}
    assert trimmed["data"] == {"shared": "1", "mine": "b"}  # "mine" now belongs to "two"

    # Apply through patch() is the same operation.
    again = await kube.patch(
        CONFIG_MAP,
        "cfg",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"shared": "1", "x": "y"}},
        patch_type=PatchType.APPLY,
        field_manager="one",
    )
    assert again["data"]["x"] == "y"


async def test_status_subresource(harness: Harness) -> None:
    kube = harness.kube
    created = await kube.create(POD, pod("p"))
    assert created["status"]["phase"] == "Pending"

    # Main-resource writes leave status alone.
    created["status"] = {"phase": "Running"}
    created["metadata"]["labels"] = {"x": "1"}
    replaced = await kube.replace(POD, created)
    assert replaced["status"]["phase"] == "Pending"
    assert replaced["metadata"]["labels"] == {"x": "1"}

    # Status writes change only status.
    replaced["status"] = {"phase": "Running", "podIP": "10.0.0.1"}
    replaced["metadata"]["labels"] = {"x": "2"}
    updated = await kube.update_status(POD, replaced)
    assert updated["status"] == {"phase": "Running", "podIP": "10.0.0.1"}
    assert updated["metadata"]["labels"] == {"x": "1"}
    with pytest.raises(Conflict):
        await kube.update_status(POD, replaced)  # stale resourceVersion

    patched = await kube.patch_status(POD, "p", {"status": {"phase": "Succeeded"}, "spec": {"nodeName": "n"}})
    assert patched["status"]["phase"] == "Succeeded"
    assert "nodeName" not in patched["spec"]

    # Resources without a status subresource answer 404 for status writes.
    await kube.create(CONFIG_MAP, {"metadata": {"name": "cfg"}})
    with pytest.raises(NotFound):
        await kube.patch_status(CONFIG_MAP, "cfg", {"status": {"x": 1}})


async def test_node_keeps_status_on_create(harness: Harness) -> None:
    node = await harness.kube.create(
        NODE, {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "8"}, "capacity": {"cpu": "8"}}}
    )
    assert node["status"]["allocatable"] == {"cpu": "8"}


async def test_pod_binding(harness: Harness) -> None:
    kube = harness.kube
    created = await kube.create(POD, pod("p"))
    await kube.bind("p", "node-1", namespace="default", pod_uid=created["metadata"]["uid"])
    bound = await kube.get(POD, "p")
    assert bound["spec"]["nodeName"] == "node-1"
    assert any(c["type"] == "PodScheduled" and c["status"] == "True" for c in bound["status"]["conditions"])
    with pytest.raises(Conflict):
        await kube.bind("p", "node-2")
    with pytest.raises(NotFound):
        await kube.bind("ghost", "node-1")
    await kube.create(POD, pod("q"))
    with pytest.raises(Conflict):
        await kube.bind("q", "node-1", pod_uid="00000000-0000-0000-0000-000000000000")


async def test_leases_optimistic_concurrency(harness: Harness) -> None:
    kube = harness.kube
    now = format_micro_time(harness.store.clock.now())
    lease = await kube.create(
        LEASE,
        {
            "metadata": {"name": "numaplane-leader", "namespace": "kube-system"},
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "acquireTime": now, "renewTime": now},
        },
    )
    assert lease["apiVersion"] == "coordination.k8s.io/v1"
    renewed = dict(lease, spec=dict(lease["spec"], renewTime=now, holderIdentity="a", leaseTransitions=0))
    ours = await kube.replace(LEASE, renewed)
    theirs = dict(lease, spec=dict(lease["spec"], holderIdentity="b"))
    with pytest.raises(Conflict):
        await kube.replace(LEASE, theirs)
    assert (await kube.get(LEASE, "numaplane-leader", namespace="kube-system"))["spec"]["holderIdentity"] == "a"
    assert ours["metadata"]["resourceVersion"] != lease["metadata"]["resourceVersion"]


async def test_events(harness: Harness) -> None:
    kube = harness.kube
    target = await kube.create(POD, pod("p"))
    event = make_event(target, reason="Scheduled", message="assigned to n1", now=harness.store.clock.now())
    created = await kube.create_event(event)
    assert created["involvedObject"]["uid"] == target["metadata"]["uid"]
    listed = await kube.list(
        EVENT,
        namespace="default",
        field_selector="involvedObject.name=p",
    )
    assert [e["reason"] for e in listed.items] == ["Scheduled"]


async def test_custom_resources_need_their_crd(harness: Harness) -> None:
    kube = harness.kube
    nrt = {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": "node-1"},
        "topologyPolicies": ["SingleNUMANodeContainerLevel"],
        "zones": [{"name": "node-0", "type": "Node", "resources": [{"name": "cpu", "capacity": "8"}]}],
    }
    with pytest.raises(NotFound):
        await kube.create(NODE_RESOURCE_TOPOLOGY, nrt)
    await kube.create(CRD, crd_for(NODE_RESOURCE_TOPOLOGY))
    created = await kube.create(NODE_RESOURCE_TOPOLOGY, nrt)
    assert "namespace" not in created["metadata"]
    assert created["zones"][0]["resources"][0]["capacity"] == "8"
    applied = await kube.apply(
        NODE_RESOURCE_TOPOLOGY,
        dict(nrt, zones=[{"name": "node-0", "type": "Node", "resources": [{"name": "cpu", "capacity": "16"}]}]),
        field_manager="exporter",
        force=True,
    )
    assert applied["zones"][0]["resources"][0]["capacity"] == "16"
    assert [n["metadata"]["name"] for n in (await kube.list(NODE_RESOURCE_TOPOLOGY)).items] == ["node-1"]

    await kube.delete(CRD, NODE_RESOURCE_TOPOLOGY.group_plural)
    with pytest.raises(NotFound):
        await kube.list(NODE_RESOURCE_TOPOLOGY)


async def test_finalizers_delay_deletion(harness: Harness) -> None:
    kube = harness.kube
    await kube.create(CONFIG_MAP, {"metadata": {"name": "cfg", "finalizers": ["numaplane.io/cleanup"]}})
    await kube.delete(CONFIG_MAP, "cfg")
    marked = await kube.get(CONFIG_MAP, "cfg")
    assert marked["metadata"]["deletionTimestamp"]
    await kube.patch(CONFIG_MAP, "cfg", {"metadata": {"finalizers": None}})
    with pytest.raises(NotFound):
        await kube.get(CONFIG_MAP, "cfg")


@pytest.mark.parametrize("kind", ["memory", "fakeapi"])
async def test_injected_faults_are_typed_errors(kind: str) -> None:
    async with contextlib.AsyncExitStack() as stack:
        if kind == "memory":
            faulty = FaultyKube(InMemoryKube())
            kube: KubePort = faulty
            faults = faulty.faults
        else:
            server = await stack.enter_async_context(FakeApiServer())
            kube, faults = server.port_client(), server.faults
        await kube.create(POD, pod("p"))
        faults.add(409, verb="create", resource="pods/binding")
        with pytest.raises(Conflict):
            await kube.bind("p", "n1")
        await kube.bind("p", "n1")  # the fault was used up
        faults.add(500, verb="patch", resource="pods/status", times=None)
        for _ in range(2):
            with pytest.raises(ServerError):
                await kube.patch_status(POD, "p", {"status": {"phase": "Running"}})
        faults.clear()
        faults.add(503, path=r"/namespaces/default/pods/p$")
        with pytest.raises(Unavailable):
            await kube.get(POD, "p")
        faults.add(410, verb="watch")
        with pytest.raises(Gone):
            await take(kube.watch(POD, resource_version="1"), 1)
        assert (await kube.get(POD, "p"))["spec"]["nodeName"] == "n1"
        await kube.close()


async def test_cluster_scoped_status_and_watch(harness: Harness) -> None:
    kube = harness.kube
    start = (await kube.list(NODE)).resource_version
    await kube.create(NODE, {"metadata": {"name": "n1"}, "status": {"capacity": {"cpu": "4"}}})
    node = await kube.get(NODE, "n1")
    node["status"]["allocatable"] = {"cpu": "3"}
    updated = await kube.update_status(NODE, node)
    assert updated["status"]["allocatable"] == {"cpu": "3"}
    patched = await kube.patch_status(NODE, "n1", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    assert patched["status"]["conditions"][0]["type"] == "Ready"
    events = await take(kube.watch(NODE, resource_version=start), 3)
    assert [e.type.value for e in events] == ["ADDED", "MODIFIED", "MODIFIED"]

    # A custom resource whose CRD declares the status subresource.
    widget = Resource("example.numaplane.io", "v1", "Widget", "widgets", namespaced=False, status_subresource=True)
    await kube.create(CRD, crd_for(widget))
    created = await kube.create(widget, {"metadata": {"name": "w"}, "spec": {"size": 1}, "status": {"ok": True}})
    assert "status" not in created  # dropped on create, as for any CR with a status subresource
    status = await kube.patch_status(widget, "w", {"status": {"ok": True}})
    assert status["status"] == {"ok": True} and status["metadata"]["generation"] == 1
