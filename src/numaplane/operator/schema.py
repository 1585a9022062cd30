"""OpenAPI v3 *structural* schemas for CRDs: small builders, a JSON Schema translator, a checker.

Kubernetes requires every CRD schema to be structural: each node states a single ``type`` (or is
``x-kubernetes-int-or-string`` / ``x-kubernetes-preserve-unknown-fields``), objects have either
``properties`` or ``additionalProperties``, arrays have ``items``, and JSON Schema features such as
``const``, ``$ref`` or type unions do not exist. CEL rules (``x-kubernetes-validations``) add the
cross-field checks; they must stay cheap, so every string, list and map they touch is bounded.

:func:`from_json_schema` translates the agent's config JSON Schema (draft 2020-12 subset) into that
form, losing only what structural schemas cannot say (documented per keyword below), and raises
``ValueError`` on keywords it does not know so a future schema change cannot slip through silently.
:func:`structural_problems` checks a schema against the rules; the tests run it on every CRD.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from numaplane.kube.crdschema import crd_rule_problems

__all__ = [
    "array",
    "boolean",
    "from_json_schema",
    "integer",
    "obj",
    "rule",
    "string",
    "string_map",
    "structural_problems",
]

Schema = dict[str, Any]

_TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean"})
_FORBIDDEN = frozenset(
    {"$schema", "$ref", "$id", "$defs", "definitions", "const", "dependencies", "patternProperties", "additionalItems"}
)
_RULE_REASONS = frozenset({"FieldValueInvalid", "FieldValueForbidden", "FieldValueRequired", "FieldValueDuplicate"})


def rule(expression: str, message: str, *, field_path: str | None = None, reason: str | None = None) -> Schema:
    """One ``x-kubernetes-validations`` entry (a CEL rule evaluated with ``self`` = this node)."""
    out: Schema = {"rule": expression, "message": message}
    if field_path:
        out["fieldPath"] = field_path
    if reason:
        out["reason"] = reason
    return out


def _common(node: Schema, description: str, rules: Sequence[Schema], default: Any) -> Schema:
    if description:
        node["description"] = description
    if default is not None:
        node["default"] = default
    if rules:
        node["x-kubernetes-validations"] = list(rules)
    return node


def obj(
    properties: Mapping[str, Schema],
    *,
    required: Iterable[str] = (),
    description: str = "",
    rules: Sequence[Schema] = (),
    default: Any = None,
) -> Schema:
    """An object with known properties (unknown fields are pruned by the API server)."""
    node: Schema = {"type": "object"}
    if properties:
        node["properties"] = dict(properties)
    req = list(required)
    if req:
        node["required"] = req
    return _common(node, description, rules, default)


def string(
    description: str = "",
    *,
    enum: Sequence[str] | None = None,
    pattern: str | None = None,
    default: str | None = None,
    max_length: int | None = None,
    min_length: int | None = None,
    fmt: str | None = None,
    rules: Sequence[Schema] = (),
) -> Schema:
    node: Schema = {"type": "string"}
    if enum is not None:
        node["enum"] = list(enum)
    if pattern is not None:
        node["pattern"] = pattern
    if max_length is not None:
        node["maxLength"] = max_length
    if min_length is not None:
        node["minLength"] = min_length
    if fmt is not None:
        node["format"] = fmt
    return _common(node, description, rules, default)


def integer(
    description: str = "",
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    default: int | None = None,
    fmt: str = "int32",
) -> Schema:
    node: Schema = {"type": "integer", "format": fmt}
    if minimum is not None:
        node["minimum"] = minimum
    if maximum is not None:
        node["maximum"] = maximum
    return _common(node, description, (), default)


def boolean(description: str = "", *, default: bool | None = None) -> Schema:
    return _common({"type": "boolean"}, description, (), default)


def array(
    items: Schema,
    *,
    description: str = "",
    max_items: int | None = None,
    map_keys: Sequence[str] | None = None,
    list_type: str | None = None,
    rules: Sequence[Schema] = (),
) -> Schema:
    """A list. ``map_keys`` makes it ``x-kubernetes-list-type: map`` (keys unique, merged by SSA)."""
    node: Schema = {"type": "array", "items": items}
    if max_items is not None:
        node["maxItems"] = max_items
    if map_keys:
        node["x-kubernetes-list-type"] = "map"
        node["x-kubernetes-list-map-keys"] = list(map_keys)
    elif list_type:
        node["x-kubernetes-list-type"] = list_type
    return _common(node, description, rules, None)


def string_map(values: Schema, *, description: str = "", max_properties: int | None = None) -> Schema:
    node: Schema = {"type": "object", "additionalProperties": values}
    if max_properties is not None:
        node["maxProperties"] = max_properties
    return _common(node, description, (), None)


# -- JSON Schema → structural ------------------------------------------------------------------------

_KEEP = frozenset(
    {
        "description",
        "title",
        "required",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minProperties",
        "maxProperties",
        "format",
        "default",
        "enum",
    }
)
_HANDLED = _KEEP | {"type", "const", "properties", "additionalProperties", "items", "$schema"}
_PY_TYPES: tuple[tuple[type, str], ...] = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"))


def _type_of_value(value: Any) -> str:
    for py, name in _PY_TYPES:
        if isinstance(value, py):
            return name
    raise ValueError(f"cannot infer a schema type for value {value!r}")


def from_json_schema(schema: Mapping[str, Any], path: str = "") -> Schema:
    """Translate a JSON Schema node (and its children) into the structural subset.

    * ``$schema`` is dropped; ``const: v`` becomes ``enum: [v]``; an ``enum`` without ``type`` gets
      the type of its values.
    * ``type: [T, "null"]`` becomes ``type: T`` + ``nullable: true``; ``[integer, string]`` becomes
      ``x-kubernetes-int-or-string``; any other union becomes ``x-kubernetes-preserve-unknown-fields``
      (the API server then accepts any value there; the operator's own validation still checks it).
    * ``additionalProperties: false`` is dropped (structural schemas prune unknown fields instead);
      an object with neither ``properties`` nor ``additionalProperties`` preserves unknown fields.
    """
    unknown = set(schema) - _HANDLED
    if unknown:
        raise ValueError(f"{path or '<root>'}: JSON Schema keywords {sorted(unknown)} have no structural form")
    out: Schema = {k: v for k, v in schema.items() if k in _KEEP}
    if "const" in schema:
        out["enum"] = [schema["const"]]
    raw_type = schema.get("type")
    types: list[str]
    if raw_type is None:
        values = out.get("enum")
        types = sorted({_type_of_value(v) for v in values}) if values else []
        if len(types) > 1:
            raise ValueError(f"{path or '<root>'}: enum mixes types {types}")
    elif isinstance(raw_type, str):
        types = [raw_type]
    else:
        types = list(raw_type)
    if "null" in types:
        types.remove("null")
        out["nullable"] = True
    if len(types) == 1:
        out["type"] = types[0]
    elif set(types) == {"integer", "string"}:
        out["x-kubernetes-int-or-string"] = True
        return out
    else:
        # no type at all (or a union structural schemas cannot state): accept anything here
        out["x-kubernetes-preserve-unknown-fields"] = True
        return out
    if out["type"] == "object":
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        if props:
            out["properties"] = {k: from_json_schema(v, f"{path}.{k}") for k, v in props.items()}
        elif isinstance(extra, Mapping):
            out["additionalProperties"] = from_json_schema(extra, f"{path}.*")
        else:
            out["x-kubernetes-preserve-unknown-fields"] = True
    elif out["type"] == "array":
        items = schema.get("items")
        if not isinstance(items, Mapping):
            raise ValueError(f"{path or '<root>'}: arrays need an items schema")
        out["items"] = from_json_schema(items, f"{path}[]")
    return out


# -- checker -----------------------------------------------------------------------------------------


def structural_problems(schema: Mapping[str, Any], path: str = "", *, root: bool = True) -> list[str]:
    """Every violation of the structural-schema rules in ``schema``, plus (from the root) the CEL rules
    kube-apiserver refuses: naming untyped fields, or evaluated below an unbounded list or map
    (:func:`numaplane.kube.crdschema.crd_rule_problems`)."""
    where = path or "<root>"
    problems: list[str] = crd_rule_problems(schema, path) if root else []
    problems += [f"{where}: keyword {key!r} is not allowed" for key in sorted(set(schema) & _FORBIDDEN)]
    problems += [f"{where}: {p}" for p in _type_problems(schema, path)]
    problems += [f"{where}: {p}" for p in _list_map_problems(schema)]
    problems += [f"{where}: {p}" for p in _validation_problems(schema)]
    props = schema.get("properties")
    meta = (props or {}).get("metadata") if root else None
    if meta is not None and set(meta.get("properties") or {}) - {"name", "generateName"}:
        problems.append(f"{where}: metadata may only constrain name and generateName")
    for name, child in (props or {}).items():
        problems.extend(structural_problems(child, f"{path}.{name}", root=False))
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping):
        problems.extend(structural_problems(extra, f"{path}.*", root=False))
    if isinstance(schema.get("items"), Mapping):
        problems.extend(structural_problems(schema["items"], f"{path}[]", root=False))
    return problems


def _type_problems(schema: Mapping[str, Any], path: str) -> list[str]:
    """One node's type and shape: a single OpenAPI type (unless free-form), properties or
    additionalProperties (a schema) but not both, arrays with items, no combinators."""
    problems = []
    free = schema.get("x-kubernetes-preserve-unknown-fields") is True or schema.get("x-kubernetes-int-or-string")
    typ = schema.get("type")
    if typ is None and not free:
        problems.append("no type")
    elif typ is not None and (not isinstance(typ, str) or typ not in _TYPES):
        problems.append(f"type {typ!r} is not a single OpenAPI type")
    props = schema.get("properties")
    extra = schema.get("additionalProperties")
    if props is not None and extra is not None:
        problems.append("properties and additionalProperties are mutually exclusive")
    if isinstance(extra, bool):
        problems.append("additionalProperties must be a schema, not a boolean")
    if typ == "array" and "items" not in schema:
        problems.append("array without items")
    if typ == "object" and props is None and extra is None and not free and path != ".metadata":
        problems.append("object without properties would prune every field")
    problems += [
        f"{combinator} is not used by numaplane's schemas"
        for combinator in ("anyOf", "oneOf", "allOf", "not")
        if combinator in schema and not schema.get("x-kubernetes-int-or-string")
    ]
    return problems


def _list_map_problems(schema: Mapping[str, Any]) -> list[str]:
    """A ``list-type: map`` names its keys, and every key is required or defaulted in the items."""
    if schema.get("x-kubernetes-list-type") != "map":
        return []
    keys = schema.get("x-kubernetes-list-map-keys") or []
    item = schema.get("items") or {}
    problems = [] if keys else ["list-type map without list-map-keys"]
    for key in keys:
        if key not in (item.get("required") or []) and "default" not in (item.get("properties") or {}).get(key, {}):
            problems.append(f"map key {key!r} must be required or defaulted")
    return problems


def _validation_problems(schema: Mapping[str, Any]) -> list[str]:
    """Every ``x-kubernetes-validations`` entry has a rule and, if any, an allowed reason."""
    problems = []
    for i, rule in enumerate(schema.get("x-kubernetes-validations") or []):
        if not isinstance(rule.get("rule"), str) or not rule["rule"]:
            problems.append(f"validation {i} has no rule")
        if "reason" in rule and rule["reason"] not in _RULE_REASONS:
            problems.append(f"validation {i} reason {rule['reason']!r} is not allowed")
    return problems
