"""``NodeResourcePolicy`` (numaplane.io/v1): the node agent's live policy for one node group.

``spec.nodeGroup`` names a node group of the ``NUMAResourcesOperator`` whose enforcement mode is
``agent``; ``spec.config`` is the agent's configuration document (the schema is
:data:`numaplane.policy.config_schema.CONFIG_SCHEMA`, without ``apiVersion``/``kind``/``metadata``, which
the operator fills in). The operator renders it into the ConfigMap the group's agents read; the
agents reload it without restarting, and report per node whether they applied it.

A policy's *revision* is a content hash of its config (16 hex digits of SHA-256 over canonical
JSON): agents echo the revision they applied or rejected, so status can tell "applied",
"pending" and "rejected" apart per node.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from numaplane.operator.api.meta import API_VERSION, ObjectMeta, Problems, meta_to_dict, read_meta, valid_dns_label
from numaplane.operator.errors import SpecError
from numaplane.policy.config import parse_config
from numaplane.policy.config_schema import API_VERSION as CONFIG_API_VERSION
from numaplane.policy.config_schema import KIND as CONFIG_KIND
from numaplane.policy.errors import PolicyConfigError

__all__ = ["KIND", "NodeResourcePolicy", "config_revision", "default_config_document"]

KIND = "NodeResourcePolicy"
PLURAL = "noderesourcepolicies"
#: Fields of the agent config document that the operator owns (the user writes the rest).
OPERATOR_OWNED_CONFIG_FIELDS = ("apiVersion", "kind", "metadata")


def config_revision(config: Mapping[str, Any]) -> str:
    """16 hex digits of SHA-256 over the canonical JSON of ``config`` (sorted keys, no spaces)."""
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def default_config_document(group: str) -> dict[str, Any]:
    """The document agents of a group run with while no NodeResourcePolicy targets it."""
    return {
        "apiVersion": CONFIG_API_VERSION,
        "kind": CONFIG_KIND,
        "metadata": {"policy": "", "nodeGroup": group, "revision": config_revision({})},
    }


@dataclass(frozen=True, slots=True)
class NodeResourcePolicy:
    """The parsed, validated custom resource; ``config`` is the user's document as given."""

    metadata: ObjectMeta
    node_group: str
    config: Mapping[str, Any] = field(default_factory=dict)

    @property
    def revision(self) -> str:
        return config_revision(self.config)

    def config_document(self) -> dict[str, Any]:
        """The full agent config document: the user's config plus apiVersion, kind and metadata."""
        return {
            "apiVersion": CONFIG_API_VERSION,
            "kind": CONFIG_KIND,
            "metadata": {"policy": self.metadata.name, "nodeGroup": self.node_group, "revision": self.revision},
            **{k: v for k, v in self.config.items() if k not in OPERATOR_OWNED_CONFIG_FIELDS},
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": meta_to_dict(self.metadata),
            "spec": {"nodeGroup": self.node_group, "config": dict(self.config)},
        }

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> NodeResourcePolicy:
        """Parse and validate (the config with the agent's own parser); :class:`SpecError` on problems."""
        meta = read_meta(obj)
        p = Problems()
        spec = p.mapping(obj, "spec", "")
        p.unknown_fields(spec, {"nodeGroup", "config"}, "spec")
        group = p.string(spec, "nodeGroup", "spec")
        if not valid_dns_label(group):
            p.add("spec.nodeGroup", f"{group!r} must name a node group (a DNS label)")
        config = p.mapping(spec, "config", "spec")
        for key in OPERATOR_OWNED_CONFIG_FIELDS:
            if key in config:
                p.add(f"spec.config.{key}", "is set by the operator; remove it")
        p.raise_if_any()
        try:
            parse_config(dict(config))
        except PolicyConfigError as exc:
            raise SpecError([f"spec.config: {exc}"], reason="InvalidPolicy") from exc
        return cls(meta, group, dict(config))
