"""Our CustomResourceDefinition for NodeResourceTopology, rendered from Python.

Written for numaplane from the published facts of the upstream API (group ``topology.node.k8s.io``,
kind/list kind/plural/singular/short name, cluster scope, versions ``v1alpha1`` served and
``v1alpha2`` served + storage, no conversion webhook, the same schema structure), so that objects
valid for upstream are valid for ours and the other way round:

* top level: ``zones`` required; ``topologyPolicies`` (strings) required in v1alpha1, optional and
  deprecated in v1alpha2; ``attributes`` only in v1alpha2;
* zone: ``name``, ``type`` required; ``parent``, ``costs``, ``attributes``, ``resources`` optional;
* cost: ``name`` (string) and ``value`` (int64) required; attribute: ``name`` and ``value`` strings;
* resource: ``name``, ``capacity``, ``allocatable``, ``available`` required; the quantities are
  int-or-string with the standard Kubernetes quantity pattern (:data:`QUANTITY_PATTERN`);
* lists are plain arrays (no list-map keys), so merge patches replace whole lists.

:func:`crd_manifest` returns the manifest as a JSON-ready dict (``deploy/crd/noderesourcetopologies.yaml``
is its YAML rendering); :func:`validation_schema` turns a version's ``openAPIV3Schema`` into a JSON
Schema (draft 2020-12) for validating objects before they are written.
"""

from __future__ import annotations

import copy
from typing import Any, Final

__all__ = ["CRD_NAME", "QUANTITY_PATTERN", "crd_manifest", "validation_schema"]

GROUP: Final = "topology.node.k8s.io"
PLURAL: Final = "noderesourcetopologies"
CRD_NAME: Final = f"{PLURAL}.{GROUP}"
QUANTITY_PATTERN: Final = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


def _string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _quantity(description: str) -> dict[str, Any]:
    return {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": QUANTITY_PATTERN,
        "x-kubernetes-int-or-string": True,
        "description": description,
    }


def _attributes(description: str) -> dict[str, Any]:
    return {
        "type": "array",
        "description": description,
        "items": {
            "type": "object",
            "description": "A named string value.",
            "required": ["name", "value"],
            "properties": {"name": _string("Attribute name."), "value": _string("Attribute value.")},
        },
    }


def _zone() -> dict[str, Any]:
    return {
        "type": "object",
        "description": "A topology zone; a NUMA node is type Node, named node-<id>.",
        "required": ["name", "type"],
        "properties": {
            "name": _string("Zone name, node-<id> for NUMA nodes."),
            "type": _string("Zone type; Node for a NUMA node."),
            "parent": _string("Name of the enclosing zone, if any."),
            "costs": {
                "type": "array",
                "description": "Distances from this zone to other zones.",
                "items": {
                    "type": "object",
                    "description": "Cost (distance) to the named zone.",
                    "required": ["name", "value"],
                    "properties": {
                        "name": _string("Zone the cost refers to."),
                        "value": {"type": "integer", "format": "int64", "description": "Distance (10 = local)."},
                    },
                },
            },
            "attributes": _attributes("Zone-level attributes."),
            "resources": {
                "type": "array",
                "description": "Resources of the zone.",
                "items": {
                    "type": "object",
                    "description": "Capacity, allocatable and available amounts of one resource in the zone.",
                    "required": ["allocatable", "available", "capacity", "name"],
                    "properties": {
                        "name": _string("Resource name (cpu, memory, hugepages-<size>, vendor/device)."),
                        "capacity": _quantity("Total amount in the zone."),
                        "allocatable": _quantity("Amount usable by pods in the zone."),
                        "available": _quantity("Allocatable amount not held by running pods."),
                    },
                },
            },
        },
    }


def _version_schema(version: str) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "apiVersion": _string("Versioned schema of this representation of an object."),
        "kind": _string("REST resource this object represents."),
        "metadata": {"type": "object"},
        "topologyPolicies": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Topology manager policies of the node."
            + (" DEPRECATED (to be removed in v1beta1): use top level attributes." if version != "v1alpha1" else ""),
        },
        "zones": {"type": "array", "description": "Zones of the node.", "items": _zone()},
    }
    required = ["topologyPolicies", "zones"] if version == "v1alpha1" else ["zones"]
    if version != "v1alpha1":
        properties["attributes"] = _attributes("Node-level attributes.")
    return {
        "type": "object",
        "description": "NodeResourceTopology describes a node's resources per topology zone (NUMA node).",
        "required": required,
        "properties": properties,
    }


def crd_manifest() -> dict[str, Any]:
    """The ``apiextensions.k8s.io/v1`` CustomResourceDefinition (a fresh dict on every call)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": CRD_NAME,
            "annotations": {"api-approved.kubernetes.io": "https://github.com/kubernetes/enhancements/pull/1870"},
            "labels": {"app.kubernetes.io/part-of": "numaplane"},
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": "NodeResourceTopology",
                "listKind": "NodeResourceTopologyList",
                "plural": PLURAL,
                "singular": "noderesourcetopology",
                "shortNames": ["node-res-topo"],
            },
            "scope": "Cluster",
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": version == "v1alpha2",
                    "schema": {"openAPIV3Schema": _version_schema(version)},
                }
                for version in ("v1alpha1", "v1alpha2")
            ],
        },
    }


def validation_schema(version: str = "v1alpha2", *, reject_unknown_fields: bool = True) -> dict[str, Any]:
    """A JSON Schema for objects of ``version``, translated from the CRD's OpenAPI v3 subset.

    ``x-kubernetes-int-or-string`` becomes its ``anyOf`` (``pattern`` constrains strings only, as in
    the API server); ``x-kubernetes-*`` keys are dropped. With ``reject_unknown_fields`` every object
    except ``metadata`` gets ``additionalProperties: false``: a field the API server would silently
    prune is reported as an error instead.
    """
    for entry in crd_manifest()["spec"]["versions"]:
        if entry["name"] == version:
            schema = _translate(copy.deepcopy(entry["schema"]["openAPIV3Schema"]), reject_unknown_fields, top=True)
            schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
            return schema
    raise ValueError(f"unknown version {version!r}")


def _translate(node: dict[str, Any], strict: bool, *, top: bool = False) -> dict[str, Any]:
    out = {k: v for k, v in node.items() if not k.startswith("x-kubernetes-")}
    if "properties" in out:
        out["properties"] = {
            name: (sub if name == "metadata" and top else _translate(sub, strict))
            for name, sub in out["properties"].items()
        }
        if strict:
            out["additionalProperties"] = False
    if "items" in out:
        out["items"] = _translate(out["items"], strict)
    return out
