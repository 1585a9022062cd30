"""The ``numaplane.io/v1`` CustomResourceDefinitions, rendered from Python.

Each CRD is cluster-scoped, has the ``status`` subresource and a structural schema with CEL rules
for what one object can check about itself: the singleton name, duration and selector shapes,
toleration consistency, refresh-mode/period consistency. Cross-item rules that would be costly in
CEL (overlapping node-group selectors) are checked by the operator (``Degraded`` with the reason).

Bounds (``maxItems``, ``maxLength``, ``maxProperties``) exist so the API server can estimate the
cost of the CEL rules; they are generous for real clusters. The pieces the CRDs share (selectors,
tolerations, conditions, the CRD document itself) are in :mod:`numaplane.operator.crd_parts`.
"""

from __future__ import annotations

from typing import Any

from numaplane.limits import MAX_CPUSET_CHARS, MAX_QUANTITY_CHARS
from numaplane.nrt.crd import QUANTITY_PATTERN
from numaplane.operator.api import numaresources as nro
from numaplane.operator.api import policy as nrp
from numaplane.operator.api import scheduler as nrs
from numaplane.operator.api.meta import DNS_LABEL_PATTERN
from numaplane.operator.crd_parts import (
    AGE_COLUMN,
    condition_column,
    conditions_schema,
    crd_document,
    duration_schema,
    label_selector_schema,
    log_level_schema,
    namespaced_name_schema,
    node_group_config_schema,
    related_objects_schema,
    singleton_rule,
)
from numaplane.operator.schema import (
    Schema,
    array,
    boolean,
    from_json_schema,
    integer,
    obj,
    rule,
    string,
)
from numaplane.placement.model.strategies import DEFAULT_STRATEGY, STRATEGY_TYPES
from numaplane.policy.config_schema import CONFIG_SCHEMA

__all__ = ["all_crds", "node_resource_policy_crd", "numa_resources_operator_crd", "numa_resources_scheduler_crd"]


def numa_resources_operator_crd() -> dict[str, Any]:
    group = obj(
        {
            "name": string(
                "Group name; used in object names.",
                pattern=DNS_LABEL_PATTERN,
                max_length=nro.MAX_GROUP_NAME,
                min_length=1,
            ),
            "nodeSelector": label_selector_schema("Nodes of the group ({} selects every node)."),
            "enforcement": string(
                "kubelet: the kubelet's managers allocate; agent: numaplane's agent allocates via NRI.",
                enum=[v.value for v in nro.Enforcement],
                default=nro.Enforcement.KUBELET.value,
            ),
            "config": node_group_config_schema(),
        },
        required=["name", "nodeSelector"],
    )
    pod_exclude = obj(
        {
            "namespace": string("Glob pattern on the pod's namespace.", max_length=253),
            "name": string("Glob pattern on the pod's name.", max_length=253),
        },
        rules=[rule("has(self.namespace) || has(self.name)", "set namespace, name or both")],
    )
    spec = obj(
        {
            "nodeGroups": array(
                group,
                description="Groups of nodes running the exporter (and the agent in agent mode).",
                max_items=nro.MAX_NODE_GROUPS,
                map_keys=["name"],
            ),
            "podExcludes": array(
                pod_exclude, description="Pods the exporter ignores.", max_items=64, list_type="atomic"
            ),
            "logLevel": log_level_schema(),
        }
    )
    group_status = obj(
        {
            "name": string(max_length=nro.MAX_GROUP_NAME),
            "selector": string("The group's selector in kubectl syntax.", max_length=4096),
            "enforcement": string(max_length=32),
            "config": node_group_config_schema(),
            "daemonSets": array(namespaced_name_schema(), list_type="atomic", max_items=4),
            "desiredNodes": integer(minimum=0),
            "readyNodes": integer(minimum=0),
        },
        required=["name"],
    )
    status = obj(
        {
            "observedGeneration": integer(minimum=0, fmt="int64"),
            "conditions": conditions_schema(),
            # Bounded like the spec's list: the config's CEL rule is costed per item (the API server
            # refuses the CRD when the status list is unbounded).
            "nodeGroups": array(group_status, map_keys=["name"], max_items=nro.MAX_NODE_GROUPS),
            "daemonSets": array(
                namespaced_name_schema(),
                description="Exporter and agent DaemonSets that are ready.",
                max_items=2 * nro.MAX_NODE_GROUPS,
            ),
            "relatedObjects": related_objects_schema(),
        }
    )
    return crd_document(
        nro.KIND,
        nro.PLURAL,
        ["numaresop"],
        "Deploys the NUMA resources stack (exporter, optional agent) on groups of nodes. Singleton.",
        spec,
        status,
        root_rules=[singleton_rule(nro.SINGLETON_NAME, nro.KIND)],
        columns=[condition_column("Available"), condition_column("Degraded"), AGE_COLUMN],
    )


def numa_resources_scheduler_crd() -> dict[str, Any]:
    weight = obj(
        {
            "name": string("Resource name (cpu, memory, hugepages-1Gi, vendor.com/gpu...).", max_length=253),
            "weight": integer(minimum=1, maximum=nrs.MAX_WEIGHT, default=1),
        },
        required=["name"],
    )
    spec = obj(
        {
            "schedulerName": string(
                "Profile name pods set in spec.schedulerName.",
                pattern=DNS_LABEL_PATTERN,
                max_length=63,
                default=nrs.DEFAULT_SCHEDULER_NAME,
            ),
            "mode": string(
                "standalone: numaplane's scheduler; extender: stock kube-scheduler plus numaplane's extender.",
                enum=[v.value for v in nrs.SchedulerMode],
                default=nrs.SchedulerMode.STANDALONE.value,
            ),
            "kubeSchedulerImage": string(
                "kube-scheduler image for extender mode: registry.k8s.io/kube-scheduler with a release tag"
                " (:vX.Y.Z) and/or a digest (@sha256:...); no other image (it runs with rights to bind and"
                " delete every pod).",
                min_length=1,
                max_length=256,
                pattern=nrs.KUBE_SCHEDULER_IMAGE_PATTERN,
                default=nrs.DEFAULT_KUBE_SCHEDULER_IMAGE,
            ),
            "kubeSchedulerClient": obj(
                {
                    "qps": integer(
                        "Requests per second of kube-scheduler's API client (clientConnection.qps).",
                        minimum=1,
                        maximum=nrs.MAX_CLIENT_QPS,
                        default=nrs.DEFAULT_CLIENT_QPS,
                    ),
                    "burst": integer(
                        "Burst of kube-scheduler's API client (clientConnection.burst); twice qps when omitted.",
                        minimum=1,
                        maximum=nrs.MAX_CLIENT_BURST,
                    ),
                },
                description="Extender mode: the rate limit of kube-scheduler's API client (a binding and an"
                " Event per pod; kube-scheduler's own default 50/100 caps it near 25-50 pods/s). Refused in"
                " standalone mode (numaplane scheduler run has no client-side limit).",
                rules=[
                    rule(
                        "!has(self.burst) || !has(self.qps) || self.burst >= self.qps",
                        "burst must be at least qps",
                        field_path=".burst",
                    )
                ],
            ),
            "cacheResyncPeriod": duration_schema("Resync period of the NRT cache; 0s disables resync.", "5s"),
            "scoringStrategy": obj(
                {
                    "type": string(enum=list(STRATEGY_TYPES), default=DEFAULT_STRATEGY.value),
                    "resources": array(weight, max_items=32, map_keys=["name"]),
                }
            ),
            "schedulerInformer": string(
                "Pod informer of the scheduler's cache.",
                enum=[v.value for v in nrs.InformerMode],
                default=nrs.InformerMode.DEDICATED.value,
            ),
            "replicas": integer(
                "Scheduler replicas; leader election when more than one.",
                minimum=1,
                maximum=nrs.MAX_REPLICAS,
                default=1,
            ),
            "logLevel": log_level_schema(),
            "dra": string(
                "Enabled: the standalone scheduler allocates pods' DRA claims in the zone of their CPUs"
                " (scheduler run --dra); in extender mode the filter drops nodes where no zone holds a pod's"
                " CPUs and memory with a free device of each claim (scheduler extender --dra).",
                enum=[v.value for v in nrs.SchedulerDRA],
                default=nrs.SchedulerDRA.DISABLED.value,
            ),
        },
        rules=[
            rule(
                "!has(self.schedulerName) || self.schedulerName != 'default-scheduler'"
                " || (has(self.mode) && self.mode == 'extender')",
                "must not be default-scheduler unless mode is extender",
                field_path=".schedulerName",
            ),
            rule(
                "!has(self.kubeSchedulerClient) || (has(self.mode) && self.mode == 'extender')",
                "kubeSchedulerClient applies to mode extender only",
                field_path=".kubeSchedulerClient",
            ),
        ],
    )
    status = obj(
        {
            "observedGeneration": integer(minimum=0, fmt="int64"),
            "conditions": conditions_schema(),
            "deployment": namespaced_name_schema(),
            "schedulerName": string(),
            "cacheResyncPeriod": string(),
            "relatedObjects": related_objects_schema(),
        }
    )
    return crd_document(
        nrs.KIND,
        nrs.PLURAL,
        ["numaressched"],
        "Deploys the NUMA-aware scheduler. Singleton.",
        spec,
        status,
        root_rules=[singleton_rule(nrs.SINGLETON_NAME, nrs.KIND)],
        columns=[
            {"name": "Scheduler", "type": "string", "jsonPath": ".spec.schedulerName"},
            {"name": "Mode", "type": "string", "jsonPath": ".spec.mode"},
            condition_column("Available"),
            AGE_COLUMN,
        ],
    )


#: Bound on each options map of a NodeResourcePolicy (the kubelet knows fewer than ten options per manager).
MAX_POLICY_OPTIONS = 32


def policy_config_schema() -> Schema:
    """``spec.config``: the agent's CONFIG_SCHEMA in structural form, minus operator-owned fields."""
    schema = from_json_schema(CONFIG_SCHEMA)
    schema.pop("title", None)
    for key in nrp.OPERATOR_OWNED_CONFIG_FIELDS:
        schema["properties"].pop(key, None)
    schema["description"] = "The node agent's resource manager configuration (NodeResourceConfig document)."
    for section in ("cpuManager", "topologyManager"):
        part = schema["properties"].get(section)
        if part is not None and "options" in part["properties"]:
            # Typed string values (the kubelet's map[string]string), bounded: CEL cannot see a field
            # whose values have no type, and a rule over an unbounded map is refused for its cost.
            part["properties"]["options"] = {
                "type": "object",
                "description": 'Policy options, as the kubelet\'s (values are strings, e.g. "true").',
                "maxProperties": MAX_POLICY_OPTIONS,
                "additionalProperties": {"type": "string", "maxLength": 253},
            }
    cpu = schema["properties"].get("cpuManager")
    if cpu is not None:
        cpu.setdefault("x-kubernetes-validations", []).append(
            rule(
                "!has(self.policy) || self.policy != 'none' || !has(self.options) || size(self.options) == 0",
                "options are not allowed with policy none",
                field_path=".options",
            )
        )
        reserved = cpu["properties"].get("reservedCPUs")
        if reserved is not None:
            reserved["pattern"] = r"^\s*$|^\s*[0-9]+(-[0-9]+)?(\s*,\s*[0-9]+(-[0-9]+)?)*\s*$"
            reserved["maxLength"] = MAX_CPUSET_CHARS
    _bound_quantities(schema)
    return schema


def _bound_quantities(node: Any) -> None:
    """Every quantity (int-or-string) of ``node``: the Kubernetes quantity pattern and the length bound
    of :mod:`numaplane.limits`, so the API server refuses a 4,400-digit quantity before the operator
    sees it."""
    if isinstance(node, dict):
        if node.get("x-kubernetes-int-or-string"):
            node.setdefault("pattern", QUANTITY_PATTERN)
            node.setdefault("maxLength", MAX_QUANTITY_CHARS)
        for child in node.values():
            _bound_quantities(child)
    elif isinstance(node, list):
        for child in node:
            _bound_quantities(child)


def node_resource_policy_crd() -> dict[str, Any]:
    spec = obj(
        {
            "nodeGroup": string(
                "Name of a NUMAResourcesOperator node group in agent mode.",
                pattern=DNS_LABEL_PATTERN,
                max_length=nro.MAX_GROUP_NAME,
                min_length=1,
            ),
            "config": policy_config_schema(),
        },
        required=["nodeGroup"],
    )
    node = obj(
        {
            "name": string(),
            "state": string(enum=["Applied", "Pending", "Rejected"]),
            "revision": string("Revision the node's agent last reported."),
            "message": string(),
        },
        required=["name", "state"],
    )
    status = obj(
        {
            "observedGeneration": integer(minimum=0, fmt="int64"),
            "conditions": conditions_schema(),
            "revision": string("Content hash of spec.config that agents must report."),
            "nodes": array(node, map_keys=["name"], description="Per node: applied, pending or rejected."),
            "appliedNodes": integer(minimum=0),
            "rejectedNodes": integer(minimum=0),
            "pendingNodes": integer(minimum=0),
            "paused": boolean(),
        }
    )
    return crd_document(
        nrp.KIND,
        nrp.PLURAL,
        ["nrpolicy"],
        "The node agent's live resource policy for one node group.",
        spec,
        status,
        root_rules=[],
        columns=[
            {"name": "Group", "type": "string", "jsonPath": ".spec.nodeGroup"},
            {"name": "Applied", "type": "integer", "jsonPath": ".status.appliedNodes"},
            {"name": "Rejected", "type": "integer", "jsonPath": ".status.rejectedNodes"},
            condition_column("Available"),
            AGE_COLUMN,
        ],
    )


def all_crds() -> list[dict[str, Any]]:
    """The three numaplane.io CRDs, in a stable order."""
    return [numa_resources_operator_crd(), numa_resources_scheduler_crd(), node_resource_policy_crd()]
