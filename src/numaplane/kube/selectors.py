"""Label and field selectors: parse the Kubernetes string syntax once, match objects many times.

Label selectors support the full syntax: ``k``, ``!k``, ``k=v``, ``k==v``, ``k!=v``,
``k in (a,b)``, ``k notin (a,b)``, ``k>n`` and ``k<n``, joined by commas (all must hold).

Field selectors support ``path=v``, ``path==v`` and ``path!=v`` joined by commas, where ``path`` is
a dotted path into the object (``metadata.name``, ``metadata.namespace``, ``spec.nodeName``,
``status.phase``, ...). A missing field reads as ``""``, so ``spec.nodeName=`` selects unbound
pods, as on a real server. Unlike a real server, any path is accepted for any resource.
Backslash escapes (``\\,``, ``\\=``) in field values are honoured.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FieldSelector",
    "LabelSelector",
    "SelectorError",
    "label_selector_from_match",
]


class SelectorError(ValueError):
    """A selector string is malformed."""


@dataclass(frozen=True, slots=True)
class _LabelReq:
    key: str
    op: str  # exists, !exists, =, !=, in, notin, gt, lt
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, Any]) -> bool:
        present = self.key in labels
        value = str(labels[self.key]) if present else ""
        match self.op:
            case "exists":
                return present
            case "!exists":
                return not present
            case "=":
                return present and value == self.values[0]
            case "!=":
                return not present or value != self.values[0]
            case "in":
                return present and value in self.values
            case "notin":
                return not present or value not in self.values
            case "gt" | "lt":
                try:
                    have, want = int(value), int(self.values[0])
                except ValueError:
                    return False
                return present and (have > want if self.op == "gt" else have < want)
        return False  # pragma: no cover


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError(f"unbalanced ')' in selector {text!r}")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth != 0:
        raise SelectorError(f"unbalanced '(' in selector {text!r}")
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def _parse_label_req(text: str) -> _LabelReq:
    for word, op in ((" notin ", "notin"), (" in ", "in")):
        if word in text:
            key, _, rest = text.partition(word)
            rest = rest.strip()
            if not (rest.startswith("(") and rest.endswith(")")):
                raise SelectorError(f"set selector needs parentheses: {text!r}")
            values = tuple(v.strip() for v in rest[1:-1].split(",") if v.strip())
            return _LabelReq(key.strip(), op, values)
    for token, op in (("!=", "!="), ("==", "="), ("=", "="), (">", "gt"), ("<", "lt")):
        if token in text:
            key, _, value = text.partition(token)
            key = key.strip()
            if not key:
                raise SelectorError(f"missing key in selector requirement {text!r}")
            return _LabelReq(key, op, (value.strip(),))
    if text.startswith("!"):
        return _LabelReq(text[1:].strip(), "!exists")
    if " " in text:
        raise SelectorError(f"malformed selector requirement {text!r}")
    return _LabelReq(text, "exists")


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A parsed label selector; the empty selector matches everything."""

    requirements: tuple[_LabelReq, ...] = ()

    @classmethod
    def parse(cls, text: str | None) -> LabelSelector:
        if not text:
            return cls()
        return cls(tuple(_parse_label_req(part) for part in _split_top_level(text)))

    def matches(self, obj: Mapping[str, Any]) -> bool:
        if not self.requirements:
            return True
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(req.matches(labels) for req in self.requirements)


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts: list[str] = []
    cur: list[str] = []
    escaped = False
    for ch in text:
        if escaped:
            cur.append("\\" + ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == sep:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if escaped:
        cur.append("\\")
    parts.append("".join(cur))
    return parts


def _unescape(text: str) -> str:
    out: list[str] = []
    escaped = False
    for ch in text:
        if escaped:
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        else:
            out.append(ch)
    return "".join(out)


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The string value at dotted ``path`` (``""`` when absent; booleans as ``true``/``false``)."""
    cur: Any = obj
    for part in path.split("."):
        # Objects are plain dicts; the concrete check is much cheaper than the Mapping ABC.
        if not (type(cur) is dict or isinstance(cur, Mapping)) or part not in cur:
            return ""
        cur = cur[part]
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """A parsed field selector: ``(path, equal?, value)`` terms, all of which must hold."""

    terms: tuple[tuple[str, bool, str], ...] = ()

    @classmethod
    def parse(cls, text: str | None) -> FieldSelector:
        if not text:
            return cls()
        terms = []
        for raw in _split_unescaped(text, ","):
            part = raw.strip()
            if not part:
                continue
            if "!=" in part:
                path, _, value = part.partition("!=")
                equal = False
            elif "==" in part:
                path, _, value = part.partition("==")
                equal = True
            elif "=" in part:
                path, _, value = part.partition("=")
                equal = True
            else:
                raise SelectorError(f"field selector term needs =, == or != : {part!r}")
            if not path.strip():
                raise SelectorError(f"missing field path in {part!r}")
            terms.append((path.strip(), equal, _unescape(value.strip())))
        return cls(tuple(terms))

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all((field_value(obj, path) == value) == equal for path, equal, value in self.terms)

    def value_of(self, path: str) -> str | None:
        """The value a ``path=value`` term demands, if there is one (used for fast lookups)."""
        for p, equal, value in self.terms:
            if p == path and equal:
                return value
        return None


def label_selector_from_match(match_labels: Mapping[str, str]) -> str:
    """A selector string from a ``matchLabels`` map (``{"app": "x"}`` → ``"app=x"``)."""
    return ",".join(f"{k}={v}" for k, v in sorted(match_labels.items()))
