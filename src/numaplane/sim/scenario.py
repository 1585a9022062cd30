"""What-if scenarios for ``numaplane simulate --from SNAPSHOT``: what changes, given as a file or flags.

Scenario file (YAML or JSON; every key optional)::

    apiVersion: numaplane.io/v1
    kind: WhatIfScenario
    policies:                        # applied in order; a later change wins on the same field
      - nodeSelector: "pool=numa"    # Kubernetes label selector syntax; omitted or "" = every node
        config:                      # a partial NodeResourceConfig document, merged section by section
          topologyManager: {policy: single-numa-node, scope: pod}
          cpuManager: {options: {full-pcpus-only: "true"}}
    workload:                        # added pods: a Workload document (README, "Workload traces")
      pods:
        - {name: db, count: 20, spec: {containers: [...]}}
    schedulers: [default, "numa:LeastAllocated:overreserve"]

Flags give the same: ``--set-policy POLICY[/SCOPE][@SELECTOR]`` (a topology manager change),
``--add-workload FILE``, ``--schedulers``. Flags add to the file's content.

The file is checked against :data:`SCENARIO_SCHEMA` (JSON Schema; each ``config`` section is the
NodeResourceConfig schema's own, :data:`~numaplane.policy.config_schema.CONFIG_SCHEMA`) before it is
read: an unknown field at any level, a wrong type or value, an empty ``config`` are problems naming
their path (``policies[0].nodeSelecter: unknown field``), all listed in one error. The workload is
the Workload reader's to check (pod specs against the Pod schema). A node selector matching no node
is refused when the snapshot is known (:meth:`Scenario.check_selectors`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from numaplane.kube.selectors import LabelSelector, SelectorError
from numaplane.policy.config_schema import API_VERSION, CONFIG_SCHEMA
from numaplane.resources.podschema import Validation
from numaplane.sim.errors import ScenarioError, WorkloadError
from numaplane.sim.spec import SchedulerSpec
from numaplane.sim.workload import PodArrival, parse_workload

__all__ = ["KIND", "SCENARIO_SCHEMA", "PolicyChange", "Scenario", "parse_policy_flag", "parse_scenario"]

KIND = "WhatIfScenario"
TM_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
#: the sections a policy change may set: the NodeResourceConfig schema's, unchanged
_CONFIG_SECTIONS = {k: v for k, v in CONFIG_SCHEMA["properties"].items() if k not in ("apiVersion", "kind", "metadata")}

SCENARIO_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "numaplane WhatIfScenario",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": API_VERSION},
        "kind": {"const": KIND},
        "policies": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["config"],
                "properties": {
                    "nodeSelector": {"type": "string"},
                    "config": {
                        "type": "object",
                        "additionalProperties": False,
                        "minProperties": 1,
                        "properties": _CONFIG_SECTIONS,
                    },
                },
            },
        },
        "workload": {"type": "object"},  # a Workload document: its own reader checks it
        "schedulers": {"type": "array", "items": {"type": "string"}},
    },
}


@dataclass(frozen=True)
class PolicyChange:
    """``config`` (a partial NodeResourceConfig document) for the nodes ``selector`` matches."""

    selector: str
    config: Mapping[str, Any] = field(hash=False)
    _parsed: LabelSelector = field(default_factory=LabelSelector, compare=False, repr=False)
    #: where the change was given (``FILE: policies[0]`` or ``--set-policy '...'``), for errors
    where: str = field(default="", compare=False)

    @staticmethod
    def make(selector: str, config: Mapping[str, Any], where: str) -> PolicyChange:
        try:
            parsed = LabelSelector.parse(selector or None)
        except SelectorError as exc:
            raise ScenarioError(where, f"invalid node selector {selector!r}: {exc}") from exc
        return PolicyChange(selector, config, parsed, where)

    def matches(self, labels: Mapping[str, str]) -> bool:
        return self._parsed.matches({"metadata": {"labels": labels}})


@dataclass(frozen=True)
class Scenario:
    """Policy changes, added pods and the schedulers to compare (none given: the default scheduler)."""

    policies: tuple[PolicyChange, ...] = ()
    workload: tuple[PodArrival, ...] = ()
    schedulers: tuple[SchedulerSpec, ...] = ()

    def overrides(self, labels: Mapping[str, str]) -> dict[str, dict[str, Any]]:
        """The merged config overrides of a node with ``labels``."""
        out: dict[str, dict[str, Any]] = {}
        for change in self.policies:
            if change.matches(labels):
                for section, value in change.config.items():
                    out.setdefault(section, {}).update(value)
        return out

    def check_selectors(self, labels: Sequence[Mapping[str, str]]) -> None:
        """Refuse a policy change whose node selector matches none of the nodes (``labels``, one per node).

        A change that applies nowhere would answer a what-if that changes nothing, with no word said.
        """
        for change in self.policies:
            if not any(change.matches(node) for node in labels):
                raise ScenarioError(
                    change.where or "policy change",
                    f"node selector {change.selector!r} matches none of the snapshot's {len(labels)} node(s)",
                )

    def combined(self, other: Scenario) -> Scenario:
        return Scenario(
            self.policies + other.policies, self.workload + other.workload, self.schedulers + other.schedulers
        )


def parse_policy_flag(text: str) -> PolicyChange:
    """``POLICY[/SCOPE][@SELECTOR]``, e.g. ``single-numa-node``, ``restricted/pod@pool=numa``."""
    where = f"--set-policy {text!r}"
    head, _, selector = text.partition("@")
    policy, _, scope = head.partition("/")
    if policy not in TM_POLICIES:
        raise ScenarioError(where, f"unknown topology manager policy {policy!r} ({', '.join(TM_POLICIES)})")
    tm: dict[str, str] = {"policy": policy}
    if scope:
        if scope not in ("container", "pod"):
            raise ScenarioError(where, f"unknown scope {scope!r} (container, pod)")
        tm["scope"] = scope
    return PolicyChange.make(selector, {"topologyManager": tm}, where)


def parse_schedulers(names: Sequence[str], where: str) -> tuple[SchedulerSpec, ...]:
    out = []
    for name in names:
        try:
            out.append(SchedulerSpec.parse(str(name).strip()))
        except ValueError as exc:
            raise ScenarioError(where, str(exc)) from exc
    return tuple(out)


_TYPE_NAMES = {"object": "a mapping", "array": "a list", "string": "a string", "integer": "an integer"}
_VALUE_NAMES = {
    dict: "a mapping",
    list: "a list",
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "a boolean",
}


def _path(parts: Sequence[str | int]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts).lstrip(".")


def _problems(error: Any) -> list[str]:
    """One jsonschema error in our words, each naming its path inside the scenario."""
    where = _path(list(error.absolute_path))
    at = f"{where}: " if where else ""
    schema, value = error.schema, error.instance
    if error.validator == "additionalProperties" and isinstance(value, Mapping):
        known = tuple(schema.get("properties", {}))
        return [
            f"{_path([*error.absolute_path, str(k)])}: unknown field (known: {', '.join(known)})"
            for k in value
            if k not in known
        ]
    if error.validator == "required":
        return [f"{at}{error.message.replace(' is a required property', ' is required')}"]
    if error.validator == "enum":
        return [f"{at}{value!r} is not one of {', '.join(map(str, schema['enum']))}"]
    if error.validator == "const":
        return [f"{at}expected {schema['const']!r}, got {value!r}"]
    if error.validator == "type":
        wanted = [str(t) for t in (schema["type"] if isinstance(schema["type"], list) else [schema["type"]])]
        expected = " or ".join(_TYPE_NAMES.get(t, t) for t in wanted)
        return [f"{at}expected {expected}, got {_VALUE_NAMES.get(type(value), 'null')}"]
    if error.validator == "minProperties":
        return [f"{at}empty: a policy change must set something"]
    return [f"{at}{error.message}"]


def check_scenario_schema(doc: Mapping[str, Any], source: str) -> None:
    """Refuse ``doc`` unless :data:`SCENARIO_SCHEMA` accepts it; every problem named by its path."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(SCENARIO_SCHEMA)
    errors = sorted(validator.iter_errors(doc), key=lambda e: [str(p) for p in e.absolute_path])
    problems = [p for error in errors for p in _problems(error)]
    if len(problems) == 1:
        raise ScenarioError(source, problems[0])
    if problems:
        raise ScenarioError(source, f"{len(problems)} problems: " + "; ".join(problems))


def parse_scenario(
    doc: Any, source: str, *, validation: Validation = "strict", warn: Callable[[str], None] | None = None
) -> Scenario:
    """Validate a scenario document (see the module docstring); its workload's pod specs are checked
    against the Pod schema as ``validation`` says (:func:`~numaplane.sim.workload.parse_workload`)."""
    if doc is None:
        return Scenario()
    if not isinstance(doc, Mapping):
        raise ScenarioError(source, "a scenario is a mapping (policies, workload, schedulers)")
    if doc.get("kind", KIND) != KIND:  # a document of another kind: say that, not its every field
        raise ScenarioError(f"{source}: kind", f"expected {KIND!r}, got {doc.get('kind')!r}")
    check_scenario_schema(doc, source)
    policies = []
    for i, item in enumerate(doc.get("policies") or []):
        where = f"{source}: policies[{i}]"
        policies.append(PolicyChange.make(item.get("nodeSelector") or "", dict(item["config"]), where))
    workload: list[PodArrival] = []
    if doc.get("workload") is not None:
        try:
            workload = parse_workload(doc["workload"], f"{source}: workload", validation=validation, warn=warn)
        except WorkloadError as exc:
            raise ScenarioError(exc.where, exc.reason) from exc
    names = doc.get("schedulers") or []
    return Scenario(tuple(policies), tuple(workload), parse_schedulers(names, f"{source}: schedulers"))
