"""Shared pieces of the ``numaplane.io/v1`` API: constants, field readers, durations, selectors.

Everything here is pure. Readers collect problems instead of raising at the first one, so a
custom resource reports every mistake at once (``SpecError.problems``). Paths in problem texts use
the JSON field names (``spec.nodeGroups[1].config.infoRefreshPeriod``) so users find them.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from numaplane.operator.errors import SpecError
from numaplane.resources.duration import parse_duration
from numaplane.resources.errors import MetadataError
from numaplane.resources.meta import (
    EXPECT_INTEGER,
    EXPECT_NON_NEGATIVE,
    EXPECT_OBJECT,
    EXPECT_STRING,
    ObjectMeta,
    read_object_meta,
)

__all__ = [
    "API_VERSION",
    "GROUP",
    "PAUSE_ANNOTATION",
    "VERSION",
    "LogLevel",
    "ObjectMeta",
    "ObjectRef",
    "Problems",
    "Toleration",
    "is_paused",
    "meta_to_dict",
    "read_meta",
    "valid_label_key",
    "valid_label_value",
]

E = TypeVar("E", bound=enum.StrEnum)

GROUP = "numaplane.io"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"

#: The CRD schema's pattern for durations: the unsigned subset of Go's syntax that
#: :mod:`numaplane.resources.duration` parses (``10s``, ``1m30s``, ``250ms``, ``0``).
DURATION_PATTERN = r"^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$"

#: DNS-1123 label (names of node groups, which end up inside object names).
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_DNS_LABEL = re.compile(DNS_LABEL_PATTERN)
_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def valid_label_key(key: str) -> bool:
    """Kubernetes qualified name: optional DNS-subdomain prefix (≤253) and a name (≤63)."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_LABEL_NAME.match(name))


def valid_label_value(value: str) -> bool:
    """Kubernetes label value: empty, or ≤63 alphanumerics with ``-_.`` inside."""
    return value == "" or (len(value) <= 63 and bool(_LABEL_NAME.match(value)))


def valid_dns_label(name: str, max_length: int = 63) -> bool:
    return 0 < len(name) <= max_length and bool(_DNS_LABEL.match(name))


class LogLevel(enum.StrEnum):
    """Verbosity of the components (upstream's operator LogLevel values)."""

    NORMAL = "Normal"
    DEBUG = "Debug"
    TRACE = "Trace"
    TRACE_ALL = "TraceAll"

    @property
    def cli_value(self) -> str:
        """The ``--log-level`` value of the numaplane components for this level."""
        return "info" if self is LogLevel.NORMAL else "debug"


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class Problems:
    """Collects problems while reading a document; :meth:`raise_if_any` turns them into a SpecError."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, path: str, message: str) -> None:
        self.items.append(f"{path}: {message}" if path else message)

    def raise_if_any(self, reason: str = "InvalidSpec") -> None:
        if self.items:
            raise SpecError(self.items, reason=reason)

    # -- typed readers: return the default (and record a problem) when the value is unusable ------

    def mapping(self, doc: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
        value = doc.get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.add(_join(path, key), "must be an object")
            return {}
        return value

    def sequence(self, doc: Mapping[str, Any], key: str, path: str) -> list[Any]:
        value = doc.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            self.add(_join(path, key), "must be a list")
            return []
        return value

    def string(self, doc: Mapping[str, Any], key: str, path: str, default: str = "") -> str:
        value = doc.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            self.add(_join(path, key), "must be a string")
            return default
        return value

    def integer(
        self, doc: Mapping[str, Any], key: str, path: str, default: int, minimum: int, maximum: int | None = None
    ) -> int:
        value = doc.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            self.add(_join(path, key), "must be an integer")
            return default
        if value < minimum or (maximum is not None and value > maximum):
            bound = f"between {minimum} and {maximum}" if maximum is not None else f"at least {minimum}"
            self.add(_join(path, key), f"must be {bound}, not {value}")
            return default
        return value

    def choice(self, doc: Mapping[str, Any], key: str, path: str, enum_type: type[E], default: E) -> E:
        value = doc.get(key)
        if value is None or value == "":
            return default
        try:
            return enum_type(value)
        except ValueError:
            allowed = ", ".join(m.value for m in enum_type)
            self.add(_join(path, key), f"{value!r} is not one of {allowed}")
            return default

    def duration(self, doc: Mapping[str, Any], key: str, path: str, default: float) -> float:
        value = doc.get(key)
        if value is None:
            return default
        try:
            return parse_duration(value, non_negative=True)
        except ValueError as exc:
            self.add(_join(path, key), str(exc))
            return default

    def unknown_fields(self, doc: Mapping[str, Any], known: set[str], path: str) -> None:
        for key in doc:
            if key not in known:
                self.add(_join(path, key) if path else str(key), "unknown field")


@dataclass(frozen=True, slots=True)
class Toleration:
    """A core/v1 Toleration. ``operator`` is ``Equal`` or ``Exists``; ``effect`` empty means all."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.key:
            out["key"] = self.key
        out["operator"] = self.operator
        if self.value:
            out["value"] = self.value
        if self.effect:
            out["effect"] = self.effect
        if self.toleration_seconds is not None:
            out["tolerationSeconds"] = self.toleration_seconds
        return out

    @classmethod
    def read(cls, doc: Any, path: str, problems: Problems) -> Toleration | None:
        if not isinstance(doc, Mapping):
            problems.add(path, "must be an object")
            return None
        problems.unknown_fields(doc, {"key", "operator", "value", "effect", "tolerationSeconds"}, path)
        key = problems.string(doc, "key", path)
        operator = problems.string(doc, "operator", path, "Equal")
        value = problems.string(doc, "value", path)
        effect = problems.string(doc, "effect", path)
        seconds = doc.get("tolerationSeconds")
        if operator not in ("Equal", "Exists"):
            problems.add(f"{path}.operator", f"{operator!r} is not one of Equal, Exists")
        if operator == "Exists" and value:
            problems.add(f"{path}.value", "must be empty when operator is Exists")
        if not key and operator != "Exists":
            problems.add(f"{path}.operator", "must be Exists when key is empty")
        if effect not in ("", "NoSchedule", "PreferNoSchedule", "NoExecute"):
            problems.add(f"{path}.effect", f"{effect!r} is not one of NoSchedule, PreferNoSchedule, NoExecute")
        if seconds is not None:
            if isinstance(seconds, bool) or not isinstance(seconds, int):
                problems.add(f"{path}.tolerationSeconds", "must be an integer")
                seconds = None
            elif effect != "NoExecute":
                problems.add(f"{path}.tolerationSeconds", "is only valid with effect NoExecute")
        if key and not valid_label_key(key):
            problems.add(f"{path}.key", f"{key!r} is not a valid label key")
        return cls(key, operator, value, effect, seconds)


@dataclass(frozen=True, slots=True, order=True)
class ObjectRef:
    """A reference to a related object, as published in ``status.relatedObjects``."""

    group: str
    resource: str
    name: str
    namespace: str = ""

    def to_dict(self) -> dict[str, str]:
        out = {"group": self.group, "resource": self.resource, "name": self.name}
        if self.namespace:
            out["namespace"] = self.namespace
        return out


#: Annotation that stops reconciliation of the object carrying it (value ``"true"``): the operator
#: then neither writes, prunes nor updates status, so users can tamper with deployed objects.
PAUSE_ANNOTATION = f"{GROUP}/pause-reconciliation"


#: The metadata keys the operator reads besides ``name`` and ``annotations`` (typed views of
#: :class:`ObjectMeta`); :func:`read_meta` keeps only these, so two readings of a custom resource are equal
#: when its name, annotations and these agree (labels and ``managedFields`` do not count).
_READ_KEYS = ("uid", "generation", "resourceVersion", "creationTimestamp")

#: The fields whose problems the operator reports ("" is ``metadata`` itself).
_CHECKED_FIELDS = frozenset(("", "name", "annotations", *_READ_KEYS))

_MESSAGES = {
    EXPECT_OBJECT: "must be an object",
    EXPECT_STRING: "must be a string",
    EXPECT_INTEGER: "must be an integer",
}


def read_meta(obj: Mapping[str, Any]) -> ObjectMeta:
    """The metadata of the custom resource ``obj`` (:class:`ObjectMeta`, the product's one type):
    name, annotations, uid, generation, resourceVersion, creationTimestamp. :class:`SpecError` naming
    every malformed field (``metadata: 1`` in a file given to ``numaplane render --from``; the API
    server never sends one); a missing ``metadata`` or ``name`` reads as empty."""
    p = Problems()

    def report(error: MetadataError) -> None:
        if _field_of(error.path) not in _CHECKED_FIELDS:
            return  # a field the operator does not read (labels, ownerReferences...): not its concern
        if error.expected == EXPECT_NON_NEGATIVE:
            p.add(error.path, f"must be at least 0, not {error.value}")
        else:
            p.add(error.path, _MESSAGES.get(error.expected, f"must be {error.expected}"))

    meta = read_object_meta(obj.get("metadata"), "metadata", report, require_name=False)
    p.raise_if_any()
    return ObjectMeta(
        meta.name, annotations=meta.annotations, extra={k: meta.extra[k] for k in _READ_KEYS if k in meta.extra}
    )


def _field_of(path: str) -> str:
    """``metadata.annotations.x`` → ``annotations``; ``metadata.ownerReferences[0].uid`` →
    ``ownerReferences``; ``metadata`` → ""."""
    rest = path.partition(".")[2]
    return rest.split(".", 1)[0].split("[", 1)[0]


def is_paused(meta: ObjectMeta) -> bool:
    """Whether the resource carries :data:`PAUSE_ANNOTATION` set to ``true`` (or ``enabled``)."""
    return (meta.annotation(PAUSE_ANNOTATION) or "").lower() in ("true", "enabled")


def meta_to_dict(meta: ObjectMeta) -> dict[str, Any]:
    """The metadata a rendered custom resource carries: its name and annotations only."""
    out: dict[str, Any] = {"name": meta.name}
    if meta.annotations:
        out["annotations"] = dict(meta.annotations)
    return out
