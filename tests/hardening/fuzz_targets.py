"""Fuzz targets: every parser of untrusted input, its documented error types, and a strategy.

Shared by the bounded fuzz tests (``test_fuzz_parsers.py``, fast in CI) and the long run
(``bench/fuzz.py``). The property of every target: feeding it any input either succeeds or raises one
of ``errors`` (nothing else escapes), within ``MAX_SECONDS`` (work is bounded).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from numaplane.agent.checkpoint import CheckpointIdentity, decode, encode
from numaplane.agent.containers import EXTRA_RESOURCES_ANNOTATION_PREFIX, derive
from numaplane.agent.errors import AdmissionRejected, CheckpointCorrupted, CheckpointError
from numaplane.agent.state import NodeAgentState
from numaplane.documents import DocumentError, load_yaml
from numaplane.nri.errors import ProtocolError
from numaplane.nri.proto import api_pb2
from numaplane.nri.protocol import Connection, Role
from numaplane.nri.translate import container_from_pb, sandbox_from_pb
from numaplane.nrt.errors import NRTFormatError
from numaplane.nrt.parse import parse_strict
from numaplane.operator.errors import SpecError
from numaplane.operator.render import parse_resources, sample_resources
from numaplane.placement.model.view import node_topology
from numaplane.policy.config import parse_config
from numaplane.policy.errors import PolicyConfigError
from numaplane.policy.manager import ResourceManager
from numaplane.policy.preferences import InvalidPreferenceError, parse_preferences
from numaplane.resources.errors import PodSpecError, QuantityError
from numaplane.resources.pod import parse_pod
from numaplane.resources.quantity import parse_quantity
from numaplane.scheduler.config import config_from_document
from numaplane.scheduler.errors import ExtenderRequestError, SchedulerConfigError
from numaplane.scheduler.wire import (
    decode_body,
    filter_result,
    parse_binding_args,
    parse_extender_args,
)
from numaplane.scheduler.wire import (
    encode as encode_reply,
)
from numaplane.sim.errors import WorkloadError
from numaplane.sim.workload import parse_workload
from numaplane.topology.cpuset import CPUSet
from numaplane.topology.document import topology_from_dict, topology_to_dict
from numaplane.topology.errors import CPUSetParseError, SysfsError, TopologyFormatError
from numaplane.topology.model import synthetic
from numaplane.topology.snapshot import unpack_snapshot
from numaplane.topology.sysfs import discover

#: Longest any single input may take (the daemons must stay responsive).
MAX_SECONDS = 1.0


@dataclass(frozen=True)
class Target:
    name: str
    run: Callable[[Any], object]
    errors: tuple[type[BaseException], ...]
    strategy: st.SearchStrategy[Any]


# --- building blocks -----------------------------------------------------------------------------------

_BIG = st.sampled_from(["9" * 4400, "9" * 70, "1e999999", "[" * 2000, "-" * 10, "\x00", "0" * 100 + "1"])
scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12) | _BIG
json_values = st.recursive(
    scalars | st.integers(min_value=-(10**30), max_value=10**30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=16,
)
_QUANTITY_ALPHABET = "0123456789.+-eEKMGTPimnuk "
quantity_texts = st.text(alphabet=_QUANTITY_ALPHABET, max_size=24) | _BIG
quantities = quantity_texts | json_values


def _mutate(base: Any, edits: list[tuple[int, Any]]) -> Any:
    """``base`` (deep-copied) with the values at some of its places replaced (places numbered in a stable walk)."""
    doc = json.loads(json.dumps(base))
    for where, value in edits:
        places: list[tuple[Any, Any]] = []
        stack: list[Any] = [doc]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                for k in sorted(item):
                    places.append((item, k))
                    stack.append(item[k])
            elif isinstance(item, list):
                for i, child in enumerate(item):
                    places.append((item, i))
                    stack.append(child)
        if not places:
            return value
        parent, key = places[where % len(places)]
        parent[key] = value
    return doc


def mutations(base: Any) -> st.SearchStrategy[Any]:
    return st.lists(st.tuples(st.integers(0, 10_000), json_values | quantities), max_size=3).map(
        lambda edits: _mutate(base, edits)
    )


# --- targets --------------------------------------------------------------------------------------------

POD = {
    "metadata": {"name": "p", "namespace": "ns", "uid": "u", "annotations": {"numaplane.io/cpu-strategy": "packed"}},
    "spec": {
        "schedulerName": "s",
        "nodeName": "n",
        "overhead": {"cpu": "10m"},
        "initContainers": [{"name": "i", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}],
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"cpu": "2"}}}],
    },
    "status": {"phase": "Pending", "qosClass": "Burstable"},
}

CONFIG = {
    "topologyManager": {"policy": "single-numa-node", "scope": "pod", "options": {"max-allowable-numa-nodes": "8"}},
    "cpuManager": {"policy": "static", "reservedCPUs": "0,8", "options": {"full-pcpus-only": "true"}},
    "memoryManager": {"policy": "Static", "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}]},
    "devices": {"example.com/gpu": [{"id": "g0", "numa": [0]}]},
}

NRT = {
    "apiVersion": "topology.node.k8s.io/v1alpha2",
    "kind": "NodeResourceTopology",
    "metadata": {"name": "n1"},
    "attributes": [{"name": "topologyManagerPolicy", "value": "single-numa-node"}],
    "topologyPolicies": ["SingleNUMANodeContainerLevel"],
    "zones": [
        {
            "name": "node-0",
            "type": "Node",
            "costs": [{"name": "node-0", "value": 10}, {"name": "node-1", "value": 20}],
            "resources": [{"name": "cpu", "capacity": "4", "allocatable": "4", "available": "2"}],
        },
        {
            "name": "node-1",
            "type": "Node",
            "resources": [{"name": "memory", "capacity": "8Gi", "allocatable": 5, "available": "1Gi"}],
        },
    ],
}

WORKLOAD = {
    "kind": "Workload",
    "pods": [{"name": "a", "count": 3, "arrival": 1, "interval": 2, "duration": 5, "spec": POD["spec"]}],
}

TOPOLOGY = topology_to_dict(synthetic(sockets=2, cores_per_numa=2, threads_per_core=2))
ME = CheckpointIdentity("node-a", "sha256:x")


def _extender(body: bytes) -> object:
    doc = decode_body(body)
    if any(k.lower() == "podname" for k in doc):
        return parse_binding_args(doc)
    args = parse_extender_args(doc)
    return encode_reply(filter_result(args, args.names, {}, {}))


_FILTER = {
    "Pod": POD,
    "Nodes": {"items": [{"metadata": {"name": "n1"}}, {"metadata": {"name": "n2"}}]},
    "NodeNames": ["n1"],
}
_BIND = {"PodName": "p", "PodNamespace": "ns", "PodUID": "u", "Node": "n1"}
extender_bodies = (
    mutations(_FILTER).map(lambda d: json.dumps(d).encode())
    | mutations(_BIND).map(lambda d: json.dumps(d).encode())
    | st.binary(max_size=200)
    | st.sampled_from([b"[" * 100_000, b'{"Pod":' + b"[" * 100_000, b'{"a":' * 5000, b"{" + b" " * 1000])
)


def _nri(data: bytes) -> object:
    conn = Connection(Role.PLUGIN)
    for i in range(0, len(data), 7):
        conn.receive(data[i : i + 7])
    conn.receive_eof()
    return None


def _annotation(raw: str) -> object:
    pod = api_pb2.PodSandbox(id="sb", name="p", uid="u", namespace="ns")
    pod.annotations[EXTRA_RESOURCES_ANNOTATION_PREFIX + "main"] = raw
    pod.annotations["numaplane.io/cpu-strategy"] = raw[:40]
    c = api_pb2.Container(id="c", pod_sandbox_id="sb", name="main")
    c.linux.resources.cpu.shares.value = 1024
    info = derive(sandbox_from_pb(pod), container_from_pb(c))
    parse_preferences(dict(pod.annotations), "single-numa-node")
    return info


def _checkpoint(doc: Any) -> object:
    raw = doc if isinstance(doc, bytes) else encode(doc if isinstance(doc, dict) else {"manager": doc}, ME)
    return decode(raw, ME)


def _nrt(doc: Any) -> object:
    return node_topology(parse_strict(doc))


def _archive(data: bytes) -> object:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "a.tar.gz"
        path.write_bytes(data)
        return unpack_snapshot(path, Path(tmp) / "out")


def _tar_members(members: list[tuple[str, str, str]]) -> bytes:
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for kind, name, link in members:
            info = tarfile.TarInfo(name)
            info.type = {
                "file": tarfile.REGTYPE,
                "dir": tarfile.DIRTYPE,
                "sym": tarfile.SYMTYPE,
                "hard": tarfile.LNKTYPE,
            }[kind]
            info.linkname = link
            tar.addfile(info, io.BytesIO(b"") if kind == "file" else None)
    return buffer.getvalue()


_PATHS = st.lists(st.sampled_from(["m", ".", "..", "", "sys", "x", "/"]), min_size=1, max_size=4).map("/".join)
archives = st.lists(st.tuples(st.sampled_from(["file", "dir", "sym", "hard"]), _PATHS, _PATHS), max_size=6).map(
    _tar_members
) | st.binary(max_size=300)

# --- issue 25 round 3 ------------------------------------------------------------------------------

SCHEDULER_CONFIG = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "percentageOfNodesToScore": 50,
    "profiles": [
        {"schedulerName": "default-scheduler"},
        {
            "schedulerName": "topo",
            "pluginConfig": [
                {
                    "name": "NodeResourceTopologyMatch",
                    "args": {
                        "scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 2}]},
                        "cacheResyncPeriodSeconds": 5,
                        "cache": {"foreignPodsDetect": "All", "resyncMethod": "Autodetect"},
                        "podMaxBackoffSeconds": 10,
                        "numaScoreWeight": 2,
                        "bindConcurrency": 4,
                    },
                }
            ],
        },
    ],
}
_FLAT_CONFIG = SCHEDULER_CONFIG["profiles"][1]["pluginConfig"][0]["args"]  # type: ignore[index]
_config_numbers = st.sampled_from([10**400, -(10**400), float("nan"), float("inf"), 1e308, 10**6 + 1, -1, 0])


def _scheduler_config(doc: Any) -> object:
    return config_from_document(doc).describe()


def _resources(docs: Any) -> object:
    return parse_resources(docs if isinstance(docs, list) and all(isinstance(d, dict) for d in docs) else [{}])


def _yaml_alias_documents(draw_shape: tuple[int, int, bool]) -> str:
    """A YAML text with ``levels`` levels of ``width`` aliases each (a bomb when both are large), or a
    mapping alias used once (still refused: a tree is required)."""
    levels, width, mapping = draw_shape
    text = "a0: &a0 " + ("{k: v}" if mapping else "[x, y]") + "\n"
    for i in range(1, levels + 1):
        text += f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]\n"
    return text


yaml_texts = st.tuples(st.integers(0, 12), st.integers(1, 12), st.booleans()).map(_yaml_alias_documents) | st.text(
    alphabet="ab:&*[]{}-, \n", max_size=80
)


def _agent_state() -> dict[str, Any]:
    """A real agent state to mutate: two Guaranteed pods of 2 CPUs, one holding a GPU its Pod spec requests."""
    topology = synthetic(sockets=2, cores_per_numa=2, threads_per_core=2)
    config = {
        "cpuManager": {"reservedCPUs": "0"},
        "devices": {"example.com/gpu": [{"id": "gpu0", "numa": [0]}, {"id": "gpu1", "numa": [1]}]},
    }
    specs = {}
    for name, gpus in (("a", 1), ("b", 0)):
        limits = {"cpu": "2", "memory": "64Mi", **({"example.com/gpu": str(gpus)} if gpus else {})}
        specs[f"uid-{name}"] = parse_pod(
            {
                "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
                "spec": {"containers": [{"name": "main", "resources": {"requests": limits, "limits": limits}}]},
            }
        )
    node_state = NodeAgentState(ResourceManager(topology, config), pod_lookup=specs.get)
    for name in ("a", "b"):
        pod = api_pb2.PodSandbox(id=f"sb-{name}", name=name, uid=f"uid-{name}", namespace="default")
        pod.linux.cgroup_parent = f"/kubepods/poduid-{name}"
        ctr = api_pb2.Container(id=f"ctr-{name}", pod_sandbox_id=pod.id, name="main")
        ctr.linux.resources.cpu.shares.value = 2048
        ctr.linux.resources.cpu.period.value = 100000
        ctr.linux.resources.cpu.quota.value = 200000
        ctr.linux.resources.memory.limit.value = 64 << 20
        node_state.create(sandbox_from_pb(pod), container_from_pb(ctr))
    assert node_state.manager.admissions, "the base state holds admissions"
    return {"topology": topology, "config": config, "specs": specs, "snapshot": node_state.snapshot()}


AGENT = _agent_state()


def _restore(doc: Any) -> object:
    node_state = NodeAgentState(ResourceManager(AGENT["topology"], AGENT["config"]), pod_lookup=AGENT["specs"].get)
    node_state.restore(doc if isinstance(doc, dict) else {"manager": doc})
    node_state.pod_resources()  # what the agent serves at once from a restored state
    return encode(node_state.snapshot(), ME)  # and writes back at its next checkpoint


def _chains(shape: tuple[int, bool, int]) -> bytes:
    """A chain of ``n`` symlinks (each to the previous), written in order or backwards, ``fan`` links
    more pointing at its end: the shapes that made extraction quadratic."""
    n, backwards, fan = shape
    links = [("sym", f"m/l{i}", f"l{i - 1}" if i else "sys") for i in range(n)]
    links += [("sym", f"m/f{i}", f"l{n - 1}" if n else "sys") for i in range(fan)]
    return _tar_members([("dir", "m/sys", ""), *(reversed(links) if backwards else links)])


def _sysfs_lists(texts: tuple[str, str]) -> object:
    """A 2-CPU sysfs tree whose ``cpu/online`` and ``cpu/possible`` say anything."""
    online, possible = texts
    with tempfile.TemporaryDirectory() as tmp:
        cpu = Path(tmp) / "sys/devices/system/cpu"
        for n in (0, 1):
            (cpu / f"cpu{n}/topology").mkdir(parents=True)
            (cpu / f"cpu{n}/topology/core_id").write_text(f"{n}\n")
            (cpu / f"cpu{n}/topology/physical_package_id").write_text("0\n")
        (cpu / "online").write_text(online)
        (cpu / "possible").write_text(possible)
        return discover(tmp).num_cpus


_cpu_lists = st.sampled_from(["0-65535", "0-1", "1", "", "0-4294967295", "65536", "0,1,65535"]) | st.text(
    alphabet="0123456789,-\n", max_size=20
)

TARGETS: list[Target] = [
    Target(
        "cpuset",
        CPUSet.parse,
        (CPUSetParseError,),
        st.text(alphabet="0123456789,- ", max_size=40) | _BIG | st.text(max_size=20),
    ),
    Target("quantity", parse_quantity, (QuantityError,), quantities),
    Target("pod", parse_pod, (PodSpecError,), mutations(POD) | json_values),
    Target(
        "annotations",
        _annotation,
        (AdmissionRejected, InvalidPreferenceError),
        st.text(max_size=60) | json_values.map(json.dumps),
    ),
    Target("node-resource-config", parse_config, (PolicyConfigError,), mutations(CONFIG) | json_values),
    Target("nrt", _nrt, (NRTFormatError,), mutations(NRT) | json_values),
    Target("extender-body", _extender, (ExtenderRequestError,), extender_bodies),
    Target("nri-frames", _nri, (ProtocolError,), st.binary(max_size=300)),
    Target(
        "checkpoint",
        _checkpoint,
        (CheckpointError,),
        st.binary(max_size=200) | mutations({"manager": {"version": 1}, "containers": []}),
    ),
    Target("workload", parse_workload, (WorkloadError,), mutations(WORKLOAD) | json_values),
    Target("topology-json", topology_from_dict, (TopologyFormatError,), mutations(TOPOLOGY) | json_values),
    Target("snapshot-archive", _archive, (SysfsError,), archives),
    Target(
        "snapshot-archive-link-chains",
        _archive,
        (SysfsError,),
        st.tuples(st.integers(0, 400), st.booleans(), st.integers(0, 50)).map(_chains),
    ),
    Target("sysfs-cpu-lists", _sysfs_lists, (SysfsError,), st.tuples(_cpu_lists, _cpu_lists)),
    Target(
        "scheduler-config",
        _scheduler_config,
        (SchedulerConfigError,),
        mutations(SCHEDULER_CONFIG)
        | mutations(_FLAT_CONFIG)
        | json_values
        | _config_numbers.map(lambda n: {"cacheResyncPeriodSeconds": n, "numaScoreWeight": n}),
    ),
    Target(
        "custom-resources",
        _resources,
        (SpecError,),
        st.lists(st.sampled_from(sample_resources()), min_size=1, max_size=3).flatmap(
            lambda docs: st.tuples(*(mutations(d) for d in docs)).map(list)
        ),
    ),
    Target("yaml-documents", load_yaml, (DocumentError,), yaml_texts),
    Target("checkpoint-restore", _restore, (CheckpointCorrupted,), mutations(AGENT["snapshot"]) | json_values),
]
