"""The example DRA driver (``examples/dra-accel-driver``) without a kubelet: its state, checkpoint, CDI specs,
and both gRPC services over real unix sockets (the kubelet's side played by a gRPC client).

The end-to-end run with the real kubelet v1.36.2 and containerd is ``tests/realkube/test_real_dra_driver.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from accel_driver.kubeletapi.dra.v1 import api_pb2 as dra_pb2
from accel_driver.kubeletapi.dra.v1 import api_pb2_grpc as dra_grpc
from accel_driver.kubeletapi.pluginregistration.v1 import api_pb2 as reg_pb2
from accel_driver.kubeletapi.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from accel_driver.server import KubeletPlugin, resource_slice
from accel_driver.state import (
    CDI_KIND,
    CheckpointError,
    DriverConfigError,
    DriverState,
    PrepareError,
    decode_checkpoint,
    encode_checkpoint,
    parse_devices,
)

REPO = Path(__file__).resolve().parents[2]
INVENTORY = parse_devices("accel-0=0,accel-1=1,accel-2=1")


def allocated(
    uid: str, name: str, *devices: str, pool: str = "node-a", driver: str = "accel.example.com"
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": uid},
        "status": {
            "allocation": {
                "devices": {
                    "results": [{"request": "req", "driver": driver, "pool": pool, "device": d} for d in devices]
                }
            }
        },
    }


@pytest.fixture
def folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="accel-", dir="/tmp") as tmp:  # short: unix socket paths
        yield Path(tmp)


def new_state(folder: Path) -> DriverState:
    return DriverState(node="node-a", inventory=INVENTORY, checkpoint=folder / "state/cp.json", cdi_dir=folder / "cdi")


def test_parse_devices_and_bad_inventories_are_typed_errors_naming_the_entry() -> None:
    assert [(d.name, d.numa_node) for d in INVENTORY] == [("accel-0", 0), ("accel-1", 1), ("accel-2", 1)]
    for text, named in [
        ("", "no device"),
        ("accel-0", "'accel-0' is not <name>=<NUMA node>"),
        ("Accel_0=0", "'Accel_0' is not a DNS label"),
        ("accel-0=-1", "'-1' of accel-0"),
        ("accel-0=x", "'x' of accel-0"),
        ("accel-0=0,accel-0=1", "accel-0 is given twice"),
    ]:
        with pytest.raises(DriverConfigError, match="--devices") as caught:
            parse_devices(text)
        assert named in str(caught.value), (text, caught.value)
    with pytest.raises(DriverConfigError, match="--node-name"):
        DriverState(node="Bad_Node", inventory=INVENTORY, checkpoint=Path("/nonexistent/cp"), cdi_dir=Path("/tmp"))


def test_prepare_writes_cdi_spec_and_checkpoint_and_both_are_idempotent(folder: Path) -> None:
    state = new_state(folder)
    claim = allocated("u1", "c1", "accel-1")
    done = state.prepare("u1", "ns", "c1", claim)
    assert [(d.device, d.pool, d.request_names, d.cdi_device_ids) for d in done.devices] == [
        ("accel-1", "node-a", ("req",), (f"{CDI_KIND}=u1-accel-1",))
    ]
    spec = json.loads(state.spec_path("u1").read_text())
    assert spec["kind"] == CDI_KIND and spec["cdiVersion"]
    assert spec["devices"] == [
        {"name": "u1-accel-1", "containerEdits": {"env": ["ACCEL_DEVICE_ACCEL_1=1", "ACCEL_CLAIM=ns/c1"]}}
    ]
    # repeated (the kubelet retries, restarts): the same answer, even with the API object gone
    assert state.prepare("u1", "ns", "c1", None) == done
    state.spec_path("u1").unlink()  # lost: rewritten by the repeated prepare
    assert state.prepare("u1", "ns", "c1", None) == done and state.spec_path("u1").exists()
    assert new_state(folder).claims == {"u1": done}  # the checkpoint has it
    # unprepare: spec and record gone; repeated: nothing to do, not an error
    assert state.unprepare("u1") == done
    assert not state.spec_path("u1").exists() and state.claims == {}
    assert state.unprepare("u1") is None
    assert new_state(folder).claims == {}


def test_checkpoint_round_trip_and_corruption_is_a_typed_error(folder: Path) -> None:
    state = new_state(folder)
    a = state.prepare("u1", "ns", "c1", allocated("u1", "c1", "accel-0", "accel-2"))
    b = state.prepare("u2", "ns", "c2", allocated("u2", "c2", "accel-1"))
    text = encode_checkpoint({"u1": a, "u2": b})
    assert decode_checkpoint(text, "x") == {"u1": a, "u2": b}
    assert state.checkpoint.read_text() == text
    # a restarted driver has the same claims, and rewrites a CDI spec lost with a crash
    state.spec_path("u2").unlink()
    again = new_state(folder)
    assert again.claims == {"u1": a, "u2": b} and again.spec_path("u2").exists()
    doc = json.loads(text)
    doc["claims"]["u1"]["devices"][0]["device"] = "accel-1"
    for broken, why in [
        (json.dumps(doc), "checksum mismatch"),
        (text[: len(text) // 2], "cannot be read"),
        (json.dumps({"version": 99}), "not a version 1"),
    ]:
        with pytest.raises(CheckpointError, match=why) as caught:
            decode_checkpoint(broken, str(state.checkpoint))
        assert str(state.checkpoint) in str(caught.value)
    # a checkpoint naming a device the inventory lost
    with pytest.raises(CheckpointError, match="not in --devices"):
        DriverState(node="node-a", inventory=INVENTORY[:1], checkpoint=state.checkpoint, cdi_dir=folder / "cdi")


def test_bad_claims_are_refused_per_claim_with_the_reason(folder: Path) -> None:
    state = new_state(folder)
    state.prepare("u1", "ns", "c1", allocated("u1", "c1", "accel-1"))
    cases = [
        (("", "ns", "c9", None), "lacks the claim's uid"),
        (("u9", "ns", "c9", None), "not found in the API"),
        (("u9", "ns", "c9", allocated("other", "c9", "accel-0")), "has uid other (it was recreated)"),
        (("u9", "ns", "c9", {"metadata": {"uid": "u9"}, "status": {}}), "not allocated"),
        (("u9", "ns", "c9", allocated("u9", "c9", "gpu-0", driver="gpu.example.com")), "no device of driver"),
        (("u9", "ns", "c9", allocated("u9", "c9", "accel-7")), "'accel-7' is not a device of this node"),
        (("u9", "ns", "c9", allocated("u9", "c9", "accel-0", pool="node-b")), "of pool 'node-b'"),
        (("u9", "ns", "c9", allocated("u9", "c9", "accel-1")), "accel-1 is prepared for claim ns/c1"),
    ]
    for args, why in cases:
        with pytest.raises(PrepareError, match="claim ns/c9") as caught:
            state.prepare(*args)
        assert why in str(caught.value), (args, caught.value)
    assert list(state.claims) == ["u1"]  # nothing recorded by a refusal
    assert sorted(p.name for p in state.cdi_dir.iterdir()) == ["accel.example.com-u1.json"]
    with pytest.raises(PrepareError, match="lacks the claim's uid"):
        state.unprepare("")


def test_resource_slice_carries_the_numa_attribute_and_the_node_owner() -> None:
    doc = resource_slice("node-a", "uid-n", "node-a", INVENTORY)
    assert doc["spec"]["pool"] == {"name": "node-a", "generation": 1, "resourceSliceCount": 1}
    assert [(d["name"], d["attributes"]["resource.kubernetes.io/numaNode"]) for d in doc["spec"]["devices"]] == [
        ("accel-0", {"int": 0}),
        ("accel-1", {"int": 1}),
        ("accel-2", {"int": 1}),
    ]
    assert doc["metadata"]["ownerReferences"][0]["uid"] == "uid-n"


def test_grpc_registration_and_prepare_over_unix_sockets(folder: Path) -> None:
    """The kubelet's calls over real sockets: GetInfo names the DRA endpoint and ``v1.DRAPlugin``; a batch
    with one good and one bad claim answers both; unprepare twice is fine."""
    claims = {("ns", "c1"): allocated("u1", "c1", "accel-1")}
    plugin = KubeletPlugin(
        new_state(folder),
        lambda ns, name: claims.get((ns, name)),
        registry_dir=folder / "plugins_registry",
        plugins_dir=folder / "plugins",
    )
    plugin.start()
    try:
        with grpc.insecure_channel(f"unix://{plugin.registration_socket}") as channel:
            info = reg_grpc.RegistrationStub(channel).GetInfo(reg_pb2.InfoRequest(), timeout=5)
            assert (info.type, info.name, info.endpoint, list(info.supported_versions)) == (
                "DRAPlugin",
                "accel.example.com",
                str(folder / "plugins/accel.example.com/dra.sock"),
                ["v1.DRAPlugin"],
            )
            reg_grpc.RegistrationStub(channel).NotifyRegistrationStatus(
                reg_pb2.RegistrationStatus(plugin_registered=True), timeout=5
            )
            assert plugin.registration.registered.is_set()
        with grpc.insecure_channel(f"unix://{info.endpoint}") as channel:
            stub = dra_grpc.DRAPluginStub(channel)
            batch = [
                dra_pb2.Claim(namespace="ns", uid="u1", name="c1"),
                dra_pb2.Claim(namespace="ns", uid="u2", name="c2"),
            ]
            got = stub.NodePrepareResources(dra_pb2.NodePrepareResourcesRequest(claims=batch), timeout=5)
            assert got.claims["u1"].error == ""
            assert [(d.device_name, list(d.cdi_device_ids)) for d in got.claims["u1"].devices] == [
                ("accel-1", ["accel.example.com/accel=u1-accel-1"])
            ]
            assert "not found in the API" in got.claims["u2"].error
            for _ in range(2):
                gone = stub.NodeUnprepareResources(dra_pb2.NodeUnprepareResourcesRequest(claims=batch[:1]), timeout=5)
                assert gone.claims["u1"].error == ""
        assert plugin.dra.state.claims == {}
    finally:
        plugin.stop()
    assert not plugin.registration_socket.exists() and not plugin.dra_socket.exists()


def test_cli_bad_inventory_is_one_line_exit_2() -> None:
    got = subprocess.run(
        [sys.executable, "-m", "accel_driver", "--node-name=n", "--devices=accel-0=zero"],
        cwd=REPO / "examples/dra-accel-driver",
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert got.returncode == 2, got.stderr
    assert got.stderr.strip().splitlines() == [
        "accel_driver: --devices: NUMA node 'zero' of accel-0 is not a non-negative integer"
    ]
