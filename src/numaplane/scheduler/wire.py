"""The kube-scheduler extender wire format (``extender/v1``): tolerant request parsing, exact replies.

The Go types carry no JSON tags, so kube-scheduler writes the field names as declared and its decoder
matches names case-insensitively. We read requests the same way (an exact name wins over a
case-insensitive match) and always answer with the exact names:

* filter — request ``ExtenderArgs`` {``Pod``, ``Nodes`` (a NodeList, ``nodeCacheCapable: false``),
  ``NodeNames`` (``nodeCacheCapable: true``)}; reply ``ExtenderFilterResult`` {``Nodes``,
  ``NodeNames``, ``FailedNodes``, ``FailedAndUnresolvableNodes``, ``Error``} where the passing nodes
  come back in the form(s) they were given (the original Node objects, untouched) and the other
  form is ``null``;
* prioritize — request ``ExtenderArgs``; reply ``HostPriorityList`` [{``Host``, ``Score``}] with scores
  in 0..:data:`MAX_EXTENDER_PRIORITY`;
* bind — request ``ExtenderBindingArgs`` {``PodName``, ``PodNamespace``, ``PodUID``, ``Node``}; reply
  ``ExtenderBindingResult`` {``Error``}.

Anything that cannot be used raises :class:`~numaplane.scheduler.errors.ExtenderRequestError` with a
reason for the HTTP 400 answer. Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from numaplane.resources.errors import ResourceError
from numaplane.resources.pod import Pod, parse_pod
from numaplane.scheduler.errors import ExtenderRequestError

__all__ = [
    "MAX_EXTENDER_PRIORITY",
    "BindingArgs",
    "ExtenderArgs",
    "bind_result",
    "decode_body",
    "encode",
    "field_value",
    "filter_result",
    "parse_binding_args",
    "parse_extender_args",
    "priority_list",
    "scale_score",
]

# msgspec (a lightkube dependency) decodes 2x and encodes ~10x faster than the json module; the
# Nodes form of a request carries every Node object, so this matters for large clusters.
try:
    from msgspec import json as _msgspec_json
except ImportError:  # pragma: no cover - msgspec comes with lightkube
    _msgspec_json = None  # type: ignore[assignment]

MAX_EXTENDER_PRIORITY = 10
MAX_NODE_SCORE = 100


def decode_body(body: bytes) -> Any:
    """The JSON document of a request body (UTF-8)."""
    if not body.strip():
        raise ExtenderRequestError("empty request body")
    try:
        if _msgspec_json is not None:
            return _msgspec_json.decode(body)
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:  # msgspec.DecodeError is a ValueError
        raise ExtenderRequestError(f"request body is not JSON: {exc}") from None


def encode(doc: Any) -> bytes:
    """Compact UTF-8 JSON of a reply document."""
    if _msgspec_json is not None:
        return _msgspec_json.encode(doc)
    return json.dumps(doc, separators=(",", ":")).encode()


def field_value(doc: Mapping[str, Any], name: str) -> Any:
    """``doc[name]`` matched like Go's decoder: the exact key, else the first case-insensitive one."""
    if name in doc:
        return doc[name]
    lowered = name.lower()
    for key, value in doc.items():
        if isinstance(key, str) and key.lower() == lowered:
            return value
    return None


@dataclass(frozen=True)
class ExtenderArgs:
    """A parsed ``ExtenderArgs``. ``nodes`` holds the Node objects (``Nodes`` given), ``node_names`` the
    names (``NodeNames`` given); at least one is set. ``node_list`` keeps the NodeList's other keys."""

    pod: Pod
    nodes: tuple[Mapping[str, Any], ...] | None = None
    node_names: tuple[str, ...] | None = None
    node_list: Mapping[str, Any] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        """Candidate node names, in request order (``NodeNames`` first when both forms are given)."""
        if self.node_names is not None:
            return list(self.node_names)
        return [_node_name(n) for n in self.nodes or ()]

    @property
    def node_objects(self) -> dict[str, Mapping[str, Any]]:
        """Node objects of the request by name (empty with ``NodeNames`` only)."""
        return {_node_name(n): n for n in self.nodes or ()}


def _node_name(node: Mapping[str, Any]) -> str:
    meta = node.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) else ""


def parse_extender_args(doc: Any) -> ExtenderArgs:
    """Parse a filter / prioritize request document."""
    if not isinstance(doc, Mapping):
        raise ExtenderRequestError("ExtenderArgs must be a JSON object")
    pod_doc = field_value(doc, "Pod")
    if not isinstance(pod_doc, Mapping):
        raise ExtenderRequestError("Pod is missing or not an object")
    try:
        pod = parse_pod(pod_doc)
    except (ResourceError, AttributeError, TypeError, ValueError) as exc:
        raise ExtenderRequestError(f"Pod: {exc}") from None
    if not pod.name:
        raise ExtenderRequestError("Pod: metadata.name is missing")
    nodes_doc = field_value(doc, "Nodes")
    names_doc = field_value(doc, "NodeNames")
    nodes: tuple[Mapping[str, Any], ...] | None = None
    node_list: dict[str, Any] = {}
    if nodes_doc is not None:
        if not isinstance(nodes_doc, Mapping):
            raise ExtenderRequestError("Nodes must be a NodeList object")
        items = field_value(nodes_doc, "items")
        if items is None:
            items = []
        if not isinstance(items, list):
            raise ExtenderRequestError("Nodes.items must be a list")
        for i, item in enumerate(items):
            if not isinstance(item, Mapping) or not _node_name(item):
                raise ExtenderRequestError(f"Nodes.items[{i}] is not a Node object with metadata.name")
        nodes = tuple(items)
        node_list = {k: v for k, v in nodes_doc.items() if not (isinstance(k, str) and k.lower() == "items")}
    names: tuple[str, ...] | None = None
    if names_doc is not None:
        if not isinstance(names_doc, list) or not all(isinstance(n, str) and n for n in names_doc):
            raise ExtenderRequestError("NodeNames must be a list of non-empty strings")
        names = tuple(names_doc)
    if nodes is None and names is None:
        raise ExtenderRequestError("neither Nodes nor NodeNames is given")
    return ExtenderArgs(pod, nodes, names, node_list)


@dataclass(frozen=True, slots=True)
class BindingArgs:
    """A parsed ``ExtenderBindingArgs``."""

    pod_name: str
    pod_namespace: str
    pod_uid: str
    node: str

    @property
    def key(self) -> str:
        return f"{self.pod_namespace}/{self.pod_name}"


def parse_binding_args(doc: Any) -> BindingArgs:
    """Parse a bind request document (``PodName`` and ``Node`` are required; namespace defaults to
    ``default``; ``PodUID`` may be empty, then no UID precondition is sent)."""
    if not isinstance(doc, Mapping):
        raise ExtenderRequestError("ExtenderBindingArgs must be a JSON object")
    values: dict[str, str] = {}
    for name in ("PodName", "PodNamespace", "PodUID", "Node"):
        value = field_value(doc, name)
        if value is None:
            value = ""
        if not isinstance(value, str):
            raise ExtenderRequestError(f"{name} must be a string")
        values[name] = value
    if not values["PodName"]:
        raise ExtenderRequestError("PodName is missing")
    if not values["Node"]:
        raise ExtenderRequestError("Node is missing")
    return BindingArgs(values["PodName"], values["PodNamespace"] or "default", values["PodUID"], values["Node"])


def filter_result(
    args: ExtenderArgs,
    passing: Sequence[str],
    failed: Mapping[str, str],
    unresolvable: Mapping[str, str],
    error: str = "",
) -> dict[str, Any]:
    """An ``ExtenderFilterResult`` answering ``args`` (passing nodes in the form they were given)."""
    nodes: dict[str, Any] | None = None
    if args.nodes is not None:
        objects = args.node_objects
        nodes = {**args.node_list, "items": [objects[n] for n in passing if n in objects]}
    names = list(passing) if args.node_names is not None else None
    return {
        "Nodes": nodes,
        "NodeNames": names,
        "FailedNodes": dict(failed),
        "FailedAndUnresolvableNodes": dict(unresolvable),
        "Error": error,
    }


def scale_score(score: int) -> int:
    """A 0..100 node score as an extender priority 0..10 (nearest, halves up; clamped)."""
    scaled = (score * MAX_EXTENDER_PRIORITY + MAX_NODE_SCORE // 2) // MAX_NODE_SCORE
    return max(0, min(MAX_EXTENDER_PRIORITY, scaled))


def priority_list(scores: Sequence[tuple[str, int]]) -> list[dict[str, Any]]:
    """A ``HostPriorityList`` from ``(node, 0..100 score)`` pairs, in the given order."""
    return [{"Host": host, "Score": scale_score(score)} for host, score in scores]


def bind_result(error: str = "") -> dict[str, Any]:
    """An ``ExtenderBindingResult``."""
    return {"Error": error}
