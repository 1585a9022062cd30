"""One scan: inputs → object; filters; and every kind of bad input as a typed error."""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import grpc
import grpc.aio
import pytest
from exp_helpers import ALLOCATABLE, NODE, GiB, assert_valid, attribute, pod, zone_row

from numaplane.exporter.errors import (
    ExporterError,
    KubeletConfigError,
    MalformedPodResources,
    PodResourcesSourceError,
    SysfsSourceError,
)
from numaplane.exporter.options import ExporterOptions, PodExclude
from numaplane.exporter.scan import MANAGED_BY, MANAGED_BY_LABEL, Scanner
from numaplane.exporter.sources import FakeDirPodResources, GrpcPodResources, MachineSource, open_podresources
from numaplane.grpcapi.podresources.client import MAX_MESSAGE_BYTES
from numaplane.grpcapi.podresources.server import PodResourcesServer, StaticProvider
from numaplane.nrt.fingerprint import compute_fingerprint
from numaplane.nrt.podresources import AllocatableResources, PodResources
from numaplane.topology.cpuset import CPUSet


class Source:
    """An in-process PodResources source; ``fail`` makes the next calls raise."""

    description = "test"

    def __init__(self, allocatable: AllocatableResources, pods: Sequence[PodResources]) -> None:
        self.alloc, self.pods = allocatable, list(pods)
        self.fail: ExporterError | None = None

    async def list_pods(self) -> Sequence[PodResources]:
        if self.fail is not None:
            raise self.fail
        return self.pods

    async def allocatable(self) -> AllocatableResources:
        if self.fail is not None:
            raise self.fail
        return self.alloc

    async def close(self) -> None:
        return None


PODS = [
    pod("gu", cpus=(1, 2), memory_gib=1),
    pod("db", "prod", cpus=(5,), memory_gib=2, numa=1, nic="n1"),
    pod("shared"),
    pod("done", "jobs", cpus=(3,)),
]


async def test_scan_builds_a_valid_object(base_options: ExporterOptions) -> None:
    scanner = Scanner(base_options, Source(ALLOCATABLE, PODS))
    result = await scanner.scan()
    obj = result.nrt.to_dict()
    assert_valid(obj)
    assert obj["metadata"]["name"] == NODE
    assert obj["metadata"]["labels"] == {MANAGED_BY_LABEL: MANAGED_BY}
    assert zone_row(obj, "node-0", "cpu") == {"name": "cpu", "capacity": "4", "allocatable": "3", "available": "0"}
    assert zone_row(obj, "node-1", "cpu")["available"] == "2"
    assert zone_row(obj, "node-1", "memory")["available"] == str(2 * GiB)
    assert zone_row(obj, "node-1", "vendor/nic")["available"] == "0"
    assert zone_row(obj, "node-0", "vendor/nic")["available"] == "1"
    # the fingerprint covers exclusive-resource pods only (method with-exclusive-resources)
    expected = compute_fingerprint([("default", "gu"), ("prod", "db"), ("jobs", "done")])
    assert attribute(obj, "nodeTopologyPodsFingerprint") == expected == result.fingerprint
    assert obj["metadata"]["annotations"]["topology.node.k8s.io/fingerprint"] == expected
    assert attribute(obj, "nodeTopologyPodsFingerprintMethod") == "with-exclusive-resources"
    assert attribute(obj, "topologyManagerPolicy") == "single-numa-node"
    assert attribute(obj, "topologyManagerScope") == "container"
    assert "ownerReferences" not in obj["metadata"]


async def test_excluded_and_terminal_pods_count_nowhere(base_options: ExporterOptions) -> None:
    options = dataclasses.replace(base_options, pod_excludes=(PodExclude.parse("prod/*"),))
    scanner = Scanner(options, Source(ALLOCATABLE, PODS), terminal_pods=lambda: {("jobs", "done")})
    result = await scanner.scan()
    obj = result.nrt.to_dict()
    assert (result.pods_listed, result.pods_excluded, result.pods_terminal) == (4, 1, 1)
    assert zone_row(obj, "node-1", "cpu")["available"] == "3"
    assert zone_row(obj, "node-0", "cpu")["available"] == "1"
    assert result.fingerprint == compute_fingerprint([("default", "gu")])
    # with the filter off, the terminal pod counts again
    options = dataclasses.replace(base_options, exclude_terminal_pods=False)
    result = await Scanner(options, Source(ALLOCATABLE, PODS), terminal_pods=lambda: {("jobs", "done")}).scan()
    assert result.pods_terminal == 0


async def test_watch_namespace_fingerprint_method_and_resource_exclude(base_options: ExporterOptions) -> None:
    options = dataclasses.replace(
        base_options, watch_namespace="prod", fingerprint_method="all", resource_exclude={"*": ["vendor/nic"]}
    )
    result = await Scanner(options, Source(ALLOCATABLE, PODS)).scan()
    obj = result.nrt.to_dict()
    assert zone_row(obj, "node-0", "cpu")["available"] == "3"  # only prod/db is charged
    assert zone_row(obj, "node-1", "cpu")["available"] == "2"
    assert all(r["name"] != "vendor/nic" for z in obj["zones"] for r in z["resources"])
    assert result.fingerprint == compute_fingerprint([(p.namespace, p.name) for p in PODS])
    assert attribute(obj, "nodeTopologyPodsFingerprintMethod") == "all"
    no_fp = await Scanner(dataclasses.replace(base_options, fingerprint=False), Source(ALLOCATABLE, PODS)).scan()
    assert no_fp.fingerprint is None and attribute(no_fp.nrt.to_dict(), "nodeTopologyPodsFingerprint") is None


async def test_allocatable_unsupported_falls_back_to_online_minus_reserved(base_options: ExporterOptions) -> None:
    class Old(Source):
        async def allocatable(self) -> AllocatableResources:
            raise PodResourcesSourceError("not implemented", kind="podresources_unsupported")

    options = dataclasses.replace(base_options, reserved_cpus=CPUSet([0, 1]))
    obj = (await Scanner(options, Old(ALLOCATABLE, [pod("gu", cpus=(2,))])).scan()).nrt.to_dict()
    assert zone_row(obj, "node-0", "cpu") == {"name": "cpu", "capacity": "4", "allocatable": "2", "available": "1"}
    assert zone_row(obj, "node-1", "cpu")["allocatable"] == "4"
    assert all(r["name"] == "cpu" for z in obj["zones"] for r in z["resources"])


@pytest.mark.parametrize(
    ("pods", "allocatable", "needle"),
    [
        ([pod("x", cpus=(42,))], ALLOCATABLE, "CPUs \\[42\\]"),
        ([pod("x", memory_gib=1, numa=7)], ALLOCATABLE, "unknown NUMA"),
        ([pod("")], ALLOCATABLE, "without name"),
        ([], dataclasses.replace(ALLOCATABLE, cpu_ids=(1, 99)), "allocatable CPUs \\[99\\]"),
    ],
)
async def test_answers_contradicting_the_machine_are_malformed(
    base_options: ExporterOptions, pods: list[PodResources], allocatable: AllocatableResources, needle: str
) -> None:
    reads: list[int] = []
    machine = MachineSource(base_options.sysfs_root)

    class Counting(MachineSource):
        def read(self):  # type: ignore[no-untyped-def]
            reads.append(1)
            return machine.read()

    scanner = Scanner(base_options, Source(allocatable, pods), machine_source=Counting(base_options.sysfs_root))
    with pytest.raises(MalformedPodResources, match=needle) as info:
        await scanner.scan()
    assert info.value.kind == "podresources_malformed"
    scanner.podresources = Source(ALLOCATABLE, [])
    await scanner.scan()
    assert len(reads) == 2  # the stale machine view is re-read before judging again


async def test_sysfs_errors(base_options: ExporterOptions, tmp_path: Path) -> None:
    errors: list[ExporterError] = []
    scanner = Scanner(base_options, Source(ALLOCATABLE, []), on_error=errors.append)
    await scanner.scan()
    meminfo = base_options.sysfs_root / "sys/devices/system/node/node1/meminfo"
    meminfo.write_text("Node 1 MemTotal: lots kB\n")
    result = await scanner.scan(refresh=True)  # broken re-read: reported, previous view kept
    assert [e.kind for e in errors] == ["sysfs"] and "meminfo" in errors[0].message
    assert zone_row(result.nrt.to_dict(), "node-1", "memory")["capacity"] == str(8 * GiB)
    fresh = Scanner(base_options, Source(ALLOCATABLE, []))
    with pytest.raises(SysfsSourceError, match="meminfo"):  # no good view yet: the scan fails
        await fresh.scan()
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SysfsSourceError):
        MachineSource(empty).read()


async def test_kubelet_config_errors(base_options: ExporterOptions, tmp_path: Path) -> None:
    config = tmp_path / "kubelet.yaml"
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "topologyManagerPolicy: restricted\ntopologyManagerScope: pod\n"
    )
    file_only = dataclasses.replace(
        base_options, kubelet_config_file=config, topology_manager_policy=None, topology_manager_scope=None
    )
    errors: list[ExporterError] = []
    scanner = Scanner(file_only, Source(ALLOCATABLE, []), on_error=errors.append)
    assert attribute((await scanner.scan()).nrt.to_dict(), "topologyManagerPolicy") == "restricted"
    config.write_text("topologyManagerPolicy: [\n")
    result = await scanner.scan(refresh=True)
    assert [e.kind for e in errors] == ["kubelet_config"]
    assert attribute(result.nrt.to_dict(), "topologyManagerPolicy") == "restricted"  # last good value kept
    with pytest.raises(KubeletConfigError):
        await Scanner(file_only, Source(ALLOCATABLE, [])).scan()
    # flags cover what is published: a broken file is reported and the flags are used
    both = dataclasses.replace(base_options, kubelet_config_file=config)
    errors.clear()
    result = await Scanner(both, Source(ALLOCATABLE, []), on_error=errors.append).scan()
    assert [e.kind for e in errors] == ["kubelet_config"]
    assert attribute(result.nrt.to_dict(), "topologyManagerPolicy") == "single-numa-node"


async def test_fake_dir_source(tmp_path: Path, base_options: ExporterOptions) -> None:
    (tmp_path / "list.json").write_text(
        json.dumps({"podResources": [{"name": "p", "namespace": "d", "containers": [{"name": "c", "cpuIds": ["5"]}]}]})
    )
    (tmp_path / "get_allocatable_resources.json").write_text(json.dumps({"cpu_ids": [1, 2, 3, 5, 6, 7]}))
    source = open_podresources(f"fake://{tmp_path}")
    assert isinstance(source, FakeDirPodResources)
    obj = (await Scanner(base_options, source).scan()).nrt.to_dict()
    assert zone_row(obj, "node-1", "cpu")["available"] == "2"
    (tmp_path / "list.json").write_text("{not json")
    with pytest.raises(MalformedPodResources, match="not JSON"):
        await source.list_pods()
    # the files are read as untrusted JSON (bounded reader): nesting, huge integers and size are refused, typed
    (tmp_path / "list.json").write_text("[" * 100_000)
    with pytest.raises(MalformedPodResources, match=r"list\.json: nested deeper than"):
        await source.list_pods()
    (tmp_path / "list.json").write_text('{"pod_resources": [], "x": ' + "9" * 5000 + "}")
    with pytest.raises(MalformedPodResources, match=r"list\.json: not JSON"):
        await source.list_pods()
    with (tmp_path / "list.json").open("wb") as big:
        big.truncate(MAX_MESSAGE_BYTES + 1)
    with pytest.raises(MalformedPodResources, match=rf"list\.json: larger than {MAX_MESSAGE_BYTES} bytes"):
        await source.list_pods()
    (tmp_path / "list.json").write_text(json.dumps({"pod_resources": [{"name": 5}]}))
    with pytest.raises(MalformedPodResources, match="expected a string"):
        await source.list_pods()
    (tmp_path / "list.json").unlink()
    with pytest.raises(PodResourcesSourceError) as info:
        await source.list_pods()
    assert info.value.kind == "podresources_unavailable"


async def test_grpc_source_reads_the_server_and_maps_errors(
    podres_server: PodResourcesServer, provider: StaticProvider, short_dir: Path
) -> None:
    source = GrpcPodResources(str(podres_server.path), timeout_seconds=2.0)
    try:
        assert [p.name for p in await source.list_pods()] == ["gu", "be"]
        assert (await source.allocatable()).cpu_ids == ALLOCATABLE.cpu_ids

        async def broken() -> Sequence[PodResources]:
            raise RuntimeError("kubelet state corrupt")

        provider.list_pods = broken  # type: ignore[method-assign]
        with pytest.raises(PodResourcesSourceError) as info:
            await source.list_pods()
        assert info.value.kind == "podresources_call"
    finally:
        await source.close()
    missing = GrpcPodResources(str(short_dir / "nothing.sock"), timeout_seconds=0.5)
    try:
        with pytest.raises(PodResourcesSourceError) as info:
            await missing.list_pods()
        assert info.value.kind == "podresources_unavailable"
    finally:
        await missing.close()


async def test_undecodable_grpc_answer_is_malformed(short_dir: Path) -> None:
    async def garbage(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        return b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"  # a length prefix that never ends

    handler = grpc.method_handlers_generic_handler(
        "v1.PodResourcesLister",
        {
            "List": grpc.unary_unary_rpc_method_handler(garbage),
            "GetAllocatableResources": grpc.unary_unary_rpc_method_handler(garbage),
        },
    )
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    path = short_dir / "bad.sock"
    server.add_insecure_port(f"unix://{path}")
    await server.start()
    source = GrpcPodResources(str(path), timeout_seconds=2.0)
    try:
        with pytest.raises(MalformedPodResources):
            await source.list_pods()
        with pytest.raises(MalformedPodResources):
            await source.allocatable()
    finally:
        await source.close()
        await server.stop(None)
        shutil.rmtree(path, ignore_errors=True)
