"""The building blocks of the ``numaplane.io/v1`` CRDs: shared schema pieces and the CRD document.

:func:`crd_document` wraps a version's structural schema into a cluster-scoped CRD with the
``status`` subresource and printer columns; the ``*_schema`` functions are the pieces several
CRDs share (label selectors, tolerations, conditions, related objects, durations, log levels, the
node-group config). The CRDs themselves are in :mod:`numaplane.operator.crds`.
"""

from __future__ import annotations

from typing import Any

from numaplane.operator.api import numaresources as nro
from numaplane.operator.api.meta import DURATION_PATTERN, GROUP, VERSION, LogLevel
from numaplane.operator.schema import (
    Schema,
    array,
    integer,
    obj,
    rule,
    string,
    string_map,
)

__all__ = [
    "AGE_COLUMN",
    "CONDITION_TYPES_OPERATOR",
    "LABEL_KEY_MAX",
    "LABEL_VALUE_MAX",
    "condition_column",
    "conditions_schema",
    "crd_document",
    "duration_schema",
    "label_selector_schema",
    "log_level_schema",
    "namespaced_name_schema",
    "node_group_config_schema",
    "related_objects_schema",
    "singleton_rule",
    "toleration_schema",
]

LABEL_KEY_MAX = 317  # 253 prefix + "/" + 63 name
LABEL_VALUE_MAX = 63
CONDITION_TYPES_OPERATOR = ("Available", "Progressing", "Degraded", "Upgradeable")


def duration_schema(description: str, default: str | None = None) -> Schema:
    return string(description, pattern=DURATION_PATTERN, default=default, max_length=32)


def log_level_schema() -> Schema:
    return string(
        "Verbosity of the components: Normal, Debug, Trace or TraceAll.",
        enum=[lv.value for lv in LogLevel],
        default=LogLevel.NORMAL.value,
    )


def label_selector_schema(description: str) -> Schema:
    requirement = obj(
        {
            "key": string("Label key.", max_length=LABEL_KEY_MAX, min_length=1),
            "operator": string("How the key relates to the values.", enum=["In", "NotIn", "Exists", "DoesNotExist"]),
            "values": array(string(max_length=LABEL_VALUE_MAX), max_items=32, list_type="atomic"),
        },
        required=["key", "operator"],
        rules=[
            rule(
                "self.operator in ['In', 'NotIn'] ? (has(self.values) && size(self.values) > 0)"
                " : (!has(self.values) || size(self.values) == 0)",
                "values must be non-empty for In and NotIn, and empty for Exists and DoesNotExist",
            )
        ],
    )
    return obj(
        {
            "matchLabels": string_map(
                string(max_length=LABEL_VALUE_MAX), description="Labels the node must carry.", max_properties=16
            ),
            "matchExpressions": array(requirement, max_items=16, list_type="atomic"),
        },
        description=description,
    )


def toleration_schema() -> Schema:
    return obj(
        {
            "key": string("Taint key; empty with operator Exists tolerates everything.", max_length=LABEL_KEY_MAX),
            "operator": string(enum=["Equal", "Exists"], default="Equal"),
            "value": string(max_length=LABEL_VALUE_MAX),
            "effect": string(enum=["", "NoSchedule", "PreferNoSchedule", "NoExecute"]),
            "tolerationSeconds": integer("Only with effect NoExecute.", fmt="int64"),
        },
        rules=[
            rule(
                "self.operator != 'Exists' || !has(self.value) || self.value == ''", "value must be empty with Exists"
            ),
            rule(
                "self.operator == 'Exists' || (has(self.key) && self.key != '')", "operator must be Exists without key"
            ),
            rule(
                "!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')",
                "tolerationSeconds is only valid with effect NoExecute",
            ),
        ],
    )


def conditions_schema() -> Schema:
    condition = obj(
        {
            "type": string(
                max_length=316,
                pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
            ),
            "status": string(enum=["True", "False", "Unknown"]),
            "observedGeneration": integer(minimum=0, fmt="int64"),
            "lastTransitionTime": string(fmt="date-time"),
            "reason": string(max_length=1024, min_length=1, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"),
            "message": string(max_length=32768),
        },
        required=["type", "status", "lastTransitionTime", "reason", "message"],
    )
    return array(condition, description="Available, Progressing, Degraded, Upgradeable.", map_keys=["type"])


def namespaced_name_schema() -> Schema:
    return obj({"namespace": string(), "name": string()}, required=["name"])


def related_objects_schema() -> Schema:
    return array(
        obj(
            {"group": string(), "resource": string(), "namespace": string(), "name": string()},
            required=["group", "resource", "name"],
        ),
        description="Objects deployed or watched for this resource.",
        list_type="atomic",
    )


def singleton_rule(name: str, kind: str) -> Schema:
    return rule(f"self.metadata.name == '{name}'", f"{kind} is a singleton: metadata.name must be {name}")


def crd_document(
    kind: str,
    plural: str,
    short_names: list[str],
    description: str,
    spec: Schema,
    status: Schema,
    *,
    root_rules: list[Schema],
    columns: list[dict[str, Any]],
) -> dict[str, Any]:
    root = obj(
        {
            "apiVersion": string(),
            "kind": string(),
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
        description=description,
        rules=root_rules,
    )
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{GROUP}",
            "labels": {"app.kubernetes.io/name": "numaplane", "app.kubernetes.io/part-of": "numaplane"},
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": short_names,
                "categories": ["numaplane"],
            },
            "scope": "Cluster",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": root},
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                }
            ],
        },
    }


def condition_column(cond: str) -> dict[str, Any]:
    return {"name": cond, "type": "string", "jsonPath": f'.status.conditions[?(@.type=="{cond}")].status'}


AGE_COLUMN = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


def node_group_config_schema() -> Schema:
    return obj(
        {
            "podsFingerprinting": string(
                "Publish the pod-set fingerprint: Disabled, Enabled (all pods) or EnabledExclusiveResources.",
                enum=[v.value for v in nro.PodsFingerprinting],
                default=nro.PodsFingerprinting.ENABLED_EXCLUSIVE_RESOURCES.value,
            ),
            "infoRefreshMode": string(
                "When the exporter refreshes: Periodic, Events or PeriodicAndEvents.",
                enum=[v.value for v in nro.InfoRefreshMode],
                default=nro.InfoRefreshMode.PERIODIC.value,
            ),
            "infoRefreshPeriod": duration_schema("Period of periodic refreshes (Go duration).", "10s"),
            "infoRefreshPause": string(
                "Enabled: compute but do not publish NodeResourceTopology objects.",
                enum=[v.value for v in nro.InfoRefreshPause],
                default=nro.InfoRefreshPause.DISABLED.value,
            ),
            "tolerations": array(
                toleration_schema(),
                description="If set, replaces the exporter pods' default tolerations.",
                max_items=32,
                list_type="atomic",
            ),
            "dra": string(
                "Enabled: the exporters publish the nodes' DRA devices per NUMA zone (numaplane exporter --dra).",
                enum=[v.value for v in nro.DRA],
                default=nro.DRA.DISABLED.value,
            ),
            "draNumaAttributes": array(
                string(pattern=nro.QUALIFIED_ATTRIBUTE_PATTERN, max_length=96),
                description="Driver-specific device NUMA attributes tried, in order, after"
                " resource.kubernetes.io/numaNode (e.g. gpu.amd.com/numaNode); needs dra: Enabled.",
                max_items=nro.MAX_DRA_NUMA_ATTRIBUTES,
                list_type="set",
            ),
        },
        description="Exporter behaviour for the group (upstream NodeGroupConfig fields and defaults).",
        rules=[
            rule(
                "!(has(self.infoRefreshPeriod) && duration(self.infoRefreshPeriod) == duration('0s')"
                " && self.infoRefreshMode == 'Periodic')",
                "infoRefreshPeriod must be positive when infoRefreshMode is Periodic",
                field_path=".infoRefreshPeriod",
            ),
            rule(
                "!has(self.draNumaAttributes) || size(self.draNumaAttributes) == 0 || self.dra == 'Enabled'",
                "draNumaAttributes needs dra: Enabled",
                field_path=".draNumaAttributes",
            ),
        ],
    )
