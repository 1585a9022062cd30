"""The API server's write rules on plain objects, for the in-memory store (pure: no state, no I/O).

:class:`~numaplane.kube.memory.InMemoryKube` keeps the objects and the version counter; these
functions compute what a write stores:

* :func:`updated_object` — the new state of an object after a main or ``status`` write: the server
  owns ``name``, ``namespace``, ``uid``, ``creationTimestamp``, ``deletionTimestamp`` and
  ``generation``; a main write keeps ``status`` (when the resource has a status subresource), a
  status write changes only ``status``; ``generation`` grows when anything outside ``metadata``
  and ``status`` changes;
* :func:`is_noop` — a write that changes nothing but volatile metadata (no new ``resourceVersion``);
* :func:`patched` — a JSON or merge patch applied (a merge patch carrying
  ``metadata.resourceVersion`` is conditional, like a replace);
* :func:`bound_pod` — ``pods/binding``: ``spec.nodeName`` and the ``PodScheduled`` condition, once;
* :func:`encode_continue` / :func:`decode_continue` — the opaque continue token of a paged list.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any

from numaplane.kube.errors import Conflict, Invalid
from numaplane.kube.patch import clone, json_patch, merge_patch
from numaplane.kube.port import JsonObj, PatchType
from numaplane.kube.resources import Resource

__all__ = [
    "ObjKey",
    "bound_pod",
    "check_version",
    "decode_continue",
    "encode_continue",
    "is_noop",
    "name_of",
    "patched",
    "updated_object",
]

#: An object's key in its resource's bucket: (namespace or ``""``, name).
ObjKey = tuple[str, str]

_SERVER_OWNED = ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "generation")


def _strip_volatile(obj: Mapping[str, Any]) -> JsonObj:
    out = dict(obj.items())
    meta = dict(out.get("metadata") or {})
    for key in ("resourceVersion", "managedFields"):
        meta.pop(key, None)
    out["metadata"] = meta
    return out


def _ownership(obj: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    """Managed-field owners and their field sets, without timestamps (to detect no-op writes)."""
    entries = (obj.get("metadata") or {}).get("managedFields") or []
    return sorted(
        (str(e.get("manager")), str(e.get("operation")), str(e.get("subresource", "")), repr(e.get("fieldsV1")))
        for e in entries
    )


def _spec_part(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def name_of(obj: Mapping[str, Any]) -> str:
    """``metadata.name``; :class:`Invalid` when absent or not a string."""
    name = (obj.get("metadata") or {}).get("name")
    if not name or not isinstance(name, str):
        raise Invalid("metadata.name is required")
    return name


def check_version(res: Resource, current: JsonObj, wanted: Any) -> None:
    """:class:`Conflict` when ``wanted`` (a requested ``resourceVersion``, if any) is not the current one."""
    if wanted and str(wanted) != current["metadata"]["resourceVersion"]:
        raise Conflict(
            f"Operation cannot be fulfilled on {res.plural}{'.' + res.group if res.group else ''} "
            f'"{name_of(current)}": the object has been modified; '
            "please apply your changes to the latest version and try again"
        )


def updated_object(
    res: Resource, current: JsonObj, desired: Mapping[str, Any], *, subresource: str, managed: bool
) -> JsonObj:
    """The object stored when ``desired`` is written over ``current`` (see the module docstring).

    ``managed``: ``desired`` already carries its managed fields (server-side apply); otherwise the
    current ones are kept (the caller records the write's own ownership afterwards).
    """
    if subresource == "status":
        new: JsonObj = clone(current)
        if "status" in desired:
            new["status"] = clone(desired["status"])
        else:
            new.pop("status", None)
        if managed:
            new["metadata"]["managedFields"] = clone((desired.get("metadata") or {}).get("managedFields", []))
    else:
        new = clone(desired)
        meta = new.setdefault("metadata", {})
        cur_meta = current["metadata"]
        for key in _SERVER_OWNED:
            if key in cur_meta:
                meta[key] = cur_meta[key]
            else:
                meta.pop(key, None)
        if not managed or "managedFields" not in meta:
            if "managedFields" in cur_meta:
                meta["managedFields"] = clone(cur_meta["managedFields"])
            else:
                meta.pop("managedFields", None)
        if res.status_subresource:
            if "status" in current:
                new["status"] = clone(current["status"])
            else:
                new.pop("status", None)
        if _spec_part(new) != _spec_part(current):
            meta["generation"] = int(cur_meta.get("generation", 1)) + 1
    new["apiVersion"] = res.api_version
    new["kind"] = res.kind
    return new


def is_noop(new: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """True when ``new`` differs from ``current`` only in ``resourceVersion`` and managed-field times."""
    return _strip_volatile(new) == _strip_volatile(current) and _ownership(new) == _ownership(current)


def patched(
    res: Resource, current: JsonObj, patch: Mapping[str, Any] | Sequence[Mapping[str, Any]], patch_type: PatchType
) -> JsonObj:
    """``current`` after a JSON patch or a merge patch (a server-side apply is :mod:`numaplane.kube.ssa`'s)."""
    if patch_type is PatchType.JSON:
        if isinstance(patch, Mapping):
            raise Invalid("a JSON patch must be a list of operations")
        result = json_patch(current, patch)
        if not isinstance(result, dict):
            raise Invalid("a JSON patch must leave an object")
        return result
    if not isinstance(patch, Mapping):
        raise Invalid("a merge patch must be an object")
    check_version(res, current, (patch.get("metadata") or {}).get("resourceVersion"))
    merged: JsonObj = merge_patch(current, patch)
    return merged


def bound_pod(current: JsonObj, node_name: str, pod_uid: str | None, now: str) -> JsonObj:
    """The pod after ``pods/binding`` to ``node_name`` at ``now``; :class:`Conflict` when it cannot be bound."""
    pod_name = current["metadata"].get("name")
    if not node_name:
        raise Invalid("binding target node name is required")
    if pod_uid and current["metadata"].get("uid") != pod_uid:
        raise Conflict(
            f"Precondition failed: UID in precondition: {pod_uid}, UID in object meta: {current['metadata'].get('uid')}"
        )
    if current["metadata"].get("deletionTimestamp"):
        raise Conflict(f"pod {pod_name} is being deleted, cannot be assigned to a host")
    assigned = (current.get("spec") or {}).get("nodeName")
    if assigned:
        raise Conflict(f'pod {pod_name} is already assigned to node "{assigned}"')
    new: JsonObj = clone(current)
    new.setdefault("spec", {})["nodeName"] = node_name
    status = new.setdefault("status", {})
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
    conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now})
    status["conditions"] = conditions
    return new


def encode_continue(key: ObjKey | None) -> str:
    """The continue token resuming a listing after ``key``."""
    return base64.urlsafe_b64encode(json.dumps(list(key or ("", ""))).encode()).decode()


def decode_continue(token: str) -> ObjKey:
    """The key a continue token resumes after; :class:`Invalid` when malformed."""
    try:
        ns, name = json.loads(base64.urlsafe_b64decode(token.encode()))
        return (str(ns), str(name))
    except (ValueError, TypeError) as exc:
        raise Invalid(f"malformed continue token {token!r}") from exc
