"""A Pod manifest checked against the real Pod schema of Kubernetes v1.36, as ``kubectl --validate=strict``.

The schema is data, not code: ``data/pod-openapi.json`` is ``io.k8s.api.core.v1.Pod`` and every
component it references, from the OpenAPI v3 document (``/openapi/v3/api/v1``) of the real
kube-apiserver v1.36 (``scripts/gen_pod_schema.py`` writes it; ``--check`` compares it with a
freshly started API server's).

What is checked (what the API server's strict field validation and decoding refuse):

* **unknown fields** — a key that the object's schema does not declare (``containers[0].resource``,
  ``resouces``) is a problem naming its path; maps (``labels``, ``resources.limits``) take any key;
* **types** — object, list, string, integer, number, boolean; ``x-kubernetes-int-or-string``
  (ports, ``maxSkew``…) is an integer or a string; a quantity is a string or a number;
* ``null`` is an unset field (the API server decodes it so) and is not a problem.

Values (quantity syntax, names, enums) are :func:`~numaplane.resources.pod.parse_pod`'s and the
rest of :mod:`numaplane.resources.manifest`'s to check. Problems are listed in document order, at
most :data:`MAX_PROBLEMS` (the walk stops there, so a huge bad document costs no more).

Reading the packaged data file is the only I/O; it happens once per process.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

__all__ = [
    "MAX_PROBLEMS",
    "VALIDATION_MODES",
    "SchemaProblem",
    "Validation",
    "pod_schema_problems",
    "schema_kubernetes_version",
]

#: How a reader treats what the schema refuses: ``strict`` (an error, the default, as ``kubectl
#: --validate=strict``), ``warn`` (reported, then ignored) or ``ignore`` (not checked).
Validation = Literal["strict", "warn", "ignore"]
VALIDATION_MODES: tuple[Validation, ...] = ("strict", "warn", "ignore")

#: Problems listed at most (the walk stops after as many).
MAX_PROBLEMS = 20

_REF = "#/components/schemas/"


@dataclass(frozen=True)
class SchemaProblem:
    """``path`` (``spec.containers[0].resource``) is refused by the schema for ``reason``."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@functools.cache
def _document() -> dict[str, Any]:
    text = resources.files("numaplane.resources").joinpath("data", "pod-openapi.json").read_text(encoding="utf-8")
    doc: dict[str, Any] = json.loads(text)
    return doc


def schema_kubernetes_version() -> str:
    """The Kubernetes version whose API server the shipped schema came from (``v1.36.2``)."""
    return str(_document()["kubernetesVersion"])


def _components() -> Mapping[str, Any]:
    schemas: Mapping[str, Any] = _document()["components"]["schemas"]
    return schemas


def _resolve(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """``schema`` with ``$ref`` and a one-element ``allOf`` (how OpenAPI v3 wraps a ref with a default) followed."""
    for _ in range(64):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith(_REF):
            schema = _components()[ref.removeprefix(_REF)]
            continue
        all_of = schema.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1 and "type" not in schema and "properties" not in schema:
            schema = all_of[0]
            continue
        return schema
    raise RuntimeError("the shipped Pod schema has a $ref cycle")  # a broken data file, not bad input


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_SCALARS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "string": ("a string", lambda v: isinstance(v, str)),
    "integer": ("an integer", _is_int),
    "number": ("a number", _is_number),
    "boolean": ("a boolean", lambda v: isinstance(v, bool)),
}


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class _Walk:
    def __init__(self) -> None:
        self.problems: list[SchemaProblem] = []

    def add(self, path: str, reason: str) -> None:
        self.problems.append(SchemaProblem(path or "$", reason))

    @property
    def full(self) -> bool:
        return len(self.problems) >= MAX_PROBLEMS

    def check(self, value: Any, schema: Mapping[str, Any], path: str) -> None:
        # Iterative would be needed for unbounded depth; documents reach here through
        # numaplane.documents (nesting bounded) and the Pod schema is finite, so recursion is bounded.
        if self.full or value is None:
            return
        schema = _resolve(schema)
        if schema.get("x-kubernetes-int-or-string"):
            if not (_is_int(value) or isinstance(value, str)):
                self.add(path, f"expected an integer or a string, got {_type_name(value)}")
            return
        one_of = schema.get("oneOf")
        if isinstance(one_of, list) and "type" not in schema:  # a quantity: a string or a number
            if not any(self._accepts(value, _resolve(s)) for s in one_of if isinstance(s, Mapping)):
                kinds = " or ".join(_SCALARS[s["type"]][0] for s in one_of if s.get("type") in _SCALARS)
                self.add(path, f"expected {kinds}, got {_type_name(value)}")
            return
        kind = schema.get("type")
        if kind == "object":
            self._object(value, schema, path)
        elif kind == "array":
            if not isinstance(value, list):
                self.add(path, f"expected a list, got {_type_name(value)}")
                return
            items = schema.get("items")
            if isinstance(items, Mapping):
                for i, item in enumerate(value):
                    self.check(item, items, f"{path}[{i}]")
        elif kind in _SCALARS and not self._accepts(value, schema):
            self.add(path, f"expected {_SCALARS[kind][0]}, got {_type_name(value)}")

    @staticmethod
    def _accepts(value: Any, schema: Mapping[str, Any]) -> bool:
        scalar = _SCALARS.get(schema.get("type", ""))
        return scalar is not None and bool(scalar[1](value))

    def _object(self, value: Any, schema: Mapping[str, Any], path: str) -> None:
        if not isinstance(value, dict):
            self.add(path, f"expected an object, got {_type_name(value)}")
            return
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            if self.full:
                return
            where = _child(path, str(key))
            if isinstance(properties, Mapping):
                field = properties.get(key)
                if field is None:
                    self.add(where, "unknown field")
                    continue
                self.check(item, field, where)
            elif isinstance(additional, Mapping):
                self.check(item, additional, where)
            # an object with neither (free-form, x-kubernetes-preserve-unknown-fields) takes anything


def pod_schema_problems(doc: Any) -> list[SchemaProblem]:
    """What the Pod schema of v1.36 refuses in ``doc`` (a Pod manifest), in document order; ``[]`` when nothing."""
    walk = _Walk()
    walk.check(doc, _components()["io.k8s.api.core.v1.Pod"], "")
    return walk.problems
