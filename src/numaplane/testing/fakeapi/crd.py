"""Minimal ``CustomResourceDefinition`` objects for tests: register a resource with a fake server.

The schema is deliberately open (``x-kubernetes-preserve-unknown-fields``); the project's real
CRD manifests (with full schemas) are rendered elsewhere. Creating the object in a store makes
the resource served, exactly as on a real cluster.
"""

from __future__ import annotations

from typing import Any

from numaplane.kube.resources import Resource

__all__ = ["crd_for"]


def crd_for(res: Resource) -> dict[str, Any]:
    """A ``apiextensions.k8s.io/v1`` CRD serving ``res`` (one version, open schema)."""
    if not res.group:
        raise ValueError("core-group resources cannot be defined by a CRD")
    version: dict[str, Any] = {
        "name": res.version,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
    }
    if res.status_subresource:
        version["subresources"] = {"status": {}}
    names: dict[str, Any] = {
        "kind": res.kind,
        "plural": res.plural,
        "singular": res.singular,
        "listKind": f"{res.kind}List",
    }
    if res.short_names:
        names["shortNames"] = list(res.short_names)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": res.group_plural},
        "spec": {
            "group": res.group,
            "names": names,
            "scope": "Namespaced" if res.namespaced else "Cluster",
            "versions": [version],
        },
    }
