"""A NodeResourcePolicy with a hostile quantity (issue 15, item 9): refused by the CRD schema, and a
typed SpecError (reported in the object's own status) if it gets past it, never an untyped crash."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from numaplane.limits import MAX_QUANTITY_CHARS
from numaplane.operator.api.policy import NodeResourcePolicy
from numaplane.operator.crds import node_resource_policy_crd
from numaplane.operator.errors import SpecError


def _policy(quantity: Any) -> dict[str, Any]:
    return {
        "apiVersion": "numaplane.io/v1alpha1",
        "kind": "NodeResourcePolicy",
        "metadata": {"name": "p", "generation": 1},
        "spec": {
            "nodeGroup": "g",
            "config": {
                "memoryManager": {
                    "policy": "Static",
                    "reservedMemory": [{"numaNode": 0, "limits": {"memory": quantity}}],
                }
            },
        },
    }


@pytest.mark.parametrize("quantity", ["9" * 4400, "9" * 65, [1], {"a": 1}, "1e999999"])
def test_a_hostile_quantity_is_a_spec_error(quantity: Any) -> None:
    started = time.perf_counter()
    with pytest.raises(SpecError) as info:
        NodeResourcePolicy.from_dict(_policy(quantity))
    assert time.perf_counter() - started < 1
    assert len(str(info.value)) < 600


def test_the_crd_schema_bounds_quantities() -> None:
    crd = node_resource_policy_crd()
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    limits = schema["properties"]["spec"]["properties"]["config"]["properties"]["memoryManager"]["properties"][
        "reservedMemory"
    ]["items"]["properties"]["limits"]["additionalProperties"]
    assert limits["maxLength"] == MAX_QUANTITY_CHARS
    pattern = re.compile(limits["pattern"])
    assert pattern.search("1Gi") and pattern.search("500m") and not pattern.search("1 Gi")
    reserved = schema["properties"]["spec"]["properties"]["config"]["properties"]["cpuManager"]["properties"][
        "reservedCPUs"
    ]
    assert reserved["maxLength"] > 0
