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

import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

import msgspec
import numpy as np
import numpy.typing as npt

from numaplane.boundedjson import JSONInputError, check_depth
from numaplane.jsonshape import measure
from numaplane.limits import (
    MAX_EXTENDER_DECODED_BYTES,
    MAX_EXTENDER_NODES,
    MAX_EXTENDER_OBJECT_MEMBERS,
    MAX_EXTENDER_POD_BYTES,
    MAX_EXTENDER_POD_CONTAINERS,
    MAX_JSON_DEPTH,
)
from numaplane.resources.errors import ResourceError
from numaplane.resources.pod import Pod, parse_pod
from numaplane.scheduler.errors import ExtenderRequestError

__all__ = [
    "MAX_EXTENDER_PRIORITY",
    "BindingArgs",
    "ExtenderArgs",
    "HostPriority",
    "bind_result",
    "decode_body",
    "encode",
    "field_value",
    "filter_result",
    "parse_binding_args",
    "parse_extender_args",
    "priority_list",
    "priority_scores",
    "scale_score",
]

# msgspec decodes 2x and encodes ~10x faster than the json module. Bodies are decoded lazily: the top
# level into msgspec.Raw slices of the body, the Pod in full, and each Node object only as far as its
# name (the objects are echoed back untouched as the same slices). A body thus costs about its own size
# in memory, not ~30 times that as a tree of Python objects (issue 15, item 2).
#
# Nothing is built before its structure is bounded (issue 25, item 1): the body is first validated by
# decoding it into an empty Struct (msgspec skips every member without building it); the members of a
# value that would be materialised one Python object each (the top-level object, the NodeList, its
# items, NodeNames) are counted by :func:`numaplane.jsonshape.measure` before the list or dict is
# built; the one value decoded in full, the Pod, is bounded in bytes, depth and containers first.
_RAW_OBJECT = msgspec.json.Decoder(dict[str, msgspec.Raw])
_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])
_ANY = msgspec.json.Decoder()


class _Anything(msgspec.Struct):
    """No fields: decoding into it validates a JSON object and builds nothing of its members."""


_VALIDATE = msgspec.json.Decoder(_Anything)
_ENCODER = msgspec.json.Encoder()

MAX_EXTENDER_PRIORITY = 10
MAX_NODE_SCORE = 100
# Kubernetes object names: DNS subdomains (RFC 1123), at most 253 characters.
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\Z")


class _Meta(msgspec.Struct):
    name: str = ""


class _NodeHead(msgspec.Struct):
    metadata: _Meta | None = None


_NODE_HEAD = msgspec.json.Decoder(_NodeHead)
#: ``NodeNames`` as it should be: a flat list of non-empty strings (validated while decoding).
_NAMES = msgspec.json.Decoder(list[Annotated[str, msgspec.Meta(min_length=1)]])


def decode_body(body: bytes | bytearray) -> dict[str, Any]:
    """The top-level object of a request body; values stay undecoded (``msgspec.Raw``) until used.

    The body is validated and its top-level members counted before any Python object is built for
    them; a body that is not an object is refused at its first token, without reading the rest. A body
    of at most :data:`SMALL_BODY_BYTES` (every request of ``nodeCacheCapable: true`` for a few hundred
    nodes) is not scanned for its members first: its members are counted once decoded (a few thousand
    objects at most, however hostile; a repeated key counts once, and the last one wins, as in
    kube-scheduler's Go decoder). The scan cost ~0.1 ms per request, a tenth of the extender's CPU."""
    if len(body) > MAX_EXTENDER_DECODED_BYTES:
        raise ExtenderRequestError(f"request body larger than {MAX_EXTENDER_DECODED_BYTES} bytes")
    if not body or body.isspace():  # (no copy of the body, unlike strip())
        raise ExtenderRequestError("empty request body")
    try:
        _VALIDATE.decode(body)
    except RecursionError:
        raise ExtenderRequestError(f"request body nests deeper than {MAX_JSON_DEPTH} levels") from None
    except msgspec.ValidationError:  # valid JSON up to its first token, which does not open an object
        raise ExtenderRequestError("the request body must be a JSON object") from None
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise ExtenderRequestError(f"request body is not JSON: {_short(str(exc))}") from None
    too_many = f"the request body has more than {MAX_EXTENDER_OBJECT_MEMBERS} members"
    if len(body) > SMALL_BODY_BYTES:
        _check_members(body, MAX_EXTENDER_OBJECT_MEMBERS, too_many)
    doc: dict[str, Any] = _RAW_OBJECT.decode(body)
    if len(doc) > MAX_EXTENDER_OBJECT_MEMBERS:
        raise ExtenderRequestError(too_many)
    return doc


#: Bodies up to this size (bytes) are decoded before their top-level members are counted (:func:`decode_body`).
SMALL_BODY_BYTES = 64 * 1024


def _check_members(data: bytes | bytearray | msgspec.Raw, limit: int, reason: str) -> None:
    """Refuse the valid JSON ``data`` (``reason``) when its top-level container has more than ``limit`` members.

    A text of ``limit`` members needs at least ``2 * limit - 1`` bytes, so short texts are not scanned."""
    if len(data) >= 2 * limit and measure(data, max_members=limit).members > limit:
        raise ExtenderRequestError(reason)


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _value(value: Any, what: str) -> Any:
    """``value`` decoded in full if it is still raw; nesting bounded (:data:`MAX_JSON_DEPTH`)."""
    if not isinstance(value, msgspec.Raw):
        return value
    if len(value) > MAX_EXTENDER_POD_BYTES:
        raise ExtenderRequestError(f"{what} is larger than {MAX_EXTENDER_POD_BYTES} bytes")
    # A text shorter than 2 x the container bound cannot hold more containers than that (each takes two
    # bytes at least), and its depth is checked after decoding it (check_depth, same reason): the scan
    # before decoding (~70 us even for a pod of a few hundred bytes) is only needed for longer texts.
    if len(value) >= 2 * MAX_EXTENDER_POD_CONTAINERS:
        shape = measure(value)
        if shape.depth > MAX_JSON_DEPTH:
            raise ExtenderRequestError(f"{what} nests deeper than {MAX_JSON_DEPTH} levels")
        if shape.containers > MAX_EXTENDER_POD_CONTAINERS:
            raise ExtenderRequestError(f"{what} has more than {MAX_EXTENDER_POD_CONTAINERS} objects and arrays")
    try:
        doc = _ANY.decode(value)
    except RecursionError:
        raise ExtenderRequestError(f"{what} nests deeper than {MAX_JSON_DEPTH} levels") from None
    except (msgspec.DecodeError, UnicodeDecodeError, ValueError) as exc:
        raise ExtenderRequestError(f"{what} is not JSON: {_short(str(exc))}") from None
    try:
        check_depth(doc)
    except JSONInputError:
        raise ExtenderRequestError(f"{what} nests deeper than {MAX_JSON_DEPTH} levels") from None
    return doc


def encode(doc: Any) -> bytes:
    """Compact UTF-8 JSON of a reply document (``msgspec.Raw`` values are written as they are)."""
    return _ENCODER.encode(doc)


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
    """A parsed ``ExtenderArgs``. ``nodes`` holds the Node objects (``Nodes`` given; dicts, or
    ``msgspec.Raw`` slices of the request body handed back untouched) and ``item_names`` their names,
    ``node_names`` the names (``NodeNames`` given); at least one is set. ``node_list`` keeps the
    NodeList's other keys."""

    pod: Pod
    nodes: tuple[Any, ...] | None = None
    node_names: tuple[str, ...] | None = None
    node_list: Mapping[str, Any] = field(default_factory=dict)
    item_names: tuple[str, ...] = ()

    @property
    def names(self) -> list[str]:
        """Candidate node names, in request order (``NodeNames`` first when both forms are given)."""
        if self.node_names is not None:
            return list(self.node_names)
        return list(self.item_names)

    @property
    def node_objects(self) -> dict[str, Any]:
        """Node objects of the request by name (empty with ``NodeNames`` only)."""
        return dict(zip(self.item_names, self.nodes or (), strict=False))


def _node_name(node: Any) -> str:
    if isinstance(node, msgspec.Raw):
        try:
            head = _NODE_HEAD.decode(node)
        except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
            return ""
        return head.metadata.name if head.metadata is not None else ""
    if not isinstance(node, Mapping):
        return ""
    meta = node.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) else ""


def _node_list(nodes_doc: Any) -> dict[str, Any]:
    if isinstance(nodes_doc, msgspec.Raw):
        try:
            _VALIDATE.decode(nodes_doc)
            _check_members(
                nodes_doc, MAX_EXTENDER_OBJECT_MEMBERS, f"Nodes has more than {MAX_EXTENDER_OBJECT_MEMBERS} members"
            )
            return _RAW_OBJECT.decode(nodes_doc)
        except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
            raise ExtenderRequestError("Nodes must be a NodeList object") from None
    if not isinstance(nodes_doc, Mapping):
        raise ExtenderRequestError("Nodes must be a NodeList object")
    return dict(nodes_doc)


def _items(items: Any) -> list[Any]:
    if isinstance(items, msgspec.Raw):
        _check_members(items, MAX_EXTENDER_NODES, f"more than {MAX_EXTENDER_NODES} nodes")
        try:
            return _RAW_LIST.decode(items)
        except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
            raise ExtenderRequestError("Nodes.items must be a list") from None
    if not isinstance(items, list):
        raise ExtenderRequestError("Nodes.items must be a list")
    return items


def parse_extender_args(doc: Any) -> ExtenderArgs:
    """Parse a filter / prioritize request document (values plain or ``msgspec.Raw``)."""
    if not isinstance(doc, Mapping):
        raise ExtenderRequestError("ExtenderArgs must be a JSON object")
    pod = _pod(field_value(doc, "Pod"))
    nodes_doc = _value_or_none(field_value(doc, "Nodes"))
    names_doc, names_checked = _names_doc(field_value(doc, "NodeNames"))
    nodes: tuple[Any, ...] | None = None
    item_names: tuple[str, ...] = ()
    node_list: dict[str, Any] = {}
    if nodes_doc is not None:
        node_list = _node_list(nodes_doc)
        items_doc = _value_or_none(field_value(node_list, "items"))
        items = [] if items_doc is None else _items(items_doc)
        if len(items) > MAX_EXTENDER_NODES:
            raise ExtenderRequestError(f"more than {MAX_EXTENDER_NODES} nodes")
        found: list[str] = []
        for i, item in enumerate(items):
            name = _node_name(item)
            if not name:
                raise ExtenderRequestError(f"Nodes.items[{i}] is not a Node object with metadata.name")
            found.append(name)
        nodes, item_names = tuple(items), tuple(found)
        node_list = {k: v for k, v in node_list.items() if not (isinstance(k, str) and k.lower() == "items")}
    names: tuple[str, ...] | None = None
    if names_doc is not None:
        if not names_checked and (
            not isinstance(names_doc, list) or not all(isinstance(n, str) and n for n in names_doc)
        ):
            raise ExtenderRequestError("NodeNames must be a list of non-empty strings")
        if len(names_doc) > MAX_EXTENDER_NODES:
            raise ExtenderRequestError(f"more than {MAX_EXTENDER_NODES} nodes")
        names = tuple(names_doc)
    if nodes is None and names is None:
        raise ExtenderRequestError("neither Nodes nor NodeNames is given")
    return ExtenderArgs(pod, nodes, names, node_list, item_names)


#: Pods parsed from the last few distinct ``Pod`` texts (:func:`_pod`), most recent last.
_PODS: OrderedDict[bytes, Pod] = OrderedDict()
_PODS_LOCK = threading.Lock()
#: Texts remembered (kube-scheduler sends a pod's filter and prioritize back to back) and the longest one.
PARSED_PODS_KEPT = 8
PARSED_POD_MAX_BYTES = 64 * 1024


def _pod(value: Any) -> Pod:
    """The ``Pod`` member parsed. kube-scheduler sends the same pod text to filter and then to
    prioritize: a raw text seen among the last :data:`PARSED_PODS_KEPT` (up to
    :data:`PARSED_POD_MAX_BYTES` long) is answered with the :class:`Pod` parsed from it then (immutable:
    the same text always parses to an equal pod), without decoding it again. Refusals are not kept."""
    key = bytes(value) if isinstance(value, msgspec.Raw) and len(value) <= PARSED_POD_MAX_BYTES else None
    if key is not None:
        with _PODS_LOCK:
            kept = _PODS.get(key)
            if kept is not None:
                _PODS.move_to_end(key)
                return kept
    pod_doc = _value(value, "Pod")
    if not isinstance(pod_doc, Mapping):
        raise ExtenderRequestError("Pod is missing or not an object")
    try:
        pod = parse_pod(pod_doc)
    except ResourceError as exc:
        raise ExtenderRequestError(f"Pod: {_short(str(exc))}") from None
    if not pod.name:
        raise ExtenderRequestError("Pod: metadata.name is missing")
    if key is not None:
        with _PODS_LOCK:
            _PODS[key] = pod
            while len(_PODS) > PARSED_PODS_KEPT:
                _PODS.popitem(last=False)
    return pod


def _names_doc(value: Any) -> tuple[Any, bool]:
    """The ``NodeNames`` value decoded, and whether it is known to be a list of non-empty strings.

    A raw value is first decoded as exactly that (:data:`_NAMES`: typed, in one pass of msgspec, no
    Python per name); anything else takes :func:`_value`, whose checks give the reason of the 400."""
    value = _value_or_none(value)
    if isinstance(value, msgspec.Raw):
        _check_members(value, MAX_EXTENDER_NODES, f"more than {MAX_EXTENDER_NODES} nodes")
        try:
            return _NAMES.decode(value), True
        except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
            pass  # not a flat list of non-empty strings: the general path says why
    return _value(value, "NodeNames"), False


def _value_or_none(value: Any) -> Any:
    """``None`` for an absent value or a JSON ``null`` (raw or decoded)."""
    if isinstance(value, msgspec.Raw) and len(value) <= 64 and bytes(value).strip() == b"null":
        return None
    return value


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
        value = _value(_value_or_none(field_value(doc, name)), name)
        if value is None:
            value = ""
        if not isinstance(value, str):
            raise ExtenderRequestError(f"{name} must be a string")
        values[name] = value
    if not values["PodName"]:
        raise ExtenderRequestError("PodName is missing")
    if not values["Node"]:
        raise ExtenderRequestError("Node is missing")
    for name in ("PodName", "PodNamespace", "Node"):
        if values[name] and not _NAME.match(values[name]):
            raise ExtenderRequestError(f"{name} {_short(values[name], 64)!r} is not a Kubernetes object name")
    if len(values["PodUID"]) > 128 or not values["PodUID"].isprintable():
        raise ExtenderRequestError("PodUID is not a UID")
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


class HostPriority(msgspec.Struct):
    """One entry of a ``HostPriorityList`` (:func:`encode` writes ``{"Host": ..., "Score": ...}``, as
    for the dicts of :func:`priority_list`, and makes one without a Python call per entry)."""

    Host: str
    Score: int


def priority_scores(hosts: Sequence[str], scores: npt.NDArray[np.int64]) -> list[HostPriority]:
    """:func:`priority_list` of ``hosts`` with their 0..100 ``scores`` (one array, same order; the same
    JSON once encoded): the scaling of :func:`scale_score` done on the whole array."""
    scaled = np.clip((scores * MAX_EXTENDER_PRIORITY + MAX_NODE_SCORE // 2) // MAX_NODE_SCORE, 0, MAX_EXTENDER_PRIORITY)
    return list(map(HostPriority, hosts, scaled.tolist()))


def bind_result(error: str = "") -> dict[str, Any]:
    """An ``ExtenderBindingResult``."""
    return {"Error": error}
