"""The real kubelet v1.36 PodResources responses decode with our proto, byte-exactly, and feed the zones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf import json_format
from google.protobuf.message import Message

from numaplane.grpcapi.podresources.convert import (
    allocatable_from_pb,
    allocatable_to_pb,
    list_from_pb,
    list_to_pb,
    pod_from_pb,
    pod_to_pb,
)
from numaplane.grpcapi.podresources.v1 import api_pb2 as pb
from numaplane.nrt.podresources import (
    AllocatableResources,
    ClaimResource,
    ContainerDevices,
    ContainerMemory,
    ContainerResources,
    DynamicResource,
    PodResources,
    allocatable_from_dict,
    list_from_dict,
    pod_from_dict,
)
from numaplane.nrt.zones import MachineView, NUMANodeView, compute_zones
from numaplane.topology.cpuset import CPUSet

CAPTURES = {
    "list": pb.ListPodResourcesResponse,
    "get-allocatable-resources": pb.AllocatableResourcesResponse,
    "get": pb.GetPodResourcesResponse,
}


def _load(shared_dir: Path, name: str) -> tuple[bytes, dict[str, object]]:
    folder = shared_dir / "wire/captures/podresources"
    return (folder / f"{name}.response.bin").read_bytes(), json.loads((folder / f"{name}.response.json").read_text())


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_capture_decodes_and_reencodes_byte_exactly(shared_dir: Path, name: str) -> None:
    raw, twin = _load(shared_dir, name)
    message: Message = CAPTURES[name].FromString(raw)
    assert message.SerializeToString() == raw
    assert json.loads(json_format.MessageToJson(message)) == twin


def test_pure_values_agree_with_json_twin(shared_dir: Path) -> None:
    raw, twin = _load(shared_dir, "list")
    pods = list_from_pb(pb.ListPodResourcesResponse.FromString(raw))
    assert pods == list_from_dict(twin)
    assert pods == (
        PodResources("gu-ncc-true", "numaplane-wire", (ContainerResources("main", cpu_ids=(1,)),)),
        PodResources("be-ncc-true", "numaplane-wire", (ContainerResources("main"),)),
    )
    assert list_to_pb(pods).SerializeToString() == raw

    raw, twin = _load(shared_dir, "get-allocatable-resources")
    allocatable = allocatable_from_pb(pb.AllocatableResourcesResponse.FromString(raw))
    assert allocatable == allocatable_from_dict(twin) == AllocatableResources(cpu_ids=(1,))
    assert allocatable_to_pb(allocatable).SerializeToString() == raw

    raw, twin = _load(shared_dir, "get")
    pod = pod_from_pb(pb.GetPodResourcesResponse.FromString(raw).pod_resources)
    assert pod == pod_from_dict(twin["podResources"]) == pods[0]


def test_zones_from_the_real_node(shared_dir: Path) -> None:
    """rig-node: 2 CPUs on one NUMA node, CPU 0 reserved, the Guaranteed pod holds CPU 1."""
    pods = list_from_pb(pb.ListPodResourcesResponse.FromString(_load(shared_dir, "list")[0]))
    allocatable = allocatable_from_pb(
        pb.AllocatableResourcesResponse.FromString(_load(shared_dir, "get-allocatable-resources")[0])
    )
    machine = MachineView((NUMANodeView(0, CPUSet.parse("0-1"), {0: 10}),))
    zones = compute_zones("rig-node", machine, allocatable, pods)
    assert [z.to_dict() for z in zones] == [
        {
            "name": "node-0",
            "type": "Node",
            "costs": [{"name": "node-0", "value": 10}],
            "resources": [{"name": "cpu", "capacity": "2", "allocatable": "1", "available": "0"}],
        }
    ]


def test_every_field_round_trips() -> None:
    pod = PodResources(
        "p",
        "ns",
        (
            ContainerResources(
                "c",
                (ContainerDevices("vendor/gpu", ("g0", "g1"), (0, 1)), ContainerDevices("vendor/x", ("x",))),
                (3, 1, 2),
                (ContainerMemory("memory", 1 << 30, (0,)), ContainerMemory("hugepages-2Mi", 4 << 20, ())),
                (
                    DynamicResource(
                        "claim",
                        "ns",
                        (ClaimResource(("vendor.com/gpu=g0",), "drv", "pool", "dev", "share-1"), ClaimResource()),
                    ),
                ),
            ),
        ),
        cpu_ids=(1, 2, 3),
        memory=(ContainerMemory("memory", 1 << 30, (0,)),),
    )
    message = pod_to_pb(pod)
    again = pod_from_pb(pb.PodResources.FromString(message.SerializeToString()))
    assert again == pod
    assert again.containers[0].dynamic_resources[0].claim_resources[1].share_id is None
    # the JSON mapping (camelCase, int64 as strings) parses to the same values
    assert pod_from_dict(json.loads(json_format.MessageToJson(message))) == pod
