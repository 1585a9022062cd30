"""Pod-set fingerprint: upstream vectors, check outcomes, pod selection, tracing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from numaplane.nrt.errors import FingerprintIncompatibleVersion, FingerprintMalformed, FingerprintMismatch
from numaplane.nrt.fingerprint import (
    Fingerprinter,
    check_fingerprint,
    compute_fingerprint,
    has_exclusive_resources,
    parse_method,
    select_pods,
    verify_fingerprint,
)
from numaplane.nrt.podresources import ContainerDevices, ContainerMemory, ContainerResources, PodResources


def _pods259(shared_dir: Path) -> list[tuple[str, str]]:
    data = json.loads((shared_dir / "conformance/data/podfingerprint-pods.json").read_text())
    return [(p["namespace"], p["name"]) for p in data]


def test_upstream_vectors(shared_dir: Path) -> None:
    assert compute_fingerprint([("namespace1", "pod1")]) == "pfp0v0019e0420efb37746c6"
    assert compute_fingerprint([("default", "test-pod-0")]) == "pfp0v001fe53c4dbd2c5f4a0"
    assert compute_fingerprint([]) == "pfp0v001ef46db3751d8e999"
    assert compute_fingerprint([("ns1", "pod1"), ("ns2", "pod2")]) == "pfp0v001d4294c0b68c76415"
    assert compute_fingerprint(_pods259(shared_dir)) == "pfp0v001e477a4e3b2fc0ec6"


def test_duplicates_count() -> None:
    one = compute_fingerprint([("a", "b")])
    assert compute_fingerprint([("a", "b"), ("a", "b")]) != one


@pytest.mark.parametrize(
    ("signature", "outcome", "error"),
    [
        ("x", "malformed", FingerprintMalformed),
        ("pfp0v0019e0420e", "malformed", FingerprintMalformed),  # 15 chars
        ("wrngv0019e0420efb37746c6", "malformed", FingerprintMalformed),
        ("pfp0v0029e0420efb37746c6", "incompatible_version", FingerprintIncompatibleVersion),
        ("pfp0v0019e0420efb37746c7", "signature_mismatch", FingerprintMismatch),
        ("pfp0v0019E0420EFB37746C6", "signature_mismatch", FingerprintMismatch),
        ("pfp0v0019e0420efb37746c6", "ok", None),
    ],
)
def test_check(signature: str, outcome: str, error: type[Exception] | None) -> None:
    pods = [("namespace1", "pod1")]
    assert check_fingerprint(signature, pods) == outcome
    fp = Fingerprinter()
    fp.add_all(pods)
    assert fp.check(signature) == outcome
    if error is None:
        verify_fingerprint(signature, pods)
    else:
        with pytest.raises(error):
            verify_fingerprint(signature, pods)


def test_traced_status() -> None:
    fp = Fingerprinter(traced=True, node_name="worker-0")
    fp.add("ns2", "pod2")
    fp.add("ns1", "pod1")
    status = fp.status(expected="pfp0v001d4294c0b68c76415")
    assert status.to_dict() == {
        "fingerprintExpected": "pfp0v001d4294c0b68c76415",
        "fingerprintComputed": "pfp0v001d4294c0b68c76415",
        "pods": [{"namespace": "ns2", "name": "pod2"}, {"namespace": "ns1", "name": "pod1"}],
        "nodeName": "worker-0",
    }
    untraced = Fingerprinter()
    untraced.add("ns1", "pod1")
    assert untraced.status().pods == ()


def test_method_parsing() -> None:
    assert parse_method("ALL") == "all"
    assert parse_method("With-Exclusive-Resources") == "with-exclusive-resources"
    with pytest.raises(ValueError):
        parse_method("some")


def test_exclusive_selection() -> None:
    shared = PodResources("be", "ns", (ContainerResources("c"),))
    cpus = PodResources("gu", "ns", (ContainerResources("c", cpu_ids=(3,)),))
    memory = PodResources("mem", "ns", (ContainerResources("c", memory=(ContainerMemory("memory", 1 << 20, (0,)),)),))
    no_numa_dev = PodResources("d0", "ns", (ContainerResources("c", devices=(ContainerDevices("x/y", ("a",)),)),))
    dev = PodResources("d1", "ns", (ContainerResources("c", devices=(ContainerDevices("x/y", ("a",), (1,)),)),))
    neg = PodResources("d2", "ns", (ContainerResources("c", devices=(ContainerDevices("x/y", ("a",), (-1,)),)),))
    pod_level = PodResources("pl", "ns", (), cpu_ids=(1,))
    pods = [shared, cpus, memory, no_numa_dev, dev, neg, pod_level]
    assert [has_exclusive_resources(p) for p in pods] == [False, True, True, False, True, False, True]
    assert select_pods(pods, "with-exclusive-resources") == [("ns", "gu"), ("ns", "mem"), ("ns", "d1"), ("ns", "pl")]
    assert len(select_pods(pods, "all")) == 7
