"""The exporter's DRA rows (issue 28 item 2): per-zone devices of each DeviceClass from the node's
ResourceSlices, minus the devices of allocated ResourceClaims, published through the fake API server."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from exp_helpers import NODE, assert_valid, zone_row
from test_exp_e2e import seed, wait_object

from numaplane.exporter.daemon import Exporter
from numaplane.exporter.errors import ExporterConfigError
from numaplane.exporter.options import ExporterOptions
from numaplane.grpcapi.podresources.server import PodResourcesServer
from numaplane.kube.resources import DEVICE_CLASS, RESOURCE_CLAIM, RESOURCE_SLICE
from numaplane.testing.fakeapi import FakeApiServer

pytest.importorskip("celpy")

DRIVER = "accel.example.com"
ROW = "deviceclass.resource.kubernetes.io/accel"


@pytest_asyncio.fixture
async def api() -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer() as server:
        yield server


def node_slice(
    node: str = NODE, devices: dict[str, int] | None = None, numa_name: str = "resource.kubernetes.io/numaNode"
) -> dict[str, Any]:
    devices = devices if devices is not None else {"a0": 0, "a1": 0, "a2": 1}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-accel"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": n, "attributes": {numa_name: {"int": z}}} for n, z in devices.items()],
        },
    }


def allocated(name: str, device: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "accel"}}]}},
        "status": {
            "allocation": {"devices": {"results": [{"request": "r", "driver": DRIVER, "pool": NODE, "device": device}]}}
        },
    }


async def create_allocated(api: FakeApiServer, name: str, device: str) -> None:
    """Create the claim, then write its allocation through the status subresource (as a scheduler does)."""
    doc = allocated(name, device)
    created = await api.store.create(RESOURCE_CLAIM, {k: v for k, v in doc.items() if k != "status"})
    await api.store.update_status(RESOURCE_CLAIM, {**created, "status": doc["status"]})


def row(obj: dict[str, Any], zone: str) -> tuple[str, str]:
    found = zone_row(obj, zone, ROW)
    return str(found["allocatable"]), str(found["available"])


async def test_dra_rows_follow_slices_classes_and_allocated_claims(
    api: FakeApiServer, podres_server: PodResourcesServer, base_options: ExporterOptions
) -> None:
    await seed(api.store)
    await api.store.create(RESOURCE_SLICE, node_slice())
    await api.store.create(RESOURCE_SLICE, node_slice("other-node", {"b0": 1}))  # another node's: not counted
    await api.store.create(
        DEVICE_CLASS,
        {
            "metadata": {"name": "accel"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
    )
    await create_allocated(api, "c1", "a1")
    options = dataclasses.replace(base_options, dra=True, period_seconds=0.2, max_events_per_second=50.0)
    exporter = Exporter(options, kube=api.port_client(), initial_sync_seconds=1.0)
    await exporter.start()
    try:
        obj = await wait_object(api, lambda o: any(r["name"] == ROW for z in o["zones"] for r in z["resources"]))
        assert_valid(obj)
        assert row(obj, "node-0") == ("2", "1") and row(obj, "node-1") == ("1", "1")
        # a new allocation on NUMA 1 is charged without a kubelet change
        await create_allocated(api, "c2", "a2")
        obj = await wait_object(api, lambda o: row(o, "node-1") == ("1", "0"))
        # a class selecting nothing on this node publishes no row; a deleted claim frees its device
        await api.store.delete(RESOURCE_CLAIM, "c1", namespace="default")
        obj = await wait_object(api, lambda o: row(o, "node-0") == ("2", "2"))
        assert obj["zones"][0]["resources"] == sorted(obj["zones"][0]["resources"], key=lambda r: r["name"])
    finally:
        await exporter.close()


async def test_a_driver_numa_attribute_is_read_when_configured(
    api: FakeApiServer, podres_server: PodResourcesServer, base_options: ExporterOptions
) -> None:
    await seed(api.store)
    await api.store.create(RESOURCE_SLICE, node_slice(devices={"a0": 1}, numa_name="numaNode"))
    await api.store.create(
        DEVICE_CLASS,
        {
            "metadata": {"name": "accel"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
    )
    options = dataclasses.replace(
        base_options, dra=True, dra_numa_attributes=(f"{DRIVER}/numaNode",), period_seconds=0.2
    )
    exporter = Exporter(options, kube=api.port_client(), initial_sync_seconds=1.0)
    await exporter.start()
    try:
        obj = await wait_object(api, lambda o: any(r["name"] == ROW for z in o["zones"] for r in z["resources"]))
        assert row(obj, "node-1") == ("1", "1")
        assert all(r["name"] != ROW for r in obj["zones"][0]["resources"])
    finally:
        await exporter.close()


async def test_dra_without_the_api_server_or_with_an_unqualified_attribute_is_refused(
    base_options: ExporterOptions,
) -> None:
    with pytest.raises(ExporterConfigError, match="--dra needs the API server"):
        Exporter(dataclasses.replace(base_options, dra=True))
    with pytest.raises(ExporterConfigError, match="--dra-numa-attribute 'numaNode'"):
        dataclasses.replace(base_options, dra=True, dra_numa_attributes=("numaNode",))
