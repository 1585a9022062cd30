"""The machine model: JSON document round trip and the derived views."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numaplane.topology.cpuset import CPUSet
from numaplane.topology.document import topology_from_dict, topology_to_dict
from numaplane.topology.errors import TopologyFormatError
from numaplane.topology.model import CPUInfo, HugePages, NUMANode, PCIDevice, Topology, synthetic


@st.composite
def topologies(draw: st.DrawFn) -> Topology:
    n = draw(st.integers(min_value=1, max_value=24))
    ids = sorted(draw(st.sets(st.integers(min_value=0, max_value=200), min_size=n, max_size=n)))
    numa_ids = draw(st.lists(st.sampled_from([0, 1, 2, 5, 250]), min_size=1, max_size=3, unique=True))
    cpus = []
    for cpu in ids:
        cpus.append(
            CPUInfo(
                cpu=cpu,
                core=draw(st.sampled_from(ids)),
                socket=draw(st.sampled_from([0, 1, 36, 8442])),
                numa=draw(st.sampled_from(numa_ids)),
                uncore=draw(st.integers(0, 3)),
                die=draw(st.integers(0, 1)),
                online=draw(st.booleans()),
                raw_core_id=draw(st.none() | st.integers(-1, 30)),
                raw_socket_id=draw(st.none() | st.just(-1)),
                core_type=draw(st.none() | st.sampled_from(["P", "E"])),
            )
        )
    nodes = [
        NUMANode(
            id=nid,
            cpus=CPUSet(c.cpu for c in cpus if c.online and c.numa == nid),
            memory_total_bytes=draw(st.integers(0, 1 << 40)),
            memory_free_bytes=draw(st.none() | st.integers(0, 1 << 40)),
            hugepages=tuple(
                HugePages(size, draw(st.integers(0, 4096)), draw(st.none() | st.integers(0, 10)))
                for size in draw(st.lists(st.sampled_from([2 << 20, 1 << 30, 64 << 10]), unique=True, max_size=3))
            ),
            distances={m: 10 if m == nid else draw(st.integers(11, 80)) for m in numa_ids},
            online=draw(st.booleans()),
        )
        for nid in sorted(numa_ids)
    ]
    devices = tuple(
        PCIDevice(
            address=f"0000:{i:02x}:00.0",
            vendor=draw(st.sampled_from(["8086", "15b3", ""])),
            device="abcd",
            class_code=draw(st.sampled_from(["020000", "010802", "030000"])),
            numa_node=draw(st.sampled_from([-1, *numa_ids])),
            driver=draw(st.none() | st.just("ice")),
            sriov_totalvfs=draw(st.none() | st.integers(0, 64)),
            physfn=draw(st.none() | st.just("0000:01:00.0")),
        )
        for i in range(draw(st.integers(0, 4)))
    )
    return Topology(
        cpus=tuple(cpus),
        numa_nodes=tuple(nodes),
        pci_devices=devices,
        isolated_cpus=CPUSet(draw(st.sets(st.sampled_from(ids), max_size=3))),
        name=draw(st.text(max_size=10)),
        attributes={"warnings": draw(st.lists(st.text(max_size=10), max_size=2))},
    )


@settings(max_examples=60, deadline=None)
@given(topologies())
def test_document_round_trip(t: Topology) -> None:
    doc = topology_to_dict(t)
    text = json.dumps(doc)
    again = topology_from_dict(json.loads(text))
    assert topology_to_dict(again) == doc
    assert again.cpus == t.cpus
    assert again.pci_devices == t.pci_devices
    assert again.numa_nodes == t.numa_nodes


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"sockets": 1, "threads_per_core": 1}, {"sockets": 4, "numa_per_socket": 2, "hugepages_2m_per_numa": 8}],
)
def test_synthetic_round_trip(kwargs: dict[str, Any]) -> None:
    t = synthetic(**kwargs)
    assert topology_to_dict(topology_from_dict(json.loads(json.dumps(topology_to_dict(t))))) == topology_to_dict(t)


def test_views_cover_online_cpus_only() -> None:
    cpus = (
        CPUInfo(0, core=0, socket=0, numa=0),
        CPUInfo(1, core=0, socket=0, numa=0),
        CPUInfo(2, core=2, socket=1, numa=1, online=False),
    )
    t = Topology(cpus=cpus)
    assert t.num_cpus == 2 and t.num_cores == 1 and t.num_sockets == 1
    assert t.offline_cpus == CPUSet([2]) and t.all_cpus == CPUSet([0, 1])
    assert t.threads_per_core == 2 and t.numa_ids == (0,)


@pytest.mark.parametrize(
    ("doc", "where"),
    [
        ([], "$"),
        ({}, "$.cpus"),
        ({"cpus": [{"cpu": 0, "core": 0, "socket": 0}]}, "$.cpus[0].numa"),
        ({"cpus": [{"cpu": 0, "core": 0, "socket": 0, "numa": "x"}]}, "$.cpus[0].numa"),
        ({"cpus": [], "numa_nodes": [{"id": 0, "cpus": "3-1"}]}, "$.numa_nodes[0].cpus"),
        ({"cpus": [], "isolated_cpus": "junk"}, "$.isolated_cpus"),
        ({"cpus": [], "pci_devices": [{"vendor": "8086"}]}, "$.pci_devices[0].address"),
    ],
)
def test_from_dict_errors_name_the_field(doc: Any, where: str) -> None:
    with pytest.raises(TopologyFormatError) as info:
        topology_from_dict(doc)
    assert info.value.path == where
