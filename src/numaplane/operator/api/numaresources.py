"""``NUMAResourcesOperator`` (numaplane.io/v1): which node groups run the exporter (and agent), and how.

A cluster-scoped singleton named :data:`SINGLETON_NAME`. Each node group selects nodes by label
(vanilla Kubernetes' replacement for OpenShift machine config pools) and gets its own exporter
DaemonSet, plus the agent DaemonSet when its enforcement mode is ``agent``.

Defaults follow upstream's NodeGroupConfig: fingerprinting ``EnabledExclusiveResources``, refresh
mode ``Periodic`` every ``10s``, publication not paused, the manifest's default tolerations. A
missing field and the default value are the same thing: :meth:`NodeGroupConfig.to_dict` always
writes every field (the normalised form shown in ``status.nodeGroups[].config``).

Rules checked here beyond the CRD schema (the API server cannot compare list items cheaply):
node group names unique, no two identical selectors, no two selectors that can select one node.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from numaplane.operator.api.meta import (
    API_VERSION,
    GROUP,
    LogLevel,
    ObjectMeta,
    Problems,
    Toleration,
    meta_to_dict,
    read_meta,
    valid_dns_label,
)
from numaplane.operator.api.selector import NodeSelector
from numaplane.operator.errors import SpecError
from numaplane.resources.duration import format_duration

__all__ = [
    "KIND",
    "NRT_CRD_ANNOTATION",
    "SINGLETON_NAME",
    "Enforcement",
    "InfoRefreshMode",
    "InfoRefreshPause",
    "NUMAResourcesOperator",
    "NodeGroup",
    "NodeGroupConfig",
    "PodExclude",
    "PodsFingerprinting",
]

KIND = "NUMAResourcesOperator"
PLURAL = "numaresourcesoperators"
SINGLETON_NAME = "numaresourcesoperator"
#: ``numaplane.io/nrt-crd: external`` on the CR: the cluster manages the NRT CRD, do not apply ours.
NRT_CRD_ANNOTATION = f"{GROUP}/nrt-crd"
#: Node group names end up in object names (``numaplane-exporter-<group>``): keep them short.
MAX_GROUP_NAME = 40
MAX_NODE_GROUPS = 32


class PodsFingerprinting(enum.StrEnum):
    DISABLED = "Disabled"
    ENABLED = "Enabled"
    ENABLED_EXCLUSIVE_RESOURCES = "EnabledExclusiveResources"


class InfoRefreshMode(enum.StrEnum):
    PERIODIC = "Periodic"
    EVENTS = "Events"
    PERIODIC_AND_EVENTS = "PeriodicAndEvents"


class InfoRefreshPause(enum.StrEnum):
    DISABLED = "Disabled"
    ENABLED = "Enabled"


class DRA(enum.StrEnum):
    """Whether the group's exporters publish DRA device rows per zone (``numaplane exporter --dra``)."""

    DISABLED = "Disabled"
    ENABLED = "Enabled"


#: a device attribute's qualified name, ``<domain>/<name>`` (e.g. ``gpu.amd.com/numaNode``)
QUALIFIED_ATTRIBUTE_PATTERN = r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]{0,30}[A-Za-z0-9])?$"
MAX_DRA_NUMA_ATTRIBUTES = 8


class Enforcement(enum.StrEnum):
    """Who allocates CPUs and memory on the group's nodes."""

    KUBELET = "kubelet"  # the kubelet's own managers; the exporter reads the kubelet's PodResources
    AGENT = "agent"  # numaplane's agent via NRI; the exporter reads the agent's PodResources


@dataclass(frozen=True, slots=True)
class NodeGroupConfig:
    """The exporter's behaviour for one group. ``info_refresh_period_seconds`` is in seconds."""

    pods_fingerprinting: PodsFingerprinting = PodsFingerprinting.ENABLED_EXCLUSIVE_RESOURCES
    info_refresh_mode: InfoRefreshMode = InfoRefreshMode.PERIODIC
    info_refresh_period_seconds: float = 10.0
    info_refresh_pause: InfoRefreshPause = InfoRefreshPause.DISABLED
    #: When non-empty these REPLACE the exporter pods' default tolerations (upstream semantics).
    tolerations: tuple[Toleration, ...] = ()
    #: ``Enabled``: the exporters publish DRA rows (``--dra``), NUMA nodes read from ``resource.kubernetes.io/numaNode``
    #: then each of ``dra_numa_attributes`` (``--dra-numa-attribute``), in order
    dra: DRA = DRA.DISABLED
    dra_numa_attributes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "podsFingerprinting": self.pods_fingerprinting.value,
            "infoRefreshMode": self.info_refresh_mode.value,
            "infoRefreshPeriod": format_duration(self.info_refresh_period_seconds),
            "infoRefreshPause": self.info_refresh_pause.value,
        }
        if self.tolerations:
            out["tolerations"] = [t.to_dict() for t in self.tolerations]
        if self.dra is DRA.ENABLED:
            out["dra"] = self.dra.value
        if self.dra_numa_attributes:
            out["draNumaAttributes"] = list(self.dra_numa_attributes)
        return out

    @classmethod
    def read(cls, doc: Mapping[str, Any], path: str, problems: Problems) -> NodeGroupConfig:
        problems.unknown_fields(
            doc,
            {
                "podsFingerprinting",
                "infoRefreshMode",
                "infoRefreshPeriod",
                "infoRefreshPause",
                "tolerations",
                "dra",
                "draNumaAttributes",
            },
            path,
        )
        d = cls()
        mode = problems.choice(doc, "infoRefreshMode", path, InfoRefreshMode, d.info_refresh_mode)
        period = problems.duration(doc, "infoRefreshPeriod", path, d.info_refresh_period_seconds)
        if period == 0 and mode is InfoRefreshMode.PERIODIC:
            problems.add(f"{path}.infoRefreshPeriod", "must be positive when infoRefreshMode is Periodic")
        tolerations = []
        for i, raw in enumerate(problems.sequence(doc, "tolerations", path)):
            tol = Toleration.read(raw, f"{path}.tolerations[{i}]", problems)
            if tol is not None:
                tolerations.append(tol)
        dra = problems.choice(doc, "dra", path, DRA, d.dra)
        attributes: list[str] = []
        raw_attributes = problems.sequence(doc, "draNumaAttributes", path)
        if len(raw_attributes) > MAX_DRA_NUMA_ATTRIBUTES:
            problems.add(f"{path}.draNumaAttributes", f"at most {MAX_DRA_NUMA_ATTRIBUTES} attributes")
        for i, raw in enumerate(raw_attributes):
            where = f"{path}.draNumaAttributes[{i}]"
            if not isinstance(raw, str) or re.fullmatch(QUALIFIED_ATTRIBUTE_PATTERN, raw) is None:
                problems.add(
                    where, f"{raw!r} is not a qualified attribute name <domain>/<name> (e.g. gpu.amd.com/numaNode)"
                )
            elif raw in attributes:
                problems.add(where, f"duplicate attribute {raw!r}")
            else:
                attributes.append(raw)
        if attributes and dra is not DRA.ENABLED:
            problems.add(f"{path}.draNumaAttributes", "needs dra: Enabled")
        return cls(
            dra=dra,
            dra_numa_attributes=tuple(attributes),
            pods_fingerprinting=problems.choice(
                doc, "podsFingerprinting", path, PodsFingerprinting, d.pods_fingerprinting
            ),
            info_refresh_mode=mode,
            info_refresh_period_seconds=period,
            info_refresh_pause=problems.choice(doc, "infoRefreshPause", path, InfoRefreshPause, d.info_refresh_pause),
            tolerations=tuple(tolerations),
        )


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """Nodes selected by ``node_selector``; ``name`` is a DNS label used in object names."""

    name: str
    node_selector: NodeSelector = field(default_factory=NodeSelector)
    enforcement: Enforcement = Enforcement.KUBELET
    config: NodeGroupConfig = field(default_factory=NodeGroupConfig)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "nodeSelector": self.node_selector.to_dict(),
            "enforcement": self.enforcement.value,
            "config": self.config.to_dict(),
        }

    @classmethod
    def read(cls, doc: Any, path: str, problems: Problems) -> NodeGroup | None:
        if not isinstance(doc, Mapping):
            problems.add(path, "must be an object")
            return None
        problems.unknown_fields(doc, {"name", "nodeSelector", "enforcement", "config"}, path)
        name = problems.string(doc, "name", path)
        if not valid_dns_label(name, MAX_GROUP_NAME):
            problems.add(f"{path}.name", f"{name!r} must be a DNS label of at most {MAX_GROUP_NAME} characters")
        if "nodeSelector" not in doc:
            problems.add(f"{path}.nodeSelector", "is required (use {} to select every node)")
        return cls(
            name=name,
            node_selector=NodeSelector.read(doc.get("nodeSelector"), f"{path}.nodeSelector", problems),
            enforcement=problems.choice(doc, "enforcement", path, Enforcement, Enforcement.KUBELET),
            config=NodeGroupConfig.read(problems.mapping(doc, "config", path), f"{path}.config", problems),
        )


@dataclass(frozen=True, slots=True)
class PodExclude:
    """Pods the exporter ignores: glob patterns on namespace and name (empty matches everything)."""

    namespace: str = ""
    name: str = ""

    def to_dict(self) -> dict[str, str]:
        out = {}
        if self.namespace:
            out["namespace"] = self.namespace
        if self.name:
            out["name"] = self.name
        return out

    @property
    def flag_value(self) -> str:
        """``--pod-exclude`` value: ``<namespace glob>/<name glob>`` (``*`` for an empty side)."""
        return f"{self.namespace or '*'}/{self.name or '*'}"


@dataclass(frozen=True, slots=True)
class NUMAResourcesOperator:
    """The parsed, validated custom resource (see the module docstring for the rules)."""

    metadata: ObjectMeta
    node_groups: tuple[NodeGroup, ...] = ()
    pod_excludes: tuple[PodExclude, ...] = ()
    log_level: LogLevel = LogLevel.NORMAL

    @property
    def manage_nrt_crd(self) -> bool:
        return (self.metadata.annotation(NRT_CRD_ANNOTATION) or "").lower() != "external"

    def group(self, name: str) -> NodeGroup | None:
        return next((g for g in self.node_groups if g.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "nodeGroups": [g.to_dict() for g in self.node_groups],
            "logLevel": self.log_level.value,
        }
        if self.pod_excludes:
            spec["podExcludes"] = [p.to_dict() for p in self.pod_excludes]
        return {"apiVersion": API_VERSION, "kind": KIND, "metadata": meta_to_dict(self.metadata), "spec": spec}

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> NUMAResourcesOperator:
        """Parse and validate; raises :class:`SpecError` with every problem (reason per the first rule hit)."""
        meta = read_meta(obj)
        if meta.name != SINGLETON_NAME:
            raise SpecError(
                [f"metadata.name: must be {SINGLETON_NAME!r} (the resource is a singleton), not {meta.name!r}"],
                reason="IncorrectName",
            )
        problems = Problems()
        spec = problems.mapping(obj, "spec", "")
        problems.unknown_fields(spec, {"nodeGroups", "podExcludes", "logLevel"}, "spec")
        groups = []
        raw_groups = problems.sequence(spec, "nodeGroups", "spec")
        if len(raw_groups) > MAX_NODE_GROUPS:
            problems.add("spec.nodeGroups", f"at most {MAX_NODE_GROUPS} node groups")
        for i, raw in enumerate(raw_groups):
            group = NodeGroup.read(raw, f"spec.nodeGroups[{i}]", problems)
            if group is not None:
                groups.append(group)
        excludes = []
        for i, raw in enumerate(problems.sequence(spec, "podExcludes", "spec")):
            where = f"spec.podExcludes[{i}]"
            if not isinstance(raw, Mapping):
                problems.add(where, "must be an object")
                continue
            problems.unknown_fields(raw, {"namespace", "name"}, where)
            exclude = PodExclude(problems.string(raw, "namespace", where), problems.string(raw, "name", where))
            if not exclude.namespace and not exclude.name:
                problems.add(where, "needs a namespace or a name pattern")
            excludes.append(exclude)
        log_level = problems.choice(spec, "logLevel", "spec", LogLevel, LogLevel.NORMAL)
        problems.raise_if_any()
        result = cls(meta, tuple(groups), tuple(excludes), log_level)
        result.check_node_groups()
        return result

    def check_node_groups(self) -> None:
        """Reject duplicate names, duplicate selectors and overlapping selectors, naming the groups."""
        problems = Problems()
        seen: dict[str, int] = {}
        for i, g in enumerate(self.node_groups):
            if g.name in seen:
                problems.add(f"spec.nodeGroups[{i}].name", f"duplicate node group name {g.name!r}")
            seen.setdefault(g.name, i)
        problems.raise_if_any("DuplicateNodeGroups")
        for i, a in enumerate(self.node_groups):
            for b in self.node_groups[i + 1 :]:
                if a.node_selector.requirements() == b.node_selector.requirements():
                    problems.add(
                        "spec.nodeGroups",
                        f"node groups {a.name!r} and {b.name!r} have the same selector ({a.node_selector.describe()})",
                    )
        problems.raise_if_any("DuplicateNodeSelectors")
        for i, a in enumerate(self.node_groups):
            for b in self.node_groups[i + 1 :]:
                labels = a.node_selector.witness(b.node_selector)
                if labels is not None:
                    example = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
                    node = f"a node labelled {example}" if example else "any node"
                    problems.add(
                        "spec.nodeGroups",
                        f"node groups {a.name!r} ({a.node_selector.describe()}) and {b.name!r} "
                        f"({b.node_selector.describe()}) overlap: {node} would match both",
                    )
        problems.raise_if_any("OverlappingNodeGroups")
