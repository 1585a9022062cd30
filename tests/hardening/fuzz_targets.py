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
from numaplane.agent.errors import AdmissionRejected, CheckpointError
from numaplane.nri.errors import ProtocolError
from numaplane.nri.proto import api_pb2
from numaplane.nri.protocol import Connection, Role
from numaplane.nri.translate import container_from_pb, sandbox_from_pb
from numaplane.nrt.errors import NRTFormatError
from numaplane.nrt.model import NodeResourceTopology
from numaplane.placement.view import node_topology
from numaplane.policy.config import parse_config
from numaplane.policy.errors import PolicyConfigError
from numaplane.policy.preferences import InvalidPreferenceError, parse_preferences
from numaplane.resources.errors import PodSpecError, QuantityError
from numaplane.resources.pod import parse_pod
from numaplane.resources.quantity import parse_quantity
from numaplane.scheduler.errors import ExtenderRequestError
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
from numaplane.topology.errors import CPUSetParseError, SysfsError, TopologyFormatError
from numaplane.topology.model import Topology, synthetic
from numaplane.topology.snapshot import unpack_snapshot

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

TOPOLOGY = synthetic(sockets=2, cores_per_numa=2, threads_per_core=2).to_dict()
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
    return node_topology(NodeResourceTopology.from_dict(doc))


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
    Target("topology-json", Topology.from_dict, (TopologyFormatError,), mutations(TOPOLOGY) | json_values),
    Target("snapshot-archive", _archive, (SysfsError,), archives),
]
