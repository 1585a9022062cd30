"""The kubelet Topology Manager: policies, options, scopes and admission (kubelet v1.35 semantics).

Construction (:class:`TopologyManager`) checks, in the kubelet's order: policy options, NUMA
distances (only with ``prefer-closest-numa-nodes``), the NUMA node limit (not for ``none``), the
policy name and the scope name, with the kubelet's error texts.

Merging (:meth:`TopologyManager.merge`) is :class:`~numaplane.policy.hint_merge.HintMerger`'s, which
returns exactly what the kubelet's ``HintMerger`` returns (:mod:`numaplane.policy.hint_merge`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from numaplane.policy.errors import AdmissionError, PolicyConfigError, TopologyAffinityError, UnexpectedAdmissionError
from numaplane.policy.hint_merge import HintMerger, ProviderHints, filter_providers_hints
from numaplane.policy.hints import NO_AFFINITY, NUMAMask, TopologyHint, hint_of
from numaplane.resources.pod import Container, Pod
from numaplane.topology.model import Topology

__all__ = [
    "AFFINITY_ERROR_MESSAGE",
    "DEFAULT_MAX_ALLOWABLE_NUMA_NODES",
    "POLICIES",
    "SCOPES",
    "HintProvider",
    "PlainAllocationError",
    "ProviderHints",
    "TopologyAdmission",
    "TopologyManager",
    "TopologyManagerOptions",
    "admission_error",
]

POLICY_NONE = "none"
POLICY_BEST_EFFORT = "best-effort"
POLICY_RESTRICTED = "restricted"
POLICY_SINGLE_NUMA_NODE = "single-numa-node"
POLICIES = (POLICY_NONE, POLICY_BEST_EFFORT, POLICY_RESTRICTED, POLICY_SINGLE_NUMA_NODE)
SCOPES = ("container", "pod")
OPTION_PREFER_CLOSEST = "prefer-closest-numa-nodes"
OPTION_MAX_ALLOWABLE = "max-allowable-numa-nodes"
DEFAULT_MAX_ALLOWABLE_NUMA_NODES = 8
AFFINITY_ERROR_MESSAGE = "Resources cannot be allocated with Topology locality"
_GO_INT_MAX = (1 << 63) - 1


class PlainAllocationError(UnexpectedAdmissionError):
    """A provider's plain error (the kubelet's ``fmt.Errorf``): ``message`` is the raw text, and
    admission reports it as ``Allocate failed due to <message>, which is unexpected``."""


def admission_error(exc: BaseException) -> AdmissionError:
    """The admission error the kubelet reports for a provider's ``Allocate`` failure."""
    if isinstance(exc, PlainAllocationError):
        return UnexpectedAdmissionError(f"Allocate failed due to {exc.message}, which is unexpected")
    if isinstance(exc, AdmissionError):
        return exc
    return UnexpectedAdmissionError(f"Allocate failed due to {exc}, which is unexpected")


class HintProvider(Protocol):
    """A hint provider (device, CPU, memory manager), called in registration order."""

    def hints(self, pod: Pod, container: Container) -> ProviderHints: ...

    def pod_hints(self, pod: Pod) -> ProviderHints: ...

    def allocate(self, pod: Pod, container: Container, hint: TopologyHint) -> object: ...


def _go_quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _go_parse_bool(text: str) -> bool | None:
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    return None


def _go_atoi(name: str, text: str) -> int:
    digits = text[1:] if text[:1] in "+-" else text
    if not digits or not digits.isascii() or not digits.isdigit():
        reason = "invalid syntax"
    elif len(digits.lstrip("0")) > 19 or abs(int(text)) > _GO_INT_MAX + (1 if text.startswith("-") else 0):
        reason = "value out of range"
    else:
        return int(text)
    raise PolicyConfigError(
        f"unable to convert policy option to integer {_go_quote(name)}: "
        f"strconv.Atoi: parsing {_go_quote(text)}: {reason}"
    )


@dataclass(frozen=True, slots=True)
class TopologyManagerOptions:
    """Parsed Topology Manager policy options (kubelet names in :meth:`parse`)."""

    prefer_closest_numa: bool = False
    max_allowable_numa_nodes: int = DEFAULT_MAX_ALLOWABLE_NUMA_NODES

    @staticmethod
    def parse(options: Mapping[str, str] | None) -> TopologyManagerOptions:
        """Parse ``{name: value}`` (names in sorted order, for a deterministic first error)."""
        closest = False
        limit = DEFAULT_MAX_ALLOWABLE_NUMA_NODES
        for name in sorted(options or {}):
            value = (options or {})[name]
            if name == OPTION_PREFER_CLOSEST:
                parsed = _go_parse_bool(value)
                if parsed is None:
                    raise PolicyConfigError(
                        f"bad value for option {_go_quote(name)}: "
                        f"strconv.ParseBool: parsing {_go_quote(value)}: invalid syntax"
                    )
                closest = parsed
            elif name == OPTION_MAX_ALLOWABLE:
                limit = _go_atoi(name, value)
                if limit < DEFAULT_MAX_ALLOWABLE_NUMA_NODES:
                    raise PolicyConfigError(
                        f"the minimum value of {_go_quote(name)} should not be less than "
                        f"{DEFAULT_MAX_ALLOWABLE_NUMA_NODES}"
                    )
            else:
                raise PolicyConfigError(f"unknown Topology Manager Policy option: {_go_quote(name)}")
        return TopologyManagerOptions(closest, limit)


@dataclass(frozen=True)
class TopologyAdmission:
    """Outcome of :meth:`TopologyManager.admit`.

    ``hints`` maps container name → stored affinity for every container that got one before the
    verdict; ``error`` is the kubelet's admission error (``reason``/``message`` are its fields);
    ``container`` names the container at which admission stopped. Providers' allocations made
    before a failure are *not* rolled back here: the caller releases the pod.
    """

    admitted: bool
    hints: Mapping[str, TopologyHint] = field(default_factory=dict)
    error: AdmissionError | None = None
    container: str | None = None

    @property
    def reason(self) -> str:
        return "" if self.error is None else self.error.reason

    @property
    def message(self) -> str:
        return "" if self.error is None else self.error.message


class TopologyManager:
    """Policy, scope, options and machine NUMA nodes; merges hints and drives admission.

    Invariants: ``numa_nodes`` is sorted and unique; ``default_affinity`` is their mask; hints
    stored per ``(pod uid, container)`` are what providers' ``allocate`` received.
    """

    def __init__(
        self,
        policy: str = POLICY_NONE,
        scope: str = "container",
        options: Mapping[str, str] | None = None,
        numa_nodes: Sequence[int] = (),
        distances: Mapping[int, Mapping[int, int]] | None = None,
    ) -> None:
        self.options = TopologyManagerOptions.parse(options)
        self.numa_nodes: tuple[int, ...] = tuple(sorted(set(numa_nodes)))
        if self.options.prefer_closest_numa:
            _check_distances(self.numa_nodes, distances or {})
        if policy != POLICY_NONE and len(self.numa_nodes) > self.options.max_allowable_numa_nodes:
            raise PolicyConfigError(
                f"unsupported on machines with more than {self.options.max_allowable_numa_nodes} NUMA Nodes"
            )
        if policy not in POLICIES:
            raise PolicyConfigError(f'unknown policy: "{policy}"')
        if scope not in SCOPES:
            raise PolicyConfigError(f'unknown scope: "{scope}"')
        self.policy = policy
        self.scope = scope
        self.default_affinity = NUMAMask.from_ids(self.numa_nodes)
        closest = self.options.prefer_closest_numa and policy != POLICY_SINGLE_NUMA_NODE
        self.merger = HintMerger(self.default_affinity.bits, closest=closest, distances=distances or {})
        self._affinity: dict[str, dict[str, TopologyHint]] = {}

    @classmethod
    def from_topology(
        cls, topology: Topology, policy: str, scope: str = "container", options: Mapping[str, str] | None = None
    ) -> TopologyManager:
        """All modelled NUMA nodes (CPU-less ones included, as cAdvisor reports them) and their distances."""
        distances = {n.id: dict(n.distances) for n in topology.numa_nodes}
        return cls(policy, scope, options, topology.memory_numa_ids, distances)

    # -- merge ------------------------------------------------------------------------------------
    def merge(self, providers_hints: Sequence[ProviderHints]) -> tuple[TopologyHint, bool]:
        """The policy's ``Merge``: the best hint and whether the policy admits it."""
        if self.policy == POLICY_NONE:
            return NO_AFFINITY, True
        lists = filter_providers_hints(providers_hints)
        if self.policy == POLICY_SINGLE_NUMA_NODE:
            lists = [[h for h in hints if h.preferred and (h.numa is None or h.numa.count() == 1)] for hints in lists]
            best = self.merger.merge(lists)
            if best.numa is not None and best.numa.bits == self.default_affinity.bits:
                best = hint_of(None, best.preferred)
            return best, best.preferred
        best = self.merger.merge(lists)
        return best, best.preferred or self.policy == POLICY_BEST_EFFORT

    # -- admission --------------------------------------------------------------------------------
    def admit(self, pod: Pod, providers: Sequence[HintProvider]) -> TopologyAdmission:
        """Admit ``pod``: per container (container scope) or once (pod scope); then allocate."""
        stored: dict[str, TopologyHint] = {}
        if self.policy == POLICY_NONE:
            for container in pod.all_containers():
                error = _allocate_all(pod, container, NO_AFFINITY, providers)
                if error is not None:
                    return TopologyAdmission(False, stored, error, container.name)
            return TopologyAdmission(True, stored)
        pod_hint: TopologyHint | None = None
        if self.scope == "pod":
            pod_hint, ok = self.merge([p.pod_hints(pod) for p in providers])
            if not ok:
                return TopologyAdmission(False, stored, TopologyAffinityError(AFFINITY_ERROR_MESSAGE))
        for container in pod.all_containers():
            if pod_hint is None:
                hint, ok = self.merge([p.hints(pod, container) for p in providers])
                if not ok:
                    self._affinity.pop(pod.uid, None)
                    return TopologyAdmission(
                        False, stored, TopologyAffinityError(AFFINITY_ERROR_MESSAGE), container.name
                    )
            else:
                hint = pod_hint
            self._affinity.setdefault(pod.uid, {})[container.name] = hint
            stored[container.name] = hint
            error = _allocate_all(pod, container, hint, providers)
            if error is not None:
                self._affinity.pop(pod.uid, None)
                return TopologyAdmission(False, stored, error, container.name)
        return TopologyAdmission(True, stored)

    def affinity(self, pod_uid: str, container_name: str) -> TopologyHint:
        """Kubelet ``GetAffinity``: the stored hint, or the zero hint."""
        return self._affinity.get(pod_uid, {}).get(container_name, NO_AFFINITY)

    def store(self, pod_uid: str, container_name: str, hint: TopologyHint) -> None:
        """Record a container's affinity (restoring admitted pods after a restart or reconfiguration)."""
        self._affinity.setdefault(pod_uid, {})[container_name] = hint

    def remove_container(self, pod_uid: str, container_name: str) -> None:
        hints = self._affinity.get(pod_uid)
        if hints is not None:
            hints.pop(container_name, None)
            if not hints:
                del self._affinity[pod_uid]

    def remove_pod(self, pod_uid: str) -> None:
        self._affinity.pop(pod_uid, None)

    def stored(self) -> Iterator[tuple[str, str, TopologyHint]]:
        """Every stored ``(pod uid, container, hint)``."""
        for uid, hints in self._affinity.items():
            for name, hint in hints.items():
                yield uid, name, hint


def _allocate_all(
    pod: Pod, container: Container, hint: TopologyHint, providers: Sequence[HintProvider]
) -> AdmissionError | None:
    for provider in providers:
        try:
            provider.allocate(pod, container, hint)
        except Exception as exc:  # the kubelet turns any provider error into an admission result
            return admission_error(exc)
    return None


def _check_distances(nodes: Sequence[int], distances: Mapping[int, Mapping[int, int]]) -> None:
    for node in nodes:
        row = distances.get(node)
        if not row:
            raise PolicyConfigError("cannot discover NUMA topology: error getting NUMA distances from cadvisor")
        missing = [other for other in nodes if other not in row]
        if missing:
            raise PolicyConfigError(
                "cannot discover NUMA topology: error getting NUMA distances from cadvisor: "
                f"node {node} reports no distance to node(s) {missing}"
            )
