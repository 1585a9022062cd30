"""What the API server itself enforces for the node components: ValidatingAdmissionPolicies, as data.

RBAC cannot say "only your own node's object": the exporter's ClusterRole lets it write every
NodeResourceTopology, the agent's Role every pod's status in the node namespace, and the agent's
ClusterRole Events about anything in any namespace. A pod's
ServiceAccount token is bound to the pod, and the API server puts who holds it in the request's user
extras (``authentication.kubernetes.io/pod-name``, ``pod-uid``, and, with ``ServiceAccountTokenPodNodeInfo``
— GA, on by default since v1.32 — ``node-name``). Two policies (``admissionregistration.k8s.io/v1``,
GA since v1.30) compare those extras with the object, as the NodeRestriction admission plugin does
for kubelets (the ServiceAccounts are those of the node namespace, ``Settings.node_namespace``):

* :data:`EXPORTER_POLICY` — a write (create, update, patch) of a ``noderesourcetopologies`` object by
  the exporter's ServiceAccount is allowed only when the object's name is the token's node
  (``node-name`` extra): a compromised node cannot make the others look full or empty;
* :data:`AGENT_POLICY` — an update or patch of ``pods/status`` by the agent's ServiceAccount is allowed
  only on the token's own pod (``pod-name`` and ``pod-uid`` extras). Bound to the node namespace, where
  the agent's Role grants those writes.
* :data:`AGENT_EVENTS_POLICY` — a core/v1 Event created by the agent's ServiceAccount, in any namespace
  (the agent reports containers waiting for CPUs on user pods, ``agent/waitreport.py``), must be about
  a Pod (``involvedObject``: ``v1`` ``Pod`` of the Event's namespace) and name the token's node as its
  reporter: ``source.host`` and ``reportingInstance`` both equal the ``node-name`` extra. A compromised
  agent can still speak about any pod, but only as its own node, which every reader of the Event sees.
  The agent holds no right on ``events.k8s.io`` Events (RBAC), so only the core group is matched.

A request of those ServiceAccounts without the extras (a token not bound to a pod, e.g. from
``kubectl create token``) is refused: the node components run only as pods. Every other user is
untouched (``matchConditions`` select the two ServiceAccounts of the install namespace). Rendered
with the install (``deploy/admission``), not by the operator: the operator holds no right on admission
policies, so it can never weaken them. Pure data, no I/O.
"""

from __future__ import annotations

from typing import Any

from numaplane.operator.render_common import Settings, meta

__all__ = [
    "AGENT_EVENTS_POLICY",
    "AGENT_POLICY",
    "EXPORTER_POLICY",
    "NODE_NAME_EXTRA",
    "POD_NAME_EXTRA",
    "POD_UID_EXTRA",
    "admission_objects",
]

API_VERSION = "admissionregistration.k8s.io/v1"
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"
POD_UID_EXTRA = "authentication.kubernetes.io/pod-uid"
EXPORTER_POLICY = "numaplane-exporter-own-node"
AGENT_POLICY = "numaplane-agent-own-pod"
AGENT_EVENTS_POLICY = "numaplane-agent-events-own-node"
_NRT_GROUP = "topology.node.k8s.io"
_NRT_VERSIONS = ("v1alpha1", "v1alpha2")


def _service_account(settings: Settings, name: str) -> str:
    """The user name of node component ServiceAccount ``name`` (they live in the node namespace)."""
    return f"system:serviceaccount:{settings.node_namespace}:{name}"


def _extra(key: str) -> str:
    """CEL: the single value of user extra ``key`` ('' when absent or not exactly one)."""
    return (
        f"('{key}' in request.userInfo.extra && size(request.userInfo.extra['{key}']) == 1"
        f" ? request.userInfo.extra['{key}'][0] : '')"
    )


def _policy(name: str, component: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": meta(name, component),
        "spec": spec,
    }


def _binding(name: str, component: str, namespace: str | None = None) -> dict[str, Any]:
    """A ``Deny`` binding of policy ``name`` (to the objects of ``namespace`` only, when given)."""
    spec: dict[str, Any] = {"policyName": name, "validationActions": ["Deny"]}
    if namespace is not None:
        spec["matchResources"] = {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        }
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": meta(name, component),
        "spec": spec,
    }


def exporter_policy(settings: Settings) -> dict[str, Any]:
    """NRT writes of the exporter's ServiceAccount: its own node's object only (module docstring)."""
    user = _service_account(settings, "numaplane-exporter")
    node = _extra(NODE_NAME_EXTRA)
    return _policy(
        EXPORTER_POLICY,
        "exporter",
        {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [_NRT_GROUP],
                        "apiVersions": list(_NRT_VERSIONS),
                        "operations": ["CREATE", "UPDATE", "DELETE"],
                        "resources": ["noderesourcetopologies"],
                    }
                ]
            },
            "matchConditions": [{"name": "numaplane-exporter", "expression": f"request.userInfo.username == '{user}'"}],
            "variables": [
                {"name": "node", "expression": node},
                {"name": "target", "expression": "request.name"},
            ],
            "validations": [
                {
                    "expression": "variables.node != '' && variables.node == variables.target",
                    "messageExpression": (
                        "variables.node == ''"
                        " ? 'numaplane-exporter may write NodeResourceTopologies only with a token bound to a pod"
                        f" on a node (no {NODE_NAME_EXTRA} in the request)'"
                        " : 'numaplane-exporter on node ' + variables.node + ' may not write the"
                        " NodeResourceTopology of ' + variables.target"
                    ),
                    "reason": "Forbidden",
                }
            ],
        },
    )


def agent_policy(settings: Settings) -> dict[str, Any]:
    """Status writes of the agent's ServiceAccount: its own pod only (module docstring)."""
    user = _service_account(settings, "numaplane-agent")
    return _policy(
        AGENT_POLICY,
        "agent",
        {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["UPDATE"],
                        "resources": ["pods/status"],
                    },
                ]
            },
            "matchConditions": [{"name": "numaplane-agent", "expression": f"request.userInfo.username == '{user}'"}],
            "variables": [
                {"name": "pod", "expression": _extra(POD_NAME_EXTRA)},
                {"name": "uid", "expression": _extra(POD_UID_EXTRA)},
                {"name": "target", "expression": "request.name"},
                {"name": "targetUID", "expression": "string(object.metadata.uid)"},
            ],
            "validations": [
                {
                    "expression": "variables.pod != '' && variables.pod == variables.target"
                    " && (variables.targetUID == '' || variables.targetUID == variables.uid)",
                    "messageExpression": (
                        "variables.pod == ''"
                        " ? 'numaplane-agent may write pod status only with a token bound to its pod"
                        f" (no {POD_NAME_EXTRA} in the request)'"
                        " : 'numaplane-agent of pod ' + variables.pod + ' may write only its own pod\\'s status,"
                        " not that of pod ' + variables.target"
                    ),
                    "reason": "Forbidden",
                }
            ],
        },
    )


def agent_events_policy(settings: Settings) -> dict[str, Any]:
    """Events of the agent's ServiceAccount: about a Pod, reported as the token's node (module docstring)."""
    user = _service_account(settings, "numaplane-agent")
    involved = "object.involvedObject"
    return _policy(
        AGENT_EVENTS_POLICY,
        "agent",
        {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["events"]},
                ]
            },
            "matchConditions": [{"name": "numaplane-agent", "expression": f"request.userInfo.username == '{user}'"}],
            "variables": [
                {"name": "node", "expression": _extra(NODE_NAME_EXTRA)},
                {
                    "name": "host",
                    "expression": "has(object.source) && has(object.source.host) ? object.source.host : ''",
                },
                {
                    "name": "instance",
                    "expression": "has(object.reportingInstance) ? object.reportingInstance : ''",
                },
                {
                    "name": "aboutPod",
                    "expression": f"has({involved}.kind) && {involved}.kind == 'Pod'"
                    f" && has({involved}.apiVersion) && {involved}.apiVersion == 'v1'"
                    f" && has({involved}.namespace) && {involved}.namespace == request.namespace",
                },
            ],
            "validations": [
                {
                    "expression": "variables.node != '' && variables.host == variables.node"
                    " && variables.instance == variables.node",
                    "messageExpression": (
                        "variables.node == ''"
                        " ? 'numaplane-agent may create Events only with a token bound to a pod on a node"
                        f" (no {NODE_NAME_EXTRA} in the request)'"
                        " : 'numaplane-agent on node ' + variables.node + ' may create Events only as that node"
                        " (source.host ' + variables.host + ', reportingInstance ' + variables.instance + ')'"
                    ),
                    "reason": "Forbidden",
                },
                {
                    "expression": "variables.aboutPod",
                    "message": "numaplane-agent may create Events only about a v1 Pod of the Event's namespace",
                    "reason": "Forbidden",
                },
            ],
        },
    )


def admission_objects(settings: Settings) -> list[dict[str, Any]]:
    """The three policies and their bindings (``Deny``); the agent's own-pod binding is limited to the
    node namespace of ``settings`` (where its Role grants pod status writes), the others apply everywhere."""
    return [
        exporter_policy(settings),
        _binding(EXPORTER_POLICY, "exporter"),
        agent_policy(settings),
        _binding(AGENT_POLICY, "agent", settings.node_namespace),
        agent_events_policy(settings),
        _binding(AGENT_EVENTS_POLICY, "agent"),
    ]
