"""Our NRT CRD: the rendered manifest is current, matches the upstream facts, and every NRT we produce
validates against its openAPIV3Schema (translated to JSON Schema)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from numaplane.nrt.crd import CRD_NAME, QUANTITY_PATTERN, crd_manifest, validation_schema
from numaplane.nrt.fingerprint import compute_fingerprint
from numaplane.nrt.parse import parse_strict
from numaplane.nrt.zones import make_nrt, zones_from_dicts
from numaplane.resources.errors import QuantityError
from numaplane.resources.quantity import parse_quantity

REPO = Path(__file__).resolve().parents[2]
DEPLOYED = REPO / "deploy/crd/noderesourcetopologies.yaml"


def _validator(version: str = "v1alpha2") -> jsonschema.Draft202012Validator:
    schema = validation_schema(version)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_deployed_manifest_is_rendered_from_python() -> None:
    assert yaml.safe_load(DEPLOYED.read_text()) == crd_manifest(), (
        "deploy/crd/noderesourcetopologies.yaml is stale: re-render it from numaplane.nrt.crd.crd_manifest()"
    )


def test_manifest_facts() -> None:
    crd = crd_manifest()
    assert crd["metadata"]["name"] == CRD_NAME == "noderesourcetopologies.topology.node.k8s.io"
    assert crd["metadata"]["annotations"]["api-approved.kubernetes.io"].endswith("/pull/1870")
    spec = crd["spec"]
    assert spec["group"] == "topology.node.k8s.io" and spec["scope"] == "Cluster"
    assert spec["names"] == {
        "kind": "NodeResourceTopology",
        "listKind": "NodeResourceTopologyList",
        "plural": "noderesourcetopologies",
        "singular": "noderesourcetopology",
        "shortNames": ["node-res-topo"],
    }
    versions = {v["name"]: v for v in spec["versions"]}
    assert (versions["v1alpha1"]["served"], versions["v1alpha1"]["storage"]) == (True, False)
    assert (versions["v1alpha2"]["served"], versions["v1alpha2"]["storage"]) == (True, True)
    assert "conversion" not in spec
    v2 = versions["v1alpha2"]["schema"]["openAPIV3Schema"]
    assert v2["required"] == ["zones"] and "attributes" in v2["properties"]
    v1 = versions["v1alpha1"]["schema"]["openAPIV3Schema"]
    assert v1["required"] == ["topologyPolicies", "zones"] and "attributes" not in v1["properties"]
    resource = v2["properties"]["zones"]["items"]["properties"]["resources"]["items"]
    assert sorted(resource["required"]) == ["allocatable", "available", "capacity", "name"]
    assert resource["properties"]["available"]["x-kubernetes-int-or-string"] is True
    assert resource["properties"]["available"]["pattern"] == QUANTITY_PATTERN
    # structural schema rule: every node has a type (or is int-or-string)
    _assert_structural(v2)


def _assert_structural(node: dict[str, Any]) -> None:
    assert "type" in node or node.get("x-kubernetes-int-or-string"), node
    for sub in node.get("properties", {}).values():
        _assert_structural(sub)
    if "items" in node:
        _assert_structural(node["items"])


@pytest.mark.parametrize(
    "text", ["0", "12", "+1", "-1", "1.5", ".5", "5.", "100m", "1Gi", "1e3", "1E-2", "2k", "128974848", "129M", "123Mi"]
)
def test_quantity_pattern_accepts_what_parse_quantity_accepts(text: str) -> None:
    parse_quantity(text)
    assert re.fullmatch(QUANTITY_PATTERN.strip("^$"), text)


@pytest.mark.parametrize("text", ["", "1 Gi", "1gi", "Gi", "1.2.3", "1Gb", "--1", "1e"])
def test_quantity_pattern_rejects_garbage(text: str) -> None:
    assert not re.fullmatch(QUANTITY_PATTERN.strip("^$"), text)
    with pytest.raises(QuantityError):
        parse_quantity(text)


def _conformance_objects(shared_dir: Path) -> list[dict[str, Any]]:
    out = []
    for line in (shared_dir / "conformance/nrt-zones.jsonl").read_text().splitlines():
        case = json.loads(line)
        zones = zones_from_dicts(case["node_name"], case["machine"], case["allocatable"], case["list"], case["config"])
        nrt = make_nrt(
            case["node_name"],
            zones,
            topology_manager_policy="single-numa-node",
            topology_manager_scope="container",
            fingerprint=compute_fingerprint((p["namespace"], p["name"]) for p in case["list"]["pod_resources"]),
            fingerprint_method="with-exclusive-resources",
            owner_node_uid="0a1b",
        )
        out.append(nrt.to_dict())
    return out


def test_every_produced_object_validates(shared_dir: Path) -> None:
    validator = _validator()
    objects = _conformance_objects(shared_dir)
    assert len(objects) == 4
    for doc in objects:
        errors = [e.message for e in validator.iter_errors(doc)]
        assert errors == [], errors
        assert parse_strict(doc).to_dict() == doc
    first = objects[0]
    assert [a["name"] for a in first["attributes"]] == [
        "nodeTopologyPodsFingerprint",
        "nodeTopologyPodsFingerprintMethod",
        "topologyManagerScope",
        "topologyManagerPolicy",
    ]
    assert first["metadata"]["annotations"]["topology.node.k8s.io/fingerprint"].startswith("pfp0v001")
    assert first["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": "TEST", "uid": "0a1b"}]


def _foreign() -> dict[str, Any]:
    return {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": "w", "resourceVersion": "1"},
        "topologyPolicies": ["SingleNUMANodeContainerLevel"],
        "attributes": [{"name": "topologyManagerPolicy", "value": "single-numa-node"}],
        "zones": [
            {
                "name": "node-0",
                "type": "Node",
                "parent": "s0",
                "costs": [{"name": "node-0", "value": 10}],
                "attributes": [{"name": "a", "value": ""}],
                "resources": [{"name": "memory", "capacity": 1024, "allocatable": "1Ki", "available": "0.5Ki"}],
            }
        ],
    }


def test_model_round_trip_validates() -> None:
    doc = parse_strict(_foreign()).to_dict()
    assert list(_validator().iter_errors(doc)) == []


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("zones", 0, "resources", 0, "available"), "lots"),
        (("zones", 0, "resources", 0, "capacity"), 1.5),
        (("zones", 0, "costs", 0, "value"), "10"),
        (("zones", 0, "type"), None),
        (("zones", 0, "resources", 0, "name"), None),
        (("attributes", 0, "value"), None),
        (("zones", 0, "bogus"), 1),
        (("zones",), None),
    ],
)
def test_invalid_objects_are_rejected(path: tuple[Any, ...], value: Any) -> None:
    doc = copy.deepcopy(_foreign())
    target: Any = doc
    for key in path[:-1]:
        target = target[key]
    if value is None:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    assert list(_validator().iter_errors(doc)), f"{path} = {value!r} should be invalid"


def test_v1alpha1_requires_topology_policies() -> None:
    doc = {
        "apiVersion": "topology.node.k8s.io/v1alpha1",
        "kind": "NodeResourceTopology",
        "metadata": {"name": "w"},
        "zones": [],
    }
    assert list(_validator("v1alpha1").iter_errors(doc))
    doc["topologyPolicies"] = ["None"]
    assert list(_validator("v1alpha1").iter_errors(doc)) == []
    with pytest.raises(ValueError):
        validation_schema("v1beta1")
