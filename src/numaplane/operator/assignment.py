"""Which ``NodeResourcePolicy`` drives which agent-mode node group (pure).

Policies are taken oldest first (creation time, then name); a policy is rejected, with a reason the
controller writes to its status, when its node group does not exist, is in kubelet mode, or is
already driven by an older policy. A group without a policy runs the default document.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from numaplane.operator.api.numaresources import Enforcement, NUMAResourcesOperator
from numaplane.operator.api.policy import NodeResourcePolicy, default_config_document

__all__ = ["PolicyAssignment", "assign_policies", "policy_document"]


@dataclass(frozen=True, slots=True)
class PolicyAssignment:
    """Which policy drives which agent group, and why the others drive none.

    ``by_group`` maps an agent-mode group to its policy. ``rejected`` maps a policy name to
    ``(reason, message)``: unknown group, group in kubelet mode, or another policy (older by
    creation time, then name) already targets the group.
    """

    by_group: Mapping[str, NodeResourcePolicy]
    rejected: Mapping[str, tuple[str, str]]


def assign_policies(nro: NUMAResourcesOperator | None, policies: Sequence[NodeResourcePolicy]) -> PolicyAssignment:
    by_group: dict[str, NodeResourcePolicy] = {}
    rejected: dict[str, tuple[str, str]] = {}
    ordered = sorted(policies, key=lambda p: (p.metadata.creation_timestamp, p.metadata.name))
    for policy in ordered:
        group = nro.group(policy.node_group) if nro is not None else None
        if group is None:
            rejected[policy.metadata.name] = (
                "NodeGroupNotFound",
                f"no node group {policy.node_group!r} in the NUMAResourcesOperator",
            )
        elif group.enforcement is not Enforcement.AGENT:
            rejected[policy.metadata.name] = (
                "NodeGroupNotInAgentMode",
                f"node group {group.name!r} uses enforcement {group.enforcement.value!r}; set it to 'agent'",
            )
        elif group.name in by_group:
            rejected[policy.metadata.name] = (
                "ConflictingPolicy",
                f"node group {group.name!r} is already driven by NodeResourcePolicy "
                f"{by_group[group.name].metadata.name!r}",
            )
        else:
            by_group[group.name] = policy
    return PolicyAssignment(by_group, rejected)


def policy_document(group: str, policy: NodeResourcePolicy | None) -> dict[str, Any]:
    return policy.config_document() if policy is not None else default_config_document(group)
