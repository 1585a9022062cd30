"""Field ownership for server-side apply, approximated (used by the in-memory store).

What is modelled, per object, in ``metadata.managedFields`` (``fieldsType: FieldsV1``, with the
API server's ``f:<name>`` encoding):

* every write records which manager last set which fields: ``Update`` entries for create /
  replace / patch (manager ``fieldManager`` or :data:`DEFAULT_MANAGER`), ``Apply`` entries for
  server-side apply; fields a write changes move to that manager;
* an apply whose value for a field differs from the live value while another manager owns that
  field fails with a 409 conflict naming the field and the manager, unless ``force`` is set, in
  which case the applier takes the field over;
* fields an applier owned before and omits now are removed, unless another manager owns them;
* apply merges like a JSON merge patch (maps merge, everything else replaces).

What is not: lists are atomic (no ``listType: map`` merge keys, no ``k:``/``v:`` list item
ownership), no ``.`` markers for intermediate maps, no per-version field sets, no schema-driven
defaulting. Good enough for "two managers fight over a field" and "omit a field to drop it".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from numaplane.kube.errors import Conflict
from numaplane.kube.patch import clone, merge_patch

__all__ = ["DEFAULT_MANAGER", "Ownership", "apply_config", "record_update"]

DEFAULT_MANAGER = "unknown"

Path = tuple[str, ...]

# Metadata written by the server, never owned by anyone.
_SYSTEM_META = frozenset(
    {
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "selfLink",
        "generateName",
    }
)


def leaf_paths(obj: Mapping[str, Any], subtree: str | None = None, exclude: str | None = None) -> dict[Path, Any]:
    """Leaf paths (maps are descended, lists and scalars are leaves) of an object's user fields.

    ``subtree`` restricts to one top-level field (``"status"``); ``exclude`` drops one.
    """
    out: dict[Path, Any] = {}

    def walk(prefix: Path, value: Any) -> None:
        if isinstance(value, Mapping) and value:
            for k, v in value.items():
                walk((*prefix, str(k)), v)
        else:
            out[prefix] = value

    for key, value in obj.items():
        if key in ("apiVersion", "kind"):
            continue
        if subtree is not None and key != subtree:
            continue
        if exclude is not None and key == exclude:
            continue
        if key == "metadata" and isinstance(value, Mapping):
            for mk, mv in value.items():
                if mk not in _SYSTEM_META:
                    walk(("metadata", str(mk)), mv)
        else:
            walk((key,), value)
    return out


def _get(obj: Any, path: Path) -> Any:
    cur = obj
    for p in path:
        if not isinstance(cur, Mapping) or p not in cur:
            return _MISSING
        cur = cur[p]
    return cur


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()


def _related(a: Path, b: Path) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def _encode(paths: Iterable[Path]) -> dict[str, Any]:
    root: dict[str, Any] = {}
    for path in sorted(paths):
        cur = root
        for p in path:
            cur = cur.setdefault(f"f:{p}", {})
    return root


def _decode(fields: Mapping[str, Any], prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    for key, sub in fields.items():
        if not key.startswith("f:"):
            continue
        path = (*prefix, key[2:])
        if isinstance(sub, Mapping) and any(k.startswith("f:") for k in sub):
            out |= _decode(sub, path)
        else:
            out.add(path)
    return out


@dataclass(frozen=True, slots=True)
class _Key:
    manager: str
    operation: str
    subresource: str


class Ownership:
    """The managed-fields table of one object, decoded; :meth:`to_managed_fields` re-encodes it."""

    def __init__(self, managed_fields: Iterable[Mapping[str, Any]] | None = None) -> None:
        self.owned: dict[_Key, set[Path]] = {}
        self.meta: dict[_Key, dict[str, Any]] = {}
        for entry in managed_fields or ():
            key = _Key(
                str(entry.get("manager", DEFAULT_MANAGER)),
                str(entry.get("operation", "Update")),
                str(entry.get("subresource", "")),
            )
            self.owned[key] = _decode(entry.get("fieldsV1") or {})
            self.meta[key] = {"apiVersion": entry.get("apiVersion", ""), "time": entry.get("time", "")}

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Ownership:
        return cls((obj.get("metadata") or {}).get("managedFields"))

    def others(self, manager: str) -> Iterable[tuple[_Key, set[Path]]]:
        return ((k, v) for k, v in self.owned.items() if k.manager != manager)

    def take(self, key: _Key, paths: Iterable[Path]) -> None:
        """Give ``paths`` to ``key`` and take them (and related paths) away from everyone else."""
        paths = set(paths)
        for other, owned in self.owned.items():
            if other != key:
                owned.difference_update({q for q in owned if any(_related(q, p) for p in paths)})
        self.owned.setdefault(key, set()).update(paths)

    def drop(self, paths: Iterable[Path]) -> None:
        paths = set(paths)
        for owned in self.owned.values():
            owned.difference_update(paths)

    def to_managed_fields(self, api_version: str, now: str) -> list[dict[str, Any]]:
        out = []
        for key, owned in self.owned.items():
            if not owned:
                continue
            meta = self.meta.get(key, {})
            entry: dict[str, Any] = {
                "manager": key.manager,
                "operation": key.operation,
                "apiVersion": meta.get("apiVersion") or api_version,
                "time": meta.get("time") or now,
                "fieldsType": "FieldsV1",
                "fieldsV1": _encode(owned),
            }
            if key.subresource:
                entry["subresource"] = key.subresource
            out.append(entry)
        return out

    def touch(self, key: _Key, api_version: str, now: str) -> None:
        self.meta[key] = {"apiVersion": api_version, "time": now}


def _scope(status_subresource: bool, subresource: str) -> tuple[str | None, str | None]:
    """(subtree, exclude) of the fields a write may touch."""
    if not status_subresource:
        return None, None
    return ("status", None) if subresource == "status" else (None, "status")


def record_update(
    old: Mapping[str, Any] | None,
    new: dict[str, Any],
    *,
    manager: str | None,
    api_version: str,
    now: str,
    subresource: str = "",
    status_subresource: bool = False,
) -> None:
    """Record an ``Update`` by ``manager`` that turned ``old`` into ``new`` (``new`` is modified)."""
    owners = Ownership.of(old) if old is not None else Ownership()
    subtree, exclude = _scope(status_subresource, subresource)
    before = leaf_paths(old, subtree, exclude) if old is not None else {}
    after = leaf_paths(new, subtree, exclude)
    changed = {p for p, v in after.items() if before.get(p, _MISSING) != v}
    removed = set(before) - set(after)
    owners.drop(removed)
    key = _Key(manager or DEFAULT_MANAGER, "Update", subresource)
    if changed:
        owners.take(key, changed)
        owners.touch(key, api_version, now)
    new.setdefault("metadata", {})["managedFields"] = owners.to_managed_fields(api_version, now)


def _delete_path(obj: dict[str, Any], path: Path) -> None:
    cur: Any = obj
    for p in path[:-1]:
        if not isinstance(cur, dict) or p not in cur:
            return
        cur = cur[p]
    if isinstance(cur, dict):
        cur.pop(path[-1], None)


def apply_config(
    live: Mapping[str, Any] | None,
    applied: Mapping[str, Any],
    *,
    manager: str,
    force: bool,
    api_version: str,
    now: str,
    subresource: str = "",
    status_subresource: bool = False,
) -> dict[str, Any]:
    """The object after ``manager`` applies ``applied`` to ``live`` (``None``: create).

    Raises :class:`Conflict` when another manager owns a field whose value would change, unless
    ``force``. The result carries the updated ``metadata.managedFields``.
    """
    owners = Ownership.of(live) if live is not None else Ownership()
    subtree, exclude = _scope(status_subresource, subresource)
    desired = leaf_paths(applied, subtree, exclude)
    key = _Key(manager, "Apply", subresource)
    conflicts = _conflicts(live, desired, owners, manager)
    if conflicts and not force:
        detail = "; ".join(f'conflict with "{m}": .{".".join(p)}' for m, p in conflicts)
        raise Conflict(f"Apply failed with {len(conflicts)} conflict(s): {detail}")
    result: dict[str, Any] = merge_patch(live or {}, _scoped(applied, subtree, exclude))
    previously = set(owners.owned.get(key, set()))
    # Fields this manager shares with nobody and no longer applies are removed.
    for path in previously - set(desired):
        if not any(any(_related(q, path) for q in owned) for other, owned in owners.others(manager)):
            _delete_path(result, path)
    if force:
        owners.take(key, desired)
    else:
        owners.owned[key] = set(desired)
    owners.touch(key, api_version, now)
    # Drop ownership of values removed by null in the applied config.
    owners.drop({p for p in desired if _get(result, p) is _MISSING})
    result.setdefault("metadata", {})["managedFields"] = owners.to_managed_fields(api_version, now)
    out: dict[str, Any] = clone(result)
    return out


def _conflicts(
    live: Mapping[str, Any] | None, desired: Mapping[Path, Any], owners: Ownership, manager: str
) -> list[tuple[str, Path]]:
    """``(other manager, path)`` of every field another manager owns whose value the apply changes
    (sorted, without repeats; a field ``live`` does not have conflicts with nobody)."""
    conflicts: set[tuple[str, Path]] = set()
    for path, value in desired.items():
        current = _get(live, path) if live is not None else _MISSING
        if current == value or current is _MISSING:
            continue
        for other, owned in owners.others(manager):
            if any(_related(q, path) for q in owned):
                conflicts.add((other.manager, path))
    return sorted(conflicts)


def _scoped(applied: Mapping[str, Any], subtree: str | None, exclude: str | None) -> dict[str, Any]:
    """The applied document restricted to the fields this write may touch (no type fields, no system
    metadata; a subresource write only its subtree, a main-resource write never the excluded one)."""
    scoped: dict[str, Any] = {}
    for top, value in applied.items():
        if top in ("apiVersion", "kind"):
            continue
        if (subtree is not None and top not in (subtree, "metadata")) or (exclude is not None and top == exclude):
            continue
        if top == "metadata" and isinstance(value, Mapping):
            scoped[top] = {} if subtree is not None else {k: v for k, v in value.items() if k not in _SYSTEM_META}
        else:
            scoped[top] = value
    return scoped
