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
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from numaplane.kube.selectors import LabelSelector, SelectorError
from numaplane.policy.config_schema import CONFIG_SCHEMA
from numaplane.resources.podschema import Validation
from numaplane.sim.errors import ScenarioError, WorkloadError
from numaplane.sim.spec import SchedulerSpec
from numaplane.sim.workload import PodArrival, parse_workload

__all__ = ["KIND", "PolicyChange", "Scenario", "parse_policy_flag", "parse_scenario"]

KIND = "WhatIfScenario"
TM_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")


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


def _refuse_unknown(doc: Mapping[Any, Any], known: Sequence[str], where: str) -> None:
    unknown = sorted(str(k) for k in doc if k not in known)
    if unknown:
        raise ScenarioError(f"{where}.{unknown[0]}", f"unknown field (known: {', '.join(known)})")


def _check_config_shape(config: Mapping[Any, Any], where: str) -> None:
    """A partial NodeResourceConfig: known sections, each a mapping of its schema's known fields."""
    sections = {k: v for k, v in CONFIG_SCHEMA["properties"].items() if k not in ("apiVersion", "kind", "metadata")}
    _refuse_unknown(config, tuple(sections), where)
    for name, value in config.items():
        if not isinstance(value, Mapping):
            raise ScenarioError(f"{where}.{name}", "every section must be a mapping")
        schema = sections[name]
        if schema.get("additionalProperties") is False:
            _refuse_unknown(value, tuple(schema.get("properties", {})), f"{where}.{name}")


def parse_scenario(
    doc: Any, source: str, *, validation: Validation = "strict", warn: Callable[[str], None] | None = None
) -> Scenario:
    """Validate a scenario document (see the module docstring); its workload's pod specs are checked
    against the Pod schema as ``validation`` says (:func:`~numaplane.sim.workload.parse_workload`)."""
    if doc is None:
        return Scenario()
    if not isinstance(doc, Mapping):
        raise ScenarioError(source, "a scenario is a mapping (policies, workload, schedulers)")
    if doc.get("kind", KIND) != KIND:
        raise ScenarioError(f"{source}: kind", f"expected {KIND!r}, got {doc.get('kind')!r}")
    unknown = set(doc) - {"apiVersion", "kind", "policies", "workload", "schedulers"}
    if unknown:
        raise ScenarioError(source, f"unknown keys {sorted(map(str, unknown))}")
    policies = []
    raw_policies = doc.get("policies") or []
    if not isinstance(raw_policies, list):
        raise ScenarioError(f"{source}: policies", "expected a list of {nodeSelector?, config: {...}}")
    for i, item in enumerate(raw_policies):
        where = f"{source}: policies[{i}]"
        if not isinstance(item, Mapping) or not isinstance(item.get("config"), Mapping):
            raise ScenarioError(where, "expected {nodeSelector?, config: {...}}")
        _refuse_unknown(item, ("nodeSelector", "config"), where)
        selector = item.get("nodeSelector")
        if selector is not None and not isinstance(selector, str):
            raise ScenarioError(f"{where}.nodeSelector", "expected a label selector string, e.g. 'pool=numa'")
        config = item["config"]
        _check_config_shape(config, f"{where}.config")
        policies.append(PolicyChange.make(selector or "", dict(config), where))
    workload: list[PodArrival] = []
    if doc.get("workload") is not None:
        try:
            workload = parse_workload(doc["workload"], f"{source}: workload", validation=validation, warn=warn)
        except WorkloadError as exc:
            raise ScenarioError(f"{source}: workload", exc.reason if exc.entry is None else str(exc)) from exc
    names = doc.get("schedulers") or []
    if not isinstance(names, list):
        raise ScenarioError(f"{source}: schedulers", "expected a list of scheduler names")
    return Scenario(tuple(policies), tuple(workload), parse_schedulers(names, f"{source}: schedulers"))
