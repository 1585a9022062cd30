"""Node label selectors of node groups, and the exact test whether two of them can select one node.

A :class:`NodeSelector` is a metav1 ``LabelSelector`` (``matchLabels`` + ``matchExpressions`` with
``In``, ``NotIn``, ``Exists``, ``DoesNotExist``). The empty selector selects every node.

Overlap is decided per label key, which is exact because keys are independent: two selectors can
select a common node iff, for every key, the conjunction of their requirements on that key is
satisfiable (``In`` sets intersected, minus every ``NotIn`` value; ``DoesNotExist`` incompatible with
any requirement that needs the key). :meth:`NodeSelector.witness` returns such a node's labels,
which makes the rejection message concrete ("a node labelled {...} would match both").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from numaplane.operator.api.meta import Problems, valid_label_key, valid_label_value

__all__ = ["NodeSelector", "Requirement"]

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass(frozen=True, slots=True, order=True)
class Requirement:
    """One ``matchExpressions`` entry; ``values`` sorted and de-duplicated."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        if self.operator == "In":
            return present and labels[self.key] in self.values
        return not present or labels[self.key] not in self.values  # NotIn

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "operator": self.operator}
        if self.operator in ("In", "NotIn"):
            out["values"] = list(self.values)
        return out


@dataclass(frozen=True, slots=True)
class NodeSelector:
    """A label selector over nodes. ``match_labels`` is sorted by key; expressions keep their order."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()

    @classmethod
    def of(cls, labels: Mapping[str, str] | None = None, expressions: Iterable[Requirement] = ()) -> NodeSelector:
        return cls(tuple(sorted((labels or {}).items())), tuple(expressions))

    def requirements(self) -> tuple[Requirement, ...]:
        """Every requirement, ``matchLabels`` as single-value ``In``; sorted (canonical form)."""
        reqs = [Requirement(k, "In", (v,)) for k, v in self.match_labels]
        return tuple(sorted(set(reqs) | set(self.match_expressions)))

    def is_empty(self) -> bool:
        return not self.match_labels and not self.match_expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements())

    def describe(self) -> str:
        """The selector in kubectl's string syntax (``a=b,c in (d,e),!f``); ``<all nodes>`` if empty."""
        parts = []
        for r in self.requirements():
            if r.operator == "In" and len(r.values) == 1:
                parts.append(f"{r.key}={r.values[0]}")
            elif r.operator in ("In", "NotIn"):
                parts.append(f"{r.key} {r.operator.lower()} ({','.join(r.values)})")
            elif r.operator == "Exists":
                parts.append(r.key)
            else:
                parts.append(f"!{r.key}")
        return ",".join(parts) or "<all nodes>"

    def witness(self, other: NodeSelector) -> dict[str, str] | None:
        """Labels of a node both selectors select, or ``None`` when no such node can exist."""
        by_key: dict[str, list[Requirement]] = {}
        for r in (*self.requirements(), *other.requirements()):
            by_key.setdefault(r.key, []).append(r)
        labels: dict[str, str] = {}
        for key, reqs in sorted(by_key.items()):
            ops = {r.operator for r in reqs}
            needs_key = bool(ops & {"In", "Exists"})
            if "DoesNotExist" in ops:
                if needs_key:
                    return None
                continue
            allowed: set[str] | None = None
            for r in reqs:
                if r.operator == "In":
                    allowed = set(r.values) if allowed is None else allowed & set(r.values)
            forbidden = {v for r in reqs if r.operator == "NotIn" for v in r.values}
            if allowed is not None:
                allowed -= forbidden
                if not allowed:
                    return None
                labels[key] = min(allowed)
            elif needs_key:
                labels[key] = next(f"v{i}" for i in range(len(forbidden) + 1) if f"v{i}" not in forbidden)
        return labels

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.match_labels:
            out["matchLabels"] = dict(self.match_labels)
        if self.match_expressions:
            out["matchExpressions"] = [r.to_dict() for r in self.match_expressions]
        return out

    def node_affinity_terms(self) -> list[dict[str, Any]]:
        """The selector as ``nodeSelectorTerms`` (one term: requirements are ANDed); ``[]`` if empty."""
        if self.is_empty():
            return []
        return [{"matchExpressions": [r.to_dict() for r in self.requirements()]}]

    @classmethod
    def read(cls, doc: Any, path: str, problems: Problems) -> NodeSelector:
        if doc is None:
            return cls()
        if not isinstance(doc, Mapping):
            problems.add(path, "must be an object")
            return cls()
        problems.unknown_fields(doc, {"matchLabels", "matchExpressions"}, path)
        labels: dict[str, str] = {}
        for key, value in problems.mapping(doc, "matchLabels", path).items():
            if not isinstance(key, str) or not valid_label_key(key):
                problems.add(f"{path}.matchLabels", f"{key!r} is not a valid label key")
            elif not isinstance(value, str) or not valid_label_value(value):
                problems.add(f"{path}.matchLabels.{key}", f"{value!r} is not a valid label value")
            else:
                labels[key] = value
        expressions: list[Requirement] = []
        for i, raw in enumerate(problems.sequence(doc, "matchExpressions", path)):
            where = f"{path}.matchExpressions[{i}]"
            if not isinstance(raw, Mapping):
                problems.add(where, "must be an object")
                continue
            problems.unknown_fields(raw, {"key", "operator", "values"}, where)
            key = problems.string(raw, "key", where)
            op = problems.string(raw, "operator", where)
            values = problems.sequence(raw, "values", where)
            if not valid_label_key(key):
                problems.add(f"{where}.key", f"{key!r} is not a valid label key")
                continue
            if op not in OPERATORS:
                problems.add(f"{where}.operator", f"{op!r} is not one of {', '.join(OPERATORS)}")
                continue
            if op in ("In", "NotIn") and not values:
                problems.add(f"{where}.values", f"must be non-empty for {op}")
                continue
            if op in ("Exists", "DoesNotExist") and values:
                problems.add(f"{where}.values", f"must be empty for {op}")
                continue
            if not all(isinstance(v, str) and valid_label_value(v) for v in values):
                problems.add(f"{where}.values", "must be valid label values")
                continue
            expressions.append(Requirement(key, op, tuple(sorted(set(values)))))
        return cls.of(labels, expressions)
