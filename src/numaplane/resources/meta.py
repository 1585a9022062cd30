"""Kubernetes object metadata (``metadata`` of any object) as one frozen value, and its strict reader.

The one home of ``ObjectMeta`` for the whole product: the NodeResourceTopology model
(:mod:`numaplane.nrt.model`) and the operator's custom resources (:mod:`numaplane.operator.api.meta`)
both hold this value. It lives in the pure core (below ``nrt/`` in the import layers) so that both can
import it; :mod:`numaplane.kube` and the components use it and the small accessors below.

Invariants:

* ``name``, ``labels``, ``annotations`` and ``owner_references`` are typed fields; **every other key**
  of the document (``namespace``, ``uid``, ``resourceVersion``, ``generation``, ``creationTimestamp``,
  ``managedFields``...) is kept verbatim in :attr:`ObjectMeta.extra`, in document order, and
  re-emitted by :meth:`ObjectMeta.to_dict` right after ``name`` — so a foreign object round-trips.
  ``namespace``, ``uid``, ``generation``, ``resource_version`` and ``creation_timestamp`` are typed
  views over ``extra`` (the zero value when absent or, if the reader was told not to check them, of
  the wrong type).
* Equality covers every field; hashing skips the dict-valued ones (``labels``, ``annotations``,
  ``extra``).
* :func:`read_object_meta` never raises anything but :class:`~numaplane.resources.errors.MetadataError`
  (``path`` names the field, ``expected`` is one of the ``EXPECT_*`` phrases); with a ``report``
  callback it reports each problem and keeps going, dropping the malformed map or owner reference.

The accessors :func:`name_of`, :func:`namespace_of` and :func:`labels_of` read a raw JSON object's metadata without
building the value, for code that holds dicts (they are as fast as the subscripts they replace).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from numaplane.resources.errors import MetadataError

__all__ = [
    "EXPECT_BOOL",
    "EXPECT_INTEGER",
    "EXPECT_LIST",
    "EXPECT_NON_EMPTY_STRING",
    "EXPECT_NON_NEGATIVE",
    "EXPECT_OBJECT",
    "EXPECT_STRING",
    "EXPECT_STRING_KEY",
    "MetadataError",
    "ObjectMeta",
    "OwnerReference",
    "labels_of",
    "name_of",
    "namespace_of",
    "read_object_meta",
]

EXPECT_OBJECT = "an object"
EXPECT_LIST = "a list"
EXPECT_STRING = "a string"
EXPECT_STRING_KEY = "a string key"
EXPECT_NON_EMPTY_STRING = "a non-empty string"
EXPECT_BOOL = "true or false"
EXPECT_INTEGER = "an integer"
EXPECT_NON_NEGATIVE = "an integer at least 0"

#: The keys held by typed fields; every other key goes to ``extra``.
_TYPED_KEYS = frozenset(("name", "labels", "annotations", "ownerReferences"))
#: The keys of the typed views over ``extra``, in the order the reader checks them.
_VIEWS = ("namespace", "uid", "generation", "resourceVersion", "creationTimestamp")

Report = Callable[[MetadataError], None]


@dataclass(frozen=True, slots=True)
class OwnerReference:
    """``metadata.ownerReferences[]`` entry (the exporter points it at the Node)."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name, "uid": self.uid}
        if self.controller is not None:
            out["controller"] = self.controller
        if self.block_owner_deletion is not None:
            out["blockOwnerDeletion"] = self.block_owner_deletion
        return out


@dataclass(frozen=True, slots=True)
class ObjectMeta:
    """An object's metadata; keys without a typed field are kept verbatim in ``extra`` (see the module)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict, hash=False)
    annotations: Mapping[str, str] = field(default_factory=dict, hash=False)
    owner_references: tuple[OwnerReference, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def _string(self, key: str) -> str:
        value = self.extra.get(key)
        return value if isinstance(value, str) else ""

    @property
    def namespace(self) -> str:
        """``metadata.namespace`` ("" for cluster-scoped objects)."""
        return self._string("namespace")

    @property
    def uid(self) -> str:
        return self._string("uid")

    @property
    def resource_version(self) -> str:
        return self._string("resourceVersion")

    @property
    def creation_timestamp(self) -> str:
        """``metadata.creationTimestamp`` as sent (RFC 3339 text; "" when absent)."""
        return self._string("creationTimestamp")

    @property
    def generation(self) -> int:
        value = self.extra.get("generation")
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0

    def annotation(self, key: str) -> str | None:
        return self.annotations.get(key)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        out.update(self.extra)
        if self.labels:
            out["labels"] = dict(self.labels)
        if self.annotations:
            out["annotations"] = dict(self.annotations)
        if self.owner_references:
            out["ownerReferences"] = [o.to_dict() for o in self.owner_references]
        return out


def read_object_meta(
    doc: Any,
    path: str = "metadata",
    report: Report | None = None,
    *,
    require_name: bool = True,
    check_views: bool = True,
) -> ObjectMeta:
    """The :class:`ObjectMeta` of the JSON value ``doc`` found at ``path`` (the ``metadata`` object).

    Without ``report`` the first problem raises :class:`MetadataError`; with it, each problem is
    reported and reading goes on (a malformed label/annotation map is dropped whole, a malformed owner
    reference skipped). With ``require_name`` (the default) a ``doc`` that is not an object, or a
    missing or empty ``name``, always raises; without it a missing ``doc`` or ``name`` reads as empty.
    ``check_views`` checks the types of the typed views kept in ``extra`` (strings; ``generation`` an
    integer ≥ 0); without it they are kept unchecked, verbatim.
    """

    def problem(error: MetadataError) -> None:
        if report is None:
            raise error
        report(error)

    if not isinstance(doc, Mapping):
        if require_name:
            raise MetadataError(path, EXPECT_OBJECT, doc)
        if doc is not None:
            problem(MetadataError(path, EXPECT_OBJECT, doc))
        doc = {}
    name = doc.get("name")
    if require_name and (not isinstance(name, str) or not name):
        raise MetadataError(f"{path}.name", EXPECT_NON_EMPTY_STRING, name)
    labels = _string_map(doc, "labels", path, problem)
    annotations = _string_map(doc, "annotations", path, problem)
    if name is None:
        name = ""
    elif not isinstance(name, str):
        problem(MetadataError(f"{path}.name", EXPECT_STRING, name))
        name = ""
    owners = _owner_references(doc, path, problem)
    if check_views:
        for key in _VIEWS:
            value = doc.get(key)
            if value is None:
                continue
            if key != "generation":
                if not isinstance(value, str):
                    problem(MetadataError(f"{path}.{key}", EXPECT_STRING, value))
            elif isinstance(value, bool) or not isinstance(value, int):
                problem(MetadataError(f"{path}.generation", EXPECT_INTEGER, value))
            elif value < 0:
                problem(MetadataError(f"{path}.generation", EXPECT_NON_NEGATIVE, value))
    extra = {k: v for k, v in doc.items() if k not in _TYPED_KEYS}
    return ObjectMeta(name, labels, annotations, owners, extra)


def _string_map(doc: Mapping[str, Any], key: str, path: str, problem: Report) -> dict[str, str]:
    value = doc.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problem(MetadataError(f"{path}.{key}", EXPECT_OBJECT, value))
        return {}
    for k, v in value.items():
        if not isinstance(k, str):
            problem(MetadataError(f"{path}.{key}.{k}", EXPECT_STRING_KEY, k))
            return {}
        if not isinstance(v, str):
            problem(MetadataError(f"{path}.{key}.{k}", EXPECT_STRING, v))
            return {}
    return dict(value)


def _owner_references(doc: Mapping[str, Any], path: str, problem: Report) -> tuple[OwnerReference, ...]:
    value = doc.get("ownerReferences")
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        problem(MetadataError(f"{path}.ownerReferences", EXPECT_LIST, value))
        return ()
    owners: list[OwnerReference] = []
    for i, item in enumerate(value):
        where = f"{path}.ownerReferences[{i}]"
        try:
            owners.append(_owner_reference(item, where))
        except MetadataError as error:
            problem(error)
    return tuple(owners)


def _owner_reference(item: Any, where: str) -> OwnerReference:
    if not isinstance(item, Mapping):
        raise MetadataError(where, EXPECT_OBJECT, item)
    strings: list[str] = []
    for key in ("apiVersion", "kind", "name", "uid"):
        value = item.get(key)
        if not isinstance(value, str) or not value:
            raise MetadataError(f"{where}.{key}", EXPECT_NON_EMPTY_STRING, value)
        strings.append(value)
    flags: list[bool | None] = []
    for key in ("controller", "blockOwnerDeletion"):
        flag = item.get(key)
        if flag is not None and not isinstance(flag, bool):
            raise MetadataError(f"{where}.{key}", EXPECT_BOOL, flag)
        flags.append(flag)
    return OwnerReference(strings[0], strings[1], strings[2], strings[3], flags[0], flags[1])


def name_of(obj: Mapping[str, Any]) -> str:
    """``obj["metadata"]["name"]`` of a JSON object (``KeyError`` when absent, as the subscript)."""
    name: str = obj["metadata"]["name"]
    return name


def namespace_of(obj: Mapping[str, Any]) -> str:
    """``metadata.namespace`` of a JSON object, "" when absent or null (cluster-scoped objects)."""
    namespace: str = (obj.get("metadata") or {}).get("namespace") or ""
    return namespace


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    """``metadata.labels`` of a JSON object, empty when absent or null (read-only: do not mutate)."""
    labels: Mapping[str, str] = (obj.get("metadata") or {}).get("labels") or {}
    return labels
