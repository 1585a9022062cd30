"""DeviceClass/claim selection with real CEL, per-zone DRA rows, and the scheduler's claim allocation (issue 28)."""

from __future__ import annotations

from typing import Any

import pytest

from numaplane.policy.dra import DRAError
from numaplane.policy.dra_select import (
    UnsupportedClaim,
    allocate_claims,
    allocated_devices,
    claim_requests,
    class_inventory,
    node_slice_devices,
    parse_device_class,
)

pytest.importorskip("celpy")

DRIVER = "accel.example.com"


def slice_(devices: dict[str, dict[str, Any]], generation: int = 1, pool: str = "node-a") -> dict[str, Any]:
    return {
        "metadata": {"name": f"{pool}-{generation}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": "node-a",
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1},
            "devices": [{"name": n, "attributes": a} for n, a in devices.items()],
        },
    }


def accel(numa: int | None, model: str = "a100") -> dict[str, Any]:
    attrs: dict[str, Any] = {"model": {"string": model}}
    if numa is not None:
        attrs["resource.kubernetes.io/numaNode"] = {"int": numa}
    return attrs


def device_class(name: str = "accel", expression: str | None = None) -> dict[str, Any]:
    expression = expression or f'device.driver == "{DRIVER}"'
    return {"metadata": {"name": name}, "spec": {"selectors": [{"cel": {"expression": expression}}]}}


def claim(requests: list[dict[str, Any]], **devices: Any) -> dict[str, Any]:
    return {"metadata": {"name": "c", "namespace": "ns"}, "spec": {"devices": {"requests": requests, **devices}}}


SLICES = [slice_({"a0": accel(0), "a1": accel(0, "h100"), "a2": accel(1), "a3": accel(1), "nonuma": accel(None)})]


def test_class_rows_count_selected_devices_per_zone_and_subtract_allocated_ones() -> None:
    devices = node_slice_devices(SLICES)
    classes = [
        parse_device_class(device_class()),
        parse_device_class(device_class("h100", 'device.attributes["accel.example.com"].model == "h100"')),
    ]
    allocated = allocated_devices(
        [
            {
                "status": {
                    "allocation": {
                        "devices": {"results": [{"request": "r", "driver": DRIVER, "pool": "node-a", "device": "a2"}]}
                    }
                }
            }
        ]
    )
    total, used = class_inventory(devices, classes, allocated)
    by_row: dict[tuple[str, tuple[int, ...]], int] = {}
    for row, ids, numa in total:
        by_row[(row, numa)] = by_row.get((row, numa), 0) + len(ids)
    assert by_row == {
        ("deviceclass.resource.kubernetes.io/accel", (0,)): 2,
        ("deviceclass.resource.kubernetes.io/accel", (1,)): 2,
        ("deviceclass.resource.kubernetes.io/h100", (0,)): 1,
    }
    assert used == [("deviceclass.resource.kubernetes.io/accel", (f"{DRIVER}/node-a/a2",), (1,))]


def test_only_the_newest_pool_generation_is_read() -> None:
    devices = node_slice_devices([slice_({"old": accel(0)}, 1), slice_({"new": accel(1)}, 2)])
    assert [d.name for d in devices] == ["new"]


def test_a_standard_numa_attribute_selector_picks_the_zone() -> None:
    classes = {"accel": parse_device_class(device_class())}
    requests = claim_requests(
        claim([{"name": "r", "exactly": {"deviceClassName": "accel", "count": 1, "selectors": [
            {"cel": {"expression": 'device.attributes["resource.kubernetes.io"].numaNode == 1'}}]}}]),
        classes,
    )  # fmt: skip
    devices = node_slice_devices(SLICES)
    got = allocate_claims({"c": requests}, devices, set(), [0, 1], spread=False)
    assert got is not None and [d.name for _, d in got["c"]] == ["a2"]


def test_allocation_takes_every_device_from_one_zone_in_the_given_order() -> None:
    classes = {"accel": parse_device_class(device_class())}
    requests = claim_requests(claim([{"name": "r", "exactly": {"deviceClassName": "accel", "count": 2}}]), classes)
    devices = node_slice_devices(SLICES)
    got = allocate_claims({"c": requests}, devices, set(), [1, 0], spread=False)
    assert got is not None and sorted(d.name for _, d in got["c"]) == ["a2", "a3"]
    # a0 taken: zone 0 has one free device, zone 1 is not offered: nothing under a one-zone policy
    taken = {(DRIVER, "node-a", "a0")}
    assert allocate_claims({"c": requests}, devices, taken, [0], spread=False) is None
    spread = allocate_claims({"c": requests}, devices, taken, [0], spread=True)
    assert spread is not None and sorted(d.name for _, d in spread["c"]) == ["a1", "a2"]


@pytest.mark.parametrize(
    ("requests", "extra", "path"),
    [
        (
            [{"name": "r", "firstAvailable": [{"name": "x", "deviceClassName": "accel"}]}],
            {},
            "requests[0].firstAvailable",
        ),
        (
            [{"name": "r", "exactly": {"deviceClassName": "accel", "allocationMode": "All"}}],
            {},
            "exactly.allocationMode",
        ),
        ([{"name": "r", "exactly": {"deviceClassName": "accel", "adminAccess": True}}], {}, "exactly.adminAccess"),
        ([{"name": "r", "exactly": {"deviceClassName": "nope"}}], {}, "exactly.deviceClassName"),
        (
            [{"name": "r", "exactly": {"deviceClassName": "accel"}}],
            {"constraints": [{"matchAttribute": "x/y"}]},
            "devices.constraints",
        ),
    ],
)
def test_unsupported_claims_are_named(requests: list[dict[str, Any]], extra: dict[str, Any], path: str) -> None:
    with pytest.raises(UnsupportedClaim) as info:
        claim_requests(claim(requests, **extra), {"accel": parse_device_class(device_class())})
    assert info.value.path.endswith(path) and info.value.path.startswith("ResourceClaim ns/c.spec.devices")


def test_bad_cel_and_bad_count_are_errors_naming_the_field() -> None:
    with pytest.raises(DRAError, match=r"DeviceClass bad.spec.selectors\[0\].cel.expression: not a CEL expression"):
        parse_device_class(device_class("bad", "device.driver =="))
    with pytest.raises(DRAError, match=r"requests\[0\].exactly.count: not an integer"):
        claim_requests(
            claim([{"name": "r", "exactly": {"deviceClassName": "accel", "count": 0}}]),
            {"accel": parse_device_class(device_class())},
        )


def test_a_selector_failing_on_a_device_does_not_select_it() -> None:
    cls = parse_device_class(device_class("m", 'device.attributes["other.example.com"].x == 1'))
    total, _ = class_inventory(node_slice_devices(SLICES), [cls], set())
    assert total == []
