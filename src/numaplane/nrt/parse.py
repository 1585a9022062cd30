"""Reading a NodeResourceTopology object from JSON values: strict, or lenient for foreign objects.

:func:`parse_strict` (what every reader of a whole object calls) raises the first
:class:`~numaplane.nrt.errors.NRTFormatError`, naming the field (``$.zones[1].resources[0].available``);
:func:`parse_lenient` drops malformed zones, resource rows, costs, attributes and metadata maps instead
and returns the problems found in document order, for consumers that must keep going on objects other
components wrote. Only a document that is not an object, or whose ``metadata.name`` is unusable, fails
in both modes. ``v1alpha1`` objects are read too (the shapes agree); each quantity keeps the text
it was read from (:attr:`ResourceInfo.raw`), so :meth:`NodeResourceTopology.to_dict` re-emits it verbatim.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from numaplane.nrt.errors import NRTFormatError
from numaplane.nrt.model import (
    API_VERSION,
    API_VERSION_V1ALPHA1,
    KIND,
    Attribute,
    CostInfo,
    NodeResourceTopology,
    ObjectMeta,
    QuantityText,
    ResourceInfo,
    Zone,
)
from numaplane.resources.errors import MetadataError, QuantityError
from numaplane.resources.meta import EXPECT_LIST, EXPECT_OBJECT, read_object_meta
from numaplane.resources.quantity import Quantity, parse_quantity

__all__ = ["parse_lenient", "parse_strict"]


def parse_strict(doc: Any) -> NodeResourceTopology:
    """Parse a JSON-ready object (v1alpha2, or the structurally compatible v1alpha1).

    Raises :class:`NRTFormatError` naming the first malformed field.
    """
    nrt, _ = _parse(doc, lenient=False)
    return nrt


def parse_lenient(doc: Any) -> tuple[NodeResourceTopology, tuple[NRTFormatError, ...]]:
    """Parse, dropping malformed zones, resource rows, costs and attributes instead of failing.

    Only a document that is not an object, or whose ``metadata.name`` is unusable, still raises
    :class:`NRTFormatError`. Returns the object and the problems found (in document order).
    """
    return _parse(doc, lenient=True)


class _Problems:
    """Collects problems in lenient mode; raises at the first one in strict mode."""

    def __init__(self, lenient: bool) -> None:
        self.lenient = lenient
        self.found: list[NRTFormatError] = []

    def report(self, error: NRTFormatError) -> None:
        if not self.lenient:
            raise error
        self.found.append(error)


def _parse(doc: Any, *, lenient: bool) -> tuple[NodeResourceTopology, tuple[NRTFormatError, ...]]:
    if not isinstance(doc, Mapping):
        raise NRTFormatError("$", f"expected an object, got {type(doc).__name__}")
    problems = _Problems(lenient)
    api_version = doc.get("apiVersion", API_VERSION)
    if api_version not in (API_VERSION, API_VERSION_V1ALPHA1):
        problems.report(NRTFormatError("$.apiVersion", f"expected {API_VERSION!r}, got {api_version!r}"))
        api_version = API_VERSION
    kind = doc.get("kind", KIND)
    if kind != KIND:
        problems.report(NRTFormatError("$.kind", f"expected {KIND!r}, got {kind!r}"))
    metadata = _meta(doc.get("metadata"), problems)
    policies: list[str] = []
    for i, item in _items(doc, "topologyPolicies", "$", problems):
        if isinstance(item, str):
            policies.append(item)
        else:
            problems.report(NRTFormatError(f"$.topologyPolicies[{i}]", f"expected a string, got {item!r}"))
    attributes = _attrs(doc, "$", problems)
    if "zones" not in doc or doc["zones"] is None:
        problems.report(NRTFormatError("$.zones", "missing (required)"))
    zones: list[Zone] = []
    for i, item in _items(doc, "zones", "$", problems):
        try:
            zones.append(_zone(item, f"$.zones[{i}]", problems))
        except NRTFormatError as error:
            problems.report(error)
    nrt = NodeResourceTopology(metadata, tuple(zones), attributes, tuple(policies), str(api_version))
    return nrt, tuple(problems.found)


def _meta(doc: Any, problems: _Problems) -> ObjectMeta:
    """The shared metadata reader (:mod:`numaplane.resources.meta`), its errors in this module's words."""
    try:
        return read_object_meta(doc, "$.metadata", lambda e: problems.report(_format_error(e)), check_views=False)
    except MetadataError as error:
        raise _format_error(error) from None


def _format_error(error: MetadataError) -> NRTFormatError:
    if error.path == "$.metadata":
        return NRTFormatError(error.path, "missing or not an object")
    for key in ("labels", "annotations"):
        where = f"$.metadata.{key}"
        if error.path == where or error.path.startswith(f"{where}."):
            return NRTFormatError(where, "expected an object of strings")
    if error.expected == EXPECT_LIST:
        return NRTFormatError(error.path, f"expected a list, got {type(error.value).__name__}")
    if error.expected == EXPECT_OBJECT:
        return NRTFormatError(error.path, "not an object")
    return NRTFormatError(error.path, f"expected {error.expected}, got {error.value!r}")


def _zone(doc: Any, where: str, problems: _Problems) -> Zone:
    if not isinstance(doc, Mapping):
        raise NRTFormatError(where, "not an object")
    name = _str(doc, "name", where, allow_empty=True)
    ztype = _str(doc, "type", where, allow_empty=True)
    parent = doc.get("parent") or ""
    if not isinstance(parent, str):
        raise NRTFormatError(f"{where}.parent", f"expected a string, got {parent!r}")
    costs: list[CostInfo] = []
    for i, item in _items(doc, "costs", where, problems):
        here = f"{where}.costs[{i}]"
        try:
            if not isinstance(item, Mapping):
                raise NRTFormatError(here, "not an object")
            value = item.get("value")
            if isinstance(value, bool) or not isinstance(value, int):
                raise NRTFormatError(f"{here}.value", f"expected an integer, got {value!r}")
            costs.append(CostInfo(_str(item, "name", here), value))
        except NRTFormatError as error:
            problems.report(error)
    resources: list[ResourceInfo] = []
    for i, item in _items(doc, "resources", where, problems):
        try:
            resources.append(_resource(item, f"{where}.resources[{i}]"))
        except NRTFormatError as error:
            problems.report(error)
    return Zone(name, ztype, parent, tuple(costs), _attrs(doc, where, problems), tuple(resources))


def _resource(doc: Any, where: str) -> ResourceInfo:
    if not isinstance(doc, Mapping):
        raise NRTFormatError(where, "not an object")
    name = _str(doc, "name", where)
    raws: list[QuantityText] = []
    values: list[Quantity] = []
    for key in ("capacity", "allocatable", "available"):
        raw = doc.get(key)
        if isinstance(raw, bool) or not isinstance(raw, str | int):
            raise NRTFormatError(f"{where}.{key}", f"expected a quantity string or integer, got {raw!r}")
        try:
            values.append(parse_quantity(raw))
        except QuantityError as error:
            raise NRTFormatError(f"{where}.{key}", error.reason) from error
        raws.append(raw)
    return ResourceInfo(name, values[0], values[1], values[2], (raws[0], raws[1], raws[2]))


def _attrs(doc: Mapping[str, Any], where: str, problems: _Problems) -> tuple[Attribute, ...]:
    out: list[Attribute] = []
    for i, item in _items(doc, "attributes", where, problems):
        here = f"{where}.attributes[{i}]"
        try:
            if not isinstance(item, Mapping):
                raise NRTFormatError(here, "not an object")
            out.append(Attribute(_str(item, "name", here), _str(item, "value", here, allow_empty=True)))
        except NRTFormatError as error:
            problems.report(error)
    return tuple(out)


def _items(doc: Mapping[str, Any], key: str, where: str, problems: _Problems) -> Iterable[tuple[int, Any]]:
    value = doc.get(key)
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        problems.report(NRTFormatError(f"{where}.{key}", f"expected a list, got {type(value).__name__}"))
        return ()
    return enumerate(value)


def _str(doc: Mapping[str, Any], key: str, where: str, *, allow_empty: bool = False) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or (not value and not allow_empty):
        raise NRTFormatError(f"{where}.{key}", f"expected a non-empty string, got {value!r}")
    return value
