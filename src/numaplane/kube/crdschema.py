"""What kube-apiserver does with a CRD's ``openAPIV3Schema``, for the in-memory store and the fake API server.

Three things a real API server does and a fake must do too, or tests pass that fail on a cluster:

* **prune** — fields the schema does not declare are dropped on write (unless
  ``x-kubernetes-preserve-unknown-fields``); ``metadata``, ``apiVersion`` and ``kind`` are kept;
* **validate** — values against the structural schema (types, enums, patterns, bounds, required),
  with ``x-kubernetes-int-or-string`` meaning integer or string, and the CEL rules
  (``x-kubernetes-validations``) evaluated with ``cel-python`` when it is installed (the ``test``
  extra); a failure is one :class:`SchemaViolation` list naming each field's path;
* **refuse the CRD itself** when its CEL rules cannot compile or cost too much — approximated by
  :func:`crd_rule_problems`: a rule naming a field whose values have no type (the API server's CEL
  type for it does not exist: "undefined field"), or a rule evaluated per element of a list or map
  without ``maxItems``/``maxProperties`` (the cost estimate exceeds the budget).

Pure functions over plain dicts; :class:`CRDSchema` caches the compiled validator of one version.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema

__all__ = ["CRDSchema", "cel_invisible", "crd_rule_problems", "prune", "to_json_schema"]

_COPIED = (
    "enum",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "required",
)
_SELF_FIELD = re.compile(r"\bself\.([A-Za-z_][A-Za-z0-9_]*)")
_KEPT_TOP = ("apiVersion", "kind", "metadata")


def to_json_schema(node: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON Schema (draft 2020-12) checking what the structural ``node`` checks (no pruning, no CEL)."""
    out: dict[str, Any] = {k: node[k] for k in _COPIED if k in node}
    if node.get("x-kubernetes-int-or-string"):
        out["type"] = ["integer", "string"]
    elif "type" in node:
        out["type"] = [node["type"], "null"] if node.get("nullable") else node["type"]
        if node["type"] == "number":
            out["type"] = ["number", "null"] if node.get("nullable") else "number"
        if node.get("nullable") and "enum" in out:
            out["enum"] = [*out["enum"], None]
    if isinstance(node.get("properties"), Mapping):
        out["properties"] = {k: to_json_schema(v) for k, v in node["properties"].items()}
    if isinstance(node.get("additionalProperties"), Mapping):
        out["additionalProperties"] = to_json_schema(node["additionalProperties"])
    if isinstance(node.get("items"), Mapping):
        out["items"] = to_json_schema(node["items"])
    for combinator in ("anyOf", "oneOf", "allOf"):
        if combinator in node:
            out[combinator] = [to_json_schema(n) for n in node[combinator]]
    return out


def prune(value: Any, node: Mapping[str, Any], *, root: bool = False) -> Any:
    """``value`` without the fields ``node`` does not declare (a new value; the input is not changed)."""
    if isinstance(value, dict):
        if node.get("x-kubernetes-preserve-unknown-fields") and "properties" not in node:
            return dict(value)
        props = node.get("properties")
        extra = node.get("additionalProperties")
        out: dict[str, Any] = {}
        for key, item in value.items():
            if root and key in _KEPT_TOP:
                out[key] = item
            elif isinstance(props, Mapping) and key in props:
                out[key] = prune(item, props[key])
            elif isinstance(extra, Mapping):
                out[key] = prune(item, extra)
            elif node.get("x-kubernetes-preserve-unknown-fields"):
                out[key] = item
        return out
    if isinstance(value, list) and isinstance(node.get("items"), Mapping):
        return [prune(item, node["items"]) for item in value]
    return value


def cel_invisible(schema: Mapping[str, Any]) -> bool:
    """Whether the API server's CEL type for ``schema`` drops it (no type anywhere to derive one from).

    A field whose schema has no ``type`` (``x-kubernetes-preserve-unknown-fields`` alone), or a map or
    list whose values have none, gets no declared CEL type, so a rule that names it fails to compile
    with "undefined field".
    """
    if schema.get("x-kubernetes-int-or-string"):
        return False
    typ = schema.get("type")
    if typ is None:
        return True
    extra = schema.get("additionalProperties")
    if typ == "object" and isinstance(extra, Mapping) and "properties" not in schema:
        return cel_invisible(extra)
    if typ == "array" and isinstance(schema.get("items"), Mapping):
        return cel_invisible(schema["items"])
    return False


def crd_rule_problems(node: Mapping[str, Any], path: str = "", unbounded: str | None = None) -> list[str]:
    """The CEL rules of a schema that kube-apiserver refuses (see the module docstring), with paths.

    ``unbounded`` names the nearest enclosing list or map without ``maxItems``/``maxProperties``.
    """
    where = path or "<root>"
    problems: list[str] = []
    raw = node.get("properties")
    props: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    for i, r in enumerate(node.get("x-kubernetes-validations") or []):
        rule = str(r.get("rule") or "") if isinstance(r, Mapping) else ""
        for name in sorted(set(_SELF_FIELD.findall(rule))):
            if name in props and cel_invisible(props[name]):
                problems.append(
                    f"{where}: validation {i} names {name!r}, whose values have no type (CEL cannot see it)"
                )
        if unbounded is not None:
            problems.append(
                f"{where}: validation {i} is evaluated per element of {unbounded}, which has no maxItems/maxProperties"
                " (its estimated cost exceeds the API server's budget)"
            )
    for name, child in props.items():
        if isinstance(child, Mapping):
            problems.extend(crd_rule_problems(child, f"{path}.{name}", unbounded))
    extra = node.get("additionalProperties")
    if isinstance(extra, Mapping):
        below = unbounded if "maxProperties" in node else (unbounded or where)
        problems.extend(crd_rule_problems(extra, f"{path}.*", below))
    items = node.get("items")
    if isinstance(items, Mapping):
        below = unbounded if "maxItems" in node else (unbounded or where)
        problems.extend(crd_rule_problems(items, f"{path}[]", below))
    return problems


def _cel_evaluator() -> Any:
    try:
        import celpy  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:  # the test extra is not installed: structural checks only
        return None
    return celpy


@dataclass
class CRDSchema:
    """One served version's schema: :meth:`admit` prunes and validates an object as the API server does."""

    schema: Mapping[str, Any]
    _node: dict[str, Any] = field(init=False, repr=False)
    _validator: Any = field(init=False, repr=False)
    _programs: dict[str, Any] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        # metadata is validated by the API server's own rules, not by the CRD's schema
        props = {k: v for k, v in (self.schema.get("properties") or {}).items() if k != "metadata"}
        self._node = {**self.schema, "properties": props}
        self._validator = jsonschema.Draft202012Validator(to_json_schema(self._node))

    def admit(self, obj: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """``(pruned object, violations)``; violations name the field path and what is wrong."""
        pruned: dict[str, Any] = prune(dict(obj), self.schema, root=True)
        checked = {k: v for k, v in pruned.items() if k != "metadata"}
        violations = [
            f"{'.'.join(str(p) for p in err.absolute_path) or '<root>'}: {err.message}"
            for err in self._validator.iter_errors(checked)
        ]
        if not violations:
            # rules at the root may read metadata.name and metadata.generateName, nothing else of it
            meta = pruned.get("metadata") or {}
            visible = {k: meta[k] for k in ("name", "generateName") if k in meta}
            violations = self._cel(self._node, {**checked, "metadata": visible}, "")
        return pruned, violations

    def _cel(self, node: Mapping[str, Any], value: Any, path: str) -> list[str]:
        celpy = _cel_evaluator()
        if celpy is None:
            return []
        out: list[str] = []
        for r in node.get("x-kubernetes-validations") or []:
            rule = r.get("rule", "")
            if "oldSelf" in rule:  # transition rules need the stored object; not modelled
                continue
            program = self._programs.get(rule)
            if program is None:
                env = celpy.Environment()
                program = self._programs[rule] = env.program(env.compile(rule))
            try:
                result = program.evaluate({"self": celpy.json_to_cel(value)})
            except Exception as exc:  # an evaluation error refuses the object, as on a real server
                out.append(f"{path or '<root>'}: rule {rule!r} failed: {exc}")
                continue
            if isinstance(result, Exception) or not bool(result):
                out.append(f"{path or '<root>'}: Invalid value: {r.get('message') or 'failed rule: ' + rule}")
        if isinstance(value, dict):
            props = node.get("properties") or {}
            for key, child in props.items():
                if key in value:
                    out += self._cel(child, value[key], f"{path}.{key}")
            extra = node.get("additionalProperties")
            if isinstance(extra, Mapping) and not props:
                for key, item in value.items():
                    out += self._cel(extra, item, f"{path}.{key}")
        elif isinstance(value, list) and isinstance(node.get("items"), Mapping):
            for i, item in enumerate(value):
                out += self._cel(node["items"], item, f"{path}[{i}]")
        return out
