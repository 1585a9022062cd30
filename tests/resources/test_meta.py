"""Kubernetes object metadata: the one ObjectMeta (round trip, typed views, equality) and its strict reader."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from numaplane.resources.errors import MetadataError, ResourceError
from numaplane.resources.meta import (
    EXPECT_BOOL,
    EXPECT_INTEGER,
    EXPECT_LIST,
    EXPECT_NON_EMPTY_STRING,
    EXPECT_NON_NEGATIVE,
    EXPECT_OBJECT,
    EXPECT_STRING,
    EXPECT_STRING_KEY,
    ObjectMeta,
    OwnerReference,
    name_of,
    namespace_of,
    read_object_meta,
)


def _server_meta() -> dict[str, Any]:
    """Metadata as the API server sends it (keys in its order, one the model has no field for)."""
    return {
        "name": "worker-0",
        "namespace": "numaplane",
        "uid": "9f0c",
        "resourceVersion": "4711",
        "generation": 3,
        "creationTimestamp": "2026-12-07T10:00:00Z",
        "labels": {"app": "x"},
        "annotations": {"numaplane.io/pause-reconciliation": "true"},
        "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "worker-0", "uid": "u1", "controller": True}],
        "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
    }


def test_round_trip_keeps_every_key_and_the_typed_views_read_them() -> None:
    doc = _server_meta()
    meta = read_object_meta(copy.deepcopy(doc))
    assert meta.to_dict() == doc
    # name first, then the keys without a typed field in document order, then the typed maps and lists
    assert list(meta.to_dict()) == [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "managedFields",
        "labels",
        "annotations",
        "ownerReferences",
    ]
    assert (meta.namespace, meta.uid, meta.resource_version, meta.generation, meta.creation_timestamp) == (
        "numaplane",
        "9f0c",
        "4711",
        3,
        "2026-12-07T10:00:00Z",
    )
    assert meta.annotation("numaplane.io/pause-reconciliation") == "true" and meta.annotation("x") is None
    assert meta.owner_references == (OwnerReference("v1", "Node", "worker-0", "u1", True),)


def test_views_are_zero_when_absent_or_unchecked_and_wrong() -> None:
    meta = ObjectMeta("n")
    assert (meta.namespace, meta.uid, meta.resource_version, meta.generation, meta.creation_timestamp) == (
        "",
        "",
        "",
        0,
        "",
    )
    kept = read_object_meta({"name": "n", "uid": 7, "generation": True}, check_views=False)
    assert kept.extra == {"uid": 7, "generation": True}  # verbatim: a foreign object round-trips
    assert (kept.uid, kept.generation) == ("", 0)


def test_equality_covers_the_maps_and_hashing_skips_them() -> None:
    a = ObjectMeta("n", labels={"a": "1", "b": "2"}, extra={"uid": "u"})
    b = ObjectMeta("n", labels={"b": "2", "a": "1"}, extra={"uid": "u"})
    assert a == b and hash(a) == hash(b)
    assert a != ObjectMeta("n", labels={"a": "1"}, extra={"uid": "u"})
    assert a != ObjectMeta("n", labels={"a": "1", "b": "2"}, extra={"uid": "v"})
    assert len({a, b, ObjectMeta("m")}) == 2


@pytest.mark.parametrize(
    ("doc", "path", "expected"),
    [
        (None, "metadata", EXPECT_OBJECT),
        ([], "metadata", EXPECT_OBJECT),
        ({}, "metadata.name", EXPECT_NON_EMPTY_STRING),
        ({"name": ""}, "metadata.name", EXPECT_NON_EMPTY_STRING),
        ({"name": "n", "labels": []}, "metadata.labels", EXPECT_OBJECT),
        ({"name": "n", "annotations": {"a": "1", "b": 2}}, "metadata.annotations.b", EXPECT_STRING),
        ({"name": "n", "labels": {1: "x"}}, "metadata.labels.1", EXPECT_STRING_KEY),
        ({"name": "n", "ownerReferences": {}}, "metadata.ownerReferences", EXPECT_LIST),
        ({"name": "n", "ownerReferences": [1]}, "metadata.ownerReferences[0]", EXPECT_OBJECT),
        (
            {"name": "n", "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "x"}]},
            "metadata.ownerReferences[0].uid",
            EXPECT_NON_EMPTY_STRING,
        ),
        (
            {
                "name": "n",
                "ownerReferences": [{"apiVersion": "v1", "kind": "N", "name": "x", "uid": "u", "controller": 1}],
            },
            "metadata.ownerReferences[0].controller",
            EXPECT_BOOL,
        ),
        ({"name": "n", "uid": 5}, "metadata.uid", EXPECT_STRING),
        ({"name": "n", "namespace": ["x"]}, "metadata.namespace", EXPECT_STRING),
        ({"name": "n", "generation": "3"}, "metadata.generation", EXPECT_INTEGER),
        ({"name": "n", "generation": True}, "metadata.generation", EXPECT_INTEGER),
        ({"name": "n", "generation": -1}, "metadata.generation", EXPECT_NON_NEGATIVE),
    ],
)
def test_strict_reader_names_the_field(doc: Any, path: str, expected: str) -> None:
    with pytest.raises(MetadataError) as err:
        read_object_meta(doc)
    assert (err.value.path, err.value.expected) == (path, expected)
    assert isinstance(err.value, ResourceError) and isinstance(err.value, ValueError)
    assert str(err.value).startswith(f"invalid metadata at {path}: expected {expected}, got ")


def test_reporting_reader_goes_on_and_drops_what_is_malformed() -> None:
    found: list[MetadataError] = []
    doc = {
        "name": "n",
        "labels": {"a": 1},
        "annotations": {"k": "v"},
        "ownerReferences": [{"kind": "Node"}, {"apiVersion": "v1", "kind": "Node", "name": "x", "uid": "u"}],
        "uid": 1,
    }
    meta = read_object_meta(doc, "$.metadata", found.append)
    assert [(e.path, e.expected) for e in found] == [
        ("$.metadata.labels.a", EXPECT_STRING),
        ("$.metadata.ownerReferences[0].apiVersion", EXPECT_NON_EMPTY_STRING),
        ("$.metadata.uid", EXPECT_STRING),
    ]
    assert meta.labels == {} and meta.annotations == {"k": "v"}
    assert meta.owner_references == (OwnerReference("v1", "Node", "x", "u"),)
    assert meta.extra == {"uid": 1}


def test_name_may_be_optional() -> None:
    assert read_object_meta(None, require_name=False) == ObjectMeta("")
    assert read_object_meta({"uid": "u"}, require_name=False) == ObjectMeta("", extra={"uid": "u"})
    found: list[MetadataError] = []
    assert read_object_meta({"name": 3}, report=found.append, require_name=False).name == ""
    assert [(e.path, e.expected) for e in found] == [("metadata.name", EXPECT_STRING)]
    with pytest.raises(MetadataError, match=r"at metadata: expected an object"):
        read_object_meta(7, require_name=False)


def test_accessors_on_raw_objects() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ns"}}
    assert (name_of(pod), namespace_of(pod)) == ("p", "ns")
    assert namespace_of({"metadata": {"name": "node-1"}}) == "" and namespace_of({}) == ""
    with pytest.raises(KeyError):
        name_of({"metadata": {}})
