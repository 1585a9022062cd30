"""The Pod schema of v1.36 (shipped data from the real kube-apiserver): what it refuses, and that any
document — however malformed — gets a list of problems, never an exception."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numaplane.resources.errors import PodSpecError
from numaplane.resources.manifest import pod_from_manifest
from numaplane.resources.podschema import MAX_PROBLEMS, SchemaProblem, pod_schema_problems, schema_kubernetes_version

_FULL = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "labels": {"app.kubernetes.io/name": "x"}, "annotations": {"a": "b"}},
    "spec": {
        "nodeSelector": {"pool": "numa"},
        "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}},
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
        "initContainers": [{"name": "init", "image": "busybox", "restartPolicy": "Always"}],
        "containers": [
            {
                "name": "c",
                "image": "busybox",
                "command": ["sleep", "1d"],
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "livenessProbe": {"httpGet": {"port": "http", "path": "/"}},
                "resources": {
                    "limits": {"cpu": 2, "memory": "1Gi", "example.com/dev": "1"},
                    "claims": [{"name": "gpu"}],
                },
                "env": [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
            }
        ],
        "resources": {"limits": {"cpu": "4"}},
        "overhead": {"cpu": "100m"},
    },
}


def test_the_schema_is_the_api_servers_of_v1_36() -> None:
    assert schema_kubernetes_version().startswith("v1.36.")


def test_a_full_valid_pod_has_no_problem() -> None:
    assert pod_schema_problems(_FULL) == []


def test_unknown_fields_and_wrong_types_are_named_by_path_in_document_order() -> None:
    doc: dict[str, Any] = {
        "kind": "Pod",
        "metadta": {},
        "spec": {
            "containers": [{"name": "c", "resource": {}, "ports": [{"containerPort": "x"}]}],
            "hostNetwork": "yes",
        },
    }
    assert pod_schema_problems(doc) == [
        SchemaProblem("metadta", "unknown field"),
        SchemaProblem("spec.containers[0].resource", "unknown field"),
        SchemaProblem("spec.containers[0].ports[0].containerPort", "expected an integer, got a string"),
        SchemaProblem("spec.hostNetwork", "expected a boolean, got a string"),
    ]


def test_a_quantity_is_a_string_or_a_number_and_int_or_string_fields_take_both() -> None:
    pod = {"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": True}}}]}}
    assert pod_schema_problems(pod) == [
        SchemaProblem("spec.containers[0].resources.limits.cpu", "expected a string or a number, got a boolean")
    ]
    probe = {"spec": {"containers": [{"name": "c", "readinessProbe": {"tcpSocket": {"port": [1]}}}]}}
    assert pod_schema_problems(probe) == [
        SchemaProblem("spec.containers[0].readinessProbe.tcpSocket.port", "expected an integer or a string, got a list")
    ]


def test_null_is_an_unset_field() -> None:
    assert pod_schema_problems({"spec": {"containers": [{"name": "c", "resources": None}], "nodeName": None}}) == []


def test_problems_are_bounded() -> None:
    doc = {"spec": {"containers": [{"name": f"c{i}", f"bad{i}": 1} for i in range(1000)]}}
    assert len(pod_schema_problems(doc)) == MAX_PROBLEMS


def test_pod_from_manifest_is_strict_by_default_and_can_be_relaxed() -> None:
    doc = {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "resource": {}}]}}
    with pytest.raises(PodSpecError) as caught:
        pod_from_manifest(doc)
    assert caught.value.path == "spec.containers[0].resource"
    warnings: list[str] = []
    assert pod_from_manifest(doc, validation="warn", warn=warnings.append).qos_class == "BestEffort"
    assert warnings == ["invalid pod at spec.containers[0].resource: unknown field (ignored: --validate=warn)"]
    assert pod_from_manifest(doc, validation="ignore").name == "p"


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(["spec", "containers", "name", "resources", "limits", "ports", "x", "metadata", "labels"]),
            children,
            max_size=4,
        )
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(_json)
def test_any_document_gets_problems_never_an_exception(doc: Any) -> None:
    problems = pod_schema_problems(doc)
    assert all(isinstance(p, SchemaProblem) and p.path for p in problems)
    assert len(problems) <= MAX_PROBLEMS
