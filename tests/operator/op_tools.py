"""Test helpers: check objects against a CRD the way the API server would (schema, defaults, CEL).

* :func:`json_schema` turns a structural ``openAPIV3Schema`` into a JSON Schema (draft 2020-12):
  ``nullable`` → ``null`` allowed, int-or-string → ``[integer, string]``, unknown fields rejected
  (kubectl's default strict field validation), list-map keys unique.
* :func:`apply_defaults` fills ``default`` values like the API server does before validation.
* :func:`cel_violations` evaluates every ``x-kubernetes-validations`` rule with ``self`` bound to
  the node it is declared on (cel-python; Kubernetes' ``duration()`` is standard CEL).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import celpy
import jsonschema


def crd_schema(crd: Mapping[str, Any]) -> dict[str, Any]:
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def json_schema(node: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("enum", "pattern", "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems"):
        if key in node:
            out[key] = node[key]
    for key in ("required", "maxProperties"):
        if key in node:
            out[key] = node[key]
    if node.get("x-kubernetes-int-or-string"):
        out["type"] = ["integer", "string"]
    elif node.get("x-kubernetes-preserve-unknown-fields") and "type" not in node:
        pass
    elif "type" in node:
        out["type"] = [node["type"], "null"] if node.get("nullable") else node["type"]
        if node.get("nullable") and "enum" in out:
            out["enum"] = [*out["enum"], None]
    if "properties" in node:
        out["properties"] = {k: json_schema(v) for k, v in node["properties"].items()}
        if not node.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
    if "additionalProperties" in node:
        out["additionalProperties"] = json_schema(node["additionalProperties"])
    if "items" in node:
        out["items"] = json_schema(node["items"])
    return out


def schema_errors(crd: Mapping[str, Any], obj: Mapping[str, Any]) -> list[str]:
    schema = json_schema(crd_schema(crd))
    schema["properties"]["metadata"] = {"type": "object"}
    validator = jsonschema.Draft202012Validator(schema)
    return sorted(f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(obj))


def apply_defaults(node: Mapping[str, Any], value: Any) -> Any:
    if isinstance(value, dict) and "properties" in node:
        for key, child in node["properties"].items():
            if key not in value and "default" in child:
                value[key] = copy.deepcopy(child["default"])
            if key in value:
                value[key] = apply_defaults(child, value[key])
    elif isinstance(value, dict) and isinstance(node.get("additionalProperties"), Mapping):
        for key in value:
            value[key] = apply_defaults(node["additionalProperties"], value[key])
    elif isinstance(value, list) and "items" in node:
        return [apply_defaults(node["items"], v) for v in value]
    return value


_ENV = celpy.Environment()
_PROGRAMS: dict[str, Any] = {}


def _evaluate(rule: str, value: Any) -> bool:
    program = _PROGRAMS.get(rule)
    if program is None:
        program = _PROGRAMS[rule] = _ENV.program(_ENV.compile(rule))
    result = program.evaluate({"self": celpy.json_to_cel(value)})
    if isinstance(result, Exception):
        raise result
    return bool(result)


def cel_rules(node: Mapping[str, Any]) -> list[str]:
    """Every CEL rule in a schema (for compile checks)."""
    rules = [r["rule"] for r in node.get("x-kubernetes-validations") or []]
    for child in (node.get("properties") or {}).values():
        rules += cel_rules(child)
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), Mapping):
            rules += cel_rules(node[key])
    return rules


def cel_violations(node: Mapping[str, Any], value: Any, path: str = "") -> list[str]:
    out = []
    for r in node.get("x-kubernetes-validations") or []:
        if not _evaluate(r["rule"], value):
            out.append(f"{path or '<root>'}: {r['message']}")
    if isinstance(value, dict):
        for key, child in (node.get("properties") or {}).items():
            if key in value:
                out += cel_violations(child, value[key], f"{path}.{key}")
        extra = node.get("additionalProperties")
        if isinstance(extra, Mapping):
            for key, v in value.items():
                out += cel_violations(extra, v, f"{path}.{key}")
    elif isinstance(value, list) and "items" in node:
        for i, v in enumerate(value):
            out += cel_violations(node["items"], v, f"{path}[{i}]")
    return out


def admit(crd: Mapping[str, Any], obj: Mapping[str, Any]) -> list[str]:
    """What the API server would say about creating ``obj``: schema errors, then CEL violations."""
    value = apply_defaults(crd_schema(crd), copy.deepcopy(dict(obj)))
    errors = schema_errors(crd, value)
    if errors:
        return errors
    return cel_violations(crd_schema(crd), value)
