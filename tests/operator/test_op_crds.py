# ruff: noqa: E402  (optional test dependencies are checked with importorskip before the imports that need them)
"""Our CRDs: structural, valid CRD manifests, and they admit/refuse custom resources as intended.

Admission is simulated with the CRD's own schema (jsonschema, after API-server-style defaulting)
and its CEL rules (cel-python). Every bad input the CRD refuses is also refused by the operator's
Python validation, so a CR that slips past an old CRD still ends Degraded, never deployed.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="needs kubernetes-validate (test extra)")
pytest.importorskip("celpy", reason="needs cel-python (test extra)")

from op_tools import admit, cel_rules, crd_schema

from numaplane.operator.crds import (
    all_crds,
    node_resource_policy_crd,
    numa_resources_operator_crd,
    numa_resources_scheduler_crd,
)
from numaplane.operator.errors import SpecError
from numaplane.operator.render import parse_resources, sample_resources
from numaplane.operator.schema import from_json_schema, structural_problems
from numaplane.policy.config_schema import CONFIG_SCHEMA

CRDS = {c["spec"]["names"]["kind"]: c for c in all_crds()}


@pytest.mark.parametrize("crd", all_crds(), ids=lambda c: c["metadata"]["name"])
def test_crd_is_structural_and_a_valid_manifest(crd: dict[str, Any]) -> None:
    assert structural_problems(crd_schema(crd)) == []
    kubernetes_validate.validate(crd, "1.35.0", strict=True)
    spec = crd["spec"]
    assert spec["scope"] == "Cluster" and spec["group"] == "numaplane.io"
    (version,) = spec["versions"]
    assert version["name"] == "v1" and version["served"] and version["storage"]
    assert version["subresources"] == {"status": {}}


@pytest.mark.parametrize("crd", all_crds(), ids=lambda c: c["metadata"]["name"])
def test_cel_rules_compile(crd: dict[str, Any]) -> None:
    import celpy

    env = celpy.Environment()
    rules = cel_rules(crd_schema(crd))
    for rule in rules:
        env.compile(rule)  # raises on a syntax error
    assert len(rules) == len(set(rules)) or crd["spec"]["names"]["kind"] == "NUMAResourcesOperator"


def test_config_schema_translation_is_structural() -> None:
    schema = from_json_schema(CONFIG_SCHEMA)
    assert structural_problems(schema) == []
    options = schema["properties"]["topologyManager"]["properties"]["options"]
    assert options["additionalProperties"] == {"x-kubernetes-preserve-unknown-fields": True}
    limits = schema["properties"]["memoryManager"]["properties"]["reservedMemory"]["items"]["properties"]["limits"]
    assert limits["additionalProperties"] == {"x-kubernetes-int-or-string": True}
    numa = schema["properties"]["devices"]["additionalProperties"]["items"]["properties"]["numa"]
    assert numa["nullable"] is True and numa["type"] == "array"
    assert schema["properties"]["kind"] == {"enum": ["NodeResourceConfig"], "type": "string"}


def test_translation_refuses_what_it_cannot_express() -> None:
    with pytest.raises(ValueError, match="oneOf"):
        from_json_schema({"type": "object", "properties": {"x": {"oneOf": [{"type": "string"}]}}})
    with pytest.raises(ValueError, match="mixes types"):
        from_json_schema({"enum": ["a", 1]})


def test_structural_checker_catches_violations() -> None:
    bad = {
        "type": "object",
        "properties": {
            "a": {"type": ["string", "null"]},
            "b": {"const": 1},
            "c": {"type": "array"},
            "d": {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}},
            "e": {"type": "object", "properties": {"x": {"type": "string"}}, "additionalProperties": False},
        },
    }
    problems = "\n".join(structural_problems(bad))
    for fragment in (".a: type", ".b: keyword 'const'", ".b: no type", ".c: array without items", ".d: properties and"):
        assert fragment in problems
    assert ".e: additionalProperties must be a schema" in problems


@pytest.mark.parametrize("doc", sample_resources(), ids=lambda d: d["kind"])
def test_samples_are_admitted_and_parse(doc: dict[str, Any]) -> None:
    assert admit(CRDS[doc["kind"]], doc) == []
    parse_resources([doc])


def _nro(**spec: Any) -> dict[str, Any]:
    doc = copy.deepcopy(sample_resources()[0])
    doc["spec"].update(spec)
    return doc


def _group(**fields: Any) -> dict[str, Any]:
    return {"name": "g", "nodeSelector": {"matchLabels": {"pool": "g"}}, **fields}


BAD: list[tuple[str, dict[str, Any], str]] = [
    ("operator name", {**_nro(), "metadata": {"name": "mine"}}, "singleton"),
    ("group name", _nro(nodeGroups=[_group(name="Has_Upper")]), "nodeGroups.0.name"),
    ("no selector", _nro(nodeGroups=[{"name": "g"}]), "'nodeSelector' is a required property"),
    ("enforcement", _nro(nodeGroups=[_group(enforcement="cgroups")]), "'cgroups' is not one of"),
    ("period", _nro(nodeGroups=[_group(config={"infoRefreshPeriod": "ten"})]), "does not match"),
    ("zero period", _nro(nodeGroups=[_group(config={"infoRefreshPeriod": "0s"})]), "must be positive"),
    (
        "toleration",
        _nro(nodeGroups=[_group(config={"tolerations": [{"key": "a", "operator": "Exists", "value": "v"}]})]),
        "value must be empty with Exists",
    ),
    (
        "selector values",
        _nro(nodeGroups=[{"name": "g", "nodeSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}]),
        "values must be non-empty",
    ),
    ("log level", _nro(logLevel="Loud"), "'Loud' is not one of"),
    ("pod exclude", _nro(podExcludes=[{}]), "set namespace, name or both"),
    ("unknown field", _nro(colour="blue"), "'colour' was unexpected"),
]


@pytest.mark.parametrize(("what", "doc", "fragment"), BAD, ids=[b[0] for b in BAD])
def test_bad_operator_refused_by_crd_and_by_python(what: str, doc: dict[str, Any], fragment: str) -> None:
    errors = admit(numa_resources_operator_crd(), doc)
    assert any(fragment in e for e in errors), errors
    with pytest.raises(SpecError):
        parse_resources([doc])


def test_duplicate_group_names_refused_by_list_map_keys() -> None:
    crd = numa_resources_operator_crd()
    groups = crd_schema(crd)["properties"]["spec"]["properties"]["nodeGroups"]
    assert groups["x-kubernetes-list-type"] == "map" and groups["x-kubernetes-list-map-keys"] == ["name"]


def test_overlap_is_left_to_the_operator() -> None:
    """The API server admits overlapping groups (a cross-item rule); the operator degrades instead."""
    doc = _nro(nodeGroups=[_group(name="a", nodeSelector={}), _group(name="b")])
    assert admit(numa_resources_operator_crd(), doc) == []
    with pytest.raises(SpecError) as err:
        parse_resources([doc])
    assert err.value.reason == "OverlappingNodeGroups"


def _nrs(**spec: Any) -> dict[str, Any]:
    doc = copy.deepcopy(sample_resources()[1])
    doc["spec"].update(spec)
    return doc


@pytest.mark.parametrize(
    ("doc", "fragment"),
    [
        ({**_nrs(), "metadata": {"name": "x"}}, "singleton"),
        (_nrs(schedulerName="default-scheduler"), "must not be default-scheduler"),
        (_nrs(replicas=0), "less than the minimum"),
        (_nrs(mode="plugin"), "'plugin' is not one of"),
        (_nrs(cacheResyncPeriod="5"), "does not match"),
        (_nrs(scoringStrategy={"resources": [{"name": "cpu", "weight": 101}]}), "greater than the maximum"),
        (_nrs(kubeSchedulerClient={"qps": 0}), "less than the minimum"),
        (_nrs(kubeSchedulerClient={"qps": 300, "burst": 100}), "burst must be at least qps"),
        (_nrs(kubeSchedulerClient={"qps": 100, "rate": 1}), "'rate' was unexpected"),
        (
            _nrs(mode="standalone", kubeSchedulerClient={"qps": 100}),
            "kubeSchedulerClient applies to mode extender only",
        ),
    ],
)
def test_bad_scheduler_refused_by_crd_and_by_python(doc: dict[str, Any], fragment: str) -> None:
    errors = admit(numa_resources_scheduler_crd(), doc)
    assert any(fragment in e for e in errors), errors
    with pytest.raises(SpecError):
        parse_resources([doc])


def test_default_scheduler_accepted_in_extender_mode_by_crd_and_by_python() -> None:
    doc = _nrs(schedulerName="default-scheduler", mode="extender")
    assert admit(numa_resources_scheduler_crd(), doc) == []
    assert parse_resources([doc])


def test_kube_scheduler_client_defaults_by_crd_and_by_python() -> None:
    doc = _nrs(mode="extender", kubeSchedulerClient={"qps": 1000})
    assert admit(numa_resources_scheduler_crd(), doc) == []
    parsed = parse_resources([doc]).scheduler
    assert parsed is not None
    client = parsed.kube_scheduler_client
    assert (client.qps, client.burst) == (1000, 2000)  # burst omitted: twice qps
    default = parse_resources([_nrs(mode="extender")]).scheduler
    assert default is not None and default.kube_scheduler_client.to_dict() == {"qps": 200, "burst": 400}


def _nrp(config: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(sample_resources()[2])
    doc["spec"]["config"] = config
    return doc


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        ({"topologyManager": {"policy": "strict"}}, "'strict' is not one of"),
        ({"cpuManager": {"policy": "none", "options": {"full-pcpus-only": "true"}}}, "not allowed with policy none"),
        ({"cpuManager": {"reservedCPUs": "zero"}}, "does not match"),
        ({"memoryManager": {"reservedMemory": [{"numaNode": -1, "limits": {}}]}}, "less than the minimum"),
        ({"plugins": ["x"]}, "'plugins' was unexpected"),
    ],
)
def test_bad_policy_refused_by_crd_and_by_python(config: dict[str, Any], fragment: str) -> None:
    errors = admit(node_resource_policy_crd(), _nrp(config))
    assert any(fragment in e for e in errors), errors
    with pytest.raises(SpecError):
        parse_resources([_nrp(config)])


def test_policy_problems_only_python_can_see() -> None:
    """Cross-field config rules the schema cannot state are caught by the agent's own parser."""
    doc = _nrp({"cpuManager": {"reservedCPUs": "0-1", "reservedCPUCount": 4}})
    assert admit(node_resource_policy_crd(), doc) == []
    with pytest.raises(SpecError, match="reservedCPUCount"):
        parse_resources([doc])


def test_schema_checker_refuses_what_the_real_api_server_refused() -> None:
    """The two CRD defects kube-apiserver v1.36 found (issue: real Kubernetes in the test suite)."""
    rule = {"rule": "!has(self.options) || size(self.options) == 0", "message": "m"}
    untyped = {
        "type": "object",
        "properties": {
            "options": {"type": "object", "additionalProperties": {"x-kubernetes-preserve-unknown-fields": True}}
        },
        "x-kubernetes-validations": [rule],
    }
    assert any("CEL cannot see it" in p for p in structural_problems(untyped))
    typed = {**untyped, "properties": {"options": {"type": "object", "additionalProperties": {"type": "string"}}}}
    assert structural_problems(typed) == []

    item = {
        "type": "object",
        "properties": {"a": {"type": "string", "maxLength": 8}},
        "x-kubernetes-validations": [{"rule": "has(self.a)", "message": "m"}],
    }
    unbounded = {"type": "object", "properties": {"groups": {"type": "array", "items": item}}}
    assert any("no maxItems" in p for p in structural_problems(unbounded))
    bounded = {"type": "object", "properties": {"groups": {"type": "array", "items": item, "maxItems": 32}}}
    assert structural_problems(bounded) == []
