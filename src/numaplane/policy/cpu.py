"""The kubelet CPU Manager *static* policy, exact (``policy_static.go``, v1.35 behaviour).

Pools (all CPU sets, kubelet-managers.md A.7):

* **shared** = ``state.default``: where BestEffort, Burstable and non-integer Guaranteed containers run;
  initially every CPU (minus the reserved CPUs with ``strict-cpu-reservation``);
* **reserved**: an explicit list, or ``count`` CPUs chosen by the allocation algorithm over all CPUs
  (the lowest physical cores); never handed out exclusively;
* **available** = shared − reserved: where exclusive CPUs come from; **allocatable** = all − reserved.

A container gets exclusive CPUs iff its pod is Guaranteed and its CPU request is a whole number
(:meth:`StaticPolicy.guaranteed_cpus`); everything else stays shared without error.

Errors: option / construction problems raise :class:`PolicyConfigError`; ``start`` raises
:class:`StateError`; ``allocate`` raises :class:`SMTAlignmentError` or
:class:`UnexpectedAdmissionError` whose message is the kubelet's error text (the manager wraps it as
"Allocate failed due to <msg>, which is unexpected"). A failed ``allocate`` leaves the state unchanged.

Non-determinism of upstream (map order while validating state) is resolved as lowest ids / sorted
names first.

Why one module over 400 lines: :class:`StaticPolicy` follows ``pkg/kubelet/cm/cpumanager/policy_static.go``
function by function (``Start``/``validateState``, ``Allocate``, ``GetTopologyHints``,
``generateCPUTopologyHints``, ``RemoveContainer``) so a reviewer can read the two side by side; the options
and reserved-CPU spec above it are only that policy's constructor inputs.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, fields

from numaplane.policy.cpu_assignment import TopologyIndex, bits, index_for, take_distributed, take_packed
from numaplane.policy.cpu_state import CPUState
from numaplane.policy.errors import PolicyConfigError, SMTAlignmentError, StateError, UnexpectedAdmissionError
from numaplane.policy.hints import NUMAMask, TopologyHint, iterate_masks
from numaplane.resources.pod import Container, Pod
from numaplane.topology.cpuset import CPUSet
from numaplane.topology.errors import CPUSetParseError
from numaplane.topology.model import Topology

__all__ = ["GO_FALSE", "GO_TRUE", "OPTION_FIELDS", "ReservedCPUs", "StaticPolicy", "StaticPolicyOptions"]

Hints = dict[str, list[TopologyHint]]
_EMPTY = CPUSet.from_mask(0)

FULL_PCPUS_ONLY = "full-pcpus-only"
DISTRIBUTE_ACROSS_NUMA = "distribute-cpus-across-numa"
ALIGN_BY_SOCKET = "align-by-socket"
DISTRIBUTE_ACROSS_CORES = "distribute-cpus-across-cores"
STRICT_CPU_RESERVATION = "strict-cpu-reservation"
PREFER_ALIGN_BY_UNCORE = "prefer-align-cpus-by-uncorecache"

# Maturity in v1.35 (kubelet-managers.md A.9): alpha needs CPUManagerPolicyAlphaOptions (default off in
# the kubelet), beta CPUManagerPolicyBetaOptions (default on).
_ALPHA = frozenset({ALIGN_BY_SOCKET, DISTRIBUTE_ACROSS_CORES})
_BETA = frozenset({DISTRIBUTE_ACROSS_NUMA, STRICT_CPU_RESERVATION, PREFER_ALIGN_BY_UNCORE})
_STABLE = frozenset({FULL_PCPUS_ONLY})
# Kubelet option name → StaticPolicyOptions field (also the known names policy/config.py checks).
OPTION_FIELDS = {
    FULL_PCPUS_ONLY: "full_pcpus_only",
    DISTRIBUTE_ACROSS_NUMA: "distribute_cpus_across_numa",
    ALIGN_BY_SOCKET: "align_by_socket",
    DISTRIBUTE_ACROSS_CORES: "distribute_cpus_across_cores",
    STRICT_CPU_RESERVATION: "strict_cpu_reservation",
    PREFER_ALIGN_BY_UNCORE: "prefer_align_by_uncore_cache",
}
# Checked in this order, as the kubelet does.
_INCOMPATIBLE = (
    (FULL_PCPUS_ONLY, DISTRIBUTE_ACROSS_CORES),
    (DISTRIBUTE_ACROSS_NUMA, DISTRIBUTE_ACROSS_CORES),
    (PREFER_ALIGN_BY_UNCORE, DISTRIBUTE_ACROSS_CORES),
    (PREFER_ALIGN_BY_UNCORE, DISTRIBUTE_ACROSS_NUMA),
)
# Option values as Go strconv.ParseBool reads them (policy/config.py validates with the same sets).
GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def _go_quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class StaticPolicyOptions:
    """Parsed static policy options (kubelet ``--cpu-manager-policy-options``), all off by default."""

    full_pcpus_only: bool = False
    distribute_cpus_across_numa: bool = False
    align_by_socket: bool = False
    distribute_cpus_across_cores: bool = False
    strict_cpu_reservation: bool = False
    prefer_align_by_uncore_cache: bool = False

    @staticmethod
    def parse(
        options: Mapping[str, str | bool], *, alpha_enabled: bool = True, beta_enabled: bool = True
    ) -> StaticPolicyOptions:
        """Parse ``{name: "true"|"false"...}`` (Go ``strconv.ParseBool`` spellings) with the kubelet's errors.

        Names are checked in sorted order (the kubelet's map order is random), so the first error is stable.
        """
        values: dict[str, bool] = {}
        for name in sorted(options):
            raw = options[name]
            if name not in OPTION_FIELDS:
                raise PolicyConfigError(f"unknown CPU Manager Policy option: {_go_quote(name)}")
            if name in _ALPHA and not alpha_enabled:
                raise PolicyConfigError(
                    f"CPU Manager Policy Alpha-level Options not enabled, but option {_go_quote(name)} provided"
                )
            if name in _BETA and not beta_enabled:
                raise PolicyConfigError(
                    f"CPU Manager Policy Beta-level Options not enabled, but option {_go_quote(name)} provided"
                )
            text = ("true" if raw else "false") if isinstance(raw, bool) else str(raw)
            if text not in GO_TRUE and text not in GO_FALSE:
                raise PolicyConfigError(
                    f"bad value for option {_go_quote(name)}: strconv.ParseBool: parsing {_go_quote(text)}: invalid syntax"
                )
            values[OPTION_FIELDS[name]] = text in GO_TRUE
        opts = StaticPolicyOptions(**values)
        for a, b in _INCOMPATIBLE:
            if getattr(opts, OPTION_FIELDS[a]) and getattr(opts, OPTION_FIELDS[b]):
                raise PolicyConfigError(f"static policy options {a} and {b} can not be used at the same time")
        return opts

    def validate(self, topology: Topology, topology_manager_policy: str | None = None) -> None:
        """``ValidateStaticPolicyOptions`` against the machine (and the topology manager policy, if known)."""
        if not self.align_by_socket:
            return
        if topology_manager_policy == "single-numa-node":
            raise PolicyConfigError(
                "Topolgy manager single-numa-node policy is incompatible with CPUManager align-by-socket policy option"
            )
        if topology.num_sockets < 1 or topology.upstream.get("num_sockets") == 0:
            # DESIGN fix (c): the kubelet divides by the socket count later and crashes.
            raise PolicyConfigError("align-by-socket needs socket information, but the CPU topology reports no sockets")
        if topology.num_sockets > topology.num_numa_nodes:
            raise PolicyConfigError(
                "Align by socket is not compatible with hardware where number of sockets are more than number of NUMA"
            )

    def to_dict(self) -> dict[str, str]:
        """The enabled options by kubelet name (``{"full-pcpus-only": "true"}``)."""
        names = {field: name for name, field in OPTION_FIELDS.items()}
        return {names[f.name]: "true" for f in fields(self) if getattr(self, f.name)}


@dataclass(frozen=True, slots=True)
class ReservedCPUs:
    """``count`` = ceil(kube-reserved + system-reserved CPU); ``cpus`` = explicit ``--reserved-cpus`` list."""

    count: int = 0
    cpus: CPUSet | None = None

    @staticmethod
    def coerce(spec: ReservedCPUs | int | CPUSet | str | None) -> ReservedCPUs:
        """An int is a count; a CPU set (or cpuset string) is an explicit list of that size."""
        if spec is None:
            return ReservedCPUs()
        if isinstance(spec, ReservedCPUs):
            return spec
        if isinstance(spec, int):
            return ReservedCPUs(count=spec)
        try:
            cpus = CPUSet.parse(spec) if isinstance(spec, str) else spec
        except CPUSetParseError as exc:
            raise PolicyConfigError(f"[cpumanager] invalid reserved CPU list: {exc}") from exc
        return ReservedCPUs(count=cpus.size(), cpus=cpus)

    @staticmethod
    def from_millicores(kube_reserved_milli: int, system_reserved_milli: int) -> ReservedCPUs:
        """The kubelet's count: the summed reservation rounded up to whole CPUs."""
        return ReservedCPUs(count=-(-(kube_reserved_milli + system_reserved_milli) // 1000))


@dataclass(frozen=True, slots=True)
class _HintTable:
    """Every NUMA mask of hint generation (``iterate_masks`` order) with its state-independent data."""

    masks: tuple[NUMAMask, ...]
    numa_bits: tuple[int, ...]
    cpu_masks: tuple[int, ...]
    totals: tuple[int, ...]
    counts: tuple[int, ...]
    sockets: tuple[int, ...]


class StaticPolicy:
    """The static CPU policy for one machine. Stateless apart from configuration: the allocation state
    (:class:`CPUState`) is passed to every call, so the caller can copy or snapshot it freely.
    """

    name = "static"

    def __init__(
        self,
        topology: Topology,
        reserved: ReservedCPUs | int | CPUSet | str | None = None,
        options: Mapping[str, str | bool] | StaticPolicyOptions | None = None,
        *,
        topology_manager_policy: str | None = None,
        alpha_options: bool = True,
        beta_options: bool = True,
    ) -> None:
        if isinstance(options, StaticPolicyOptions):
            opts = options
        else:
            opts = StaticPolicyOptions.parse(options or {}, alpha_enabled=alpha_options, beta_enabled=beta_options)
        opts.validate(topology, topology_manager_policy)
        self.topology = topology
        self.options = opts
        self._idx: TopologyIndex = index_for(topology)
        self._group = topology.cpus_per_core
        spec = ReservedCPUs.coerce(reserved)
        if spec.cpus:
            chosen = spec.cpus
        else:
            try:
                chosen = self.take_by_topology(topology.all_cpus, spec.count)
            except UnexpectedAdmissionError:
                chosen = _EMPTY
        if chosen.size() != spec.count:
            raise PolicyConfigError(
                f"[cpumanager] unable to reserve the required amount of CPUs (size of {chosen.format()} did not equal {spec.count})"
            )
        physical = 0
        for cpu in chosen:
            core = self._idx.cpu_core.get(cpu)
            if core is None:
                raise PolicyConfigError(
                    f"[cpumanager] unable to build the reserved physical CPUs from the reserved set: unknown CPU ID: {cpu}"
                )
            physical |= self._idx.core_mask[core]
        self._reserved = chosen.mask
        self._reserved_physical = physical
        self._table: _HintTable | None = None
        self._hint_sets: dict[int, tuple[TopologyHint, ...]] = {}
        self._qos_pod: weakref.ref[Pod] | None = None
        self._qos_guaranteed = False
        self._aligned: dict[int, int] = {}

    # -- pools --------------------------------------------------------------------------------------
    @property
    def reserved(self) -> CPUSet:
        return CPUSet.from_mask(self._reserved)

    @property
    def reserved_physical(self) -> CPUSet:
        """Every thread sibling of a reserved CPU (``full-pcpus-only`` treats them as unavailable)."""
        return CPUSet.from_mask(self._reserved_physical)

    @property
    def allocatable(self) -> CPUSet:
        """All CPUs minus the reserved ones (what exclusive allocations may ever use)."""
        return CPUSet.from_mask(self._idx.all_mask & ~self._reserved)

    def shared_pool(self, state: CPUState) -> CPUSet:
        """The CPUs shared containers run on (the state's default set)."""
        return state.default

    def available(self, state: CPUState) -> CPUSet:
        """Shared pool minus reserved: free for exclusive allocation now."""
        return CPUSet.from_mask(state.default.mask & ~self._reserved)

    def allocatable_by_numa(self) -> dict[int, int]:
        """NUMA id → allocatable CPU count."""
        return {n: (m & ~self._reserved).bit_count() for n, m in self._idx.numa_mask.items()}

    def available_by_numa(self, state: CPUState) -> dict[int, int]:
        """NUMA id → CPUs free for exclusive allocation."""
        free = state.default.mask & ~self._reserved
        return {n: (m & free).bit_count() for n, m in self._idx.numa_mask.items()}

    def new_state(self) -> CPUState:
        """A started, empty state (default = all CPUs, minus reserved under strict reservation)."""
        state = CPUState()
        self.start(state)
        return state

    # -- start / validate -------------------------------------------------------------------------------
    def start(self, state: CPUState) -> None:
        """``Start``: initialise an empty state or validate a restored one (raises :class:`StateError`)."""
        if state.policy_name != self.name:
            raise StateError(
                f'configured policy "{self.name}" differs from state checkpoint policy "{state.policy_name}"'
            )
        all_cpus = self._idx.all_mask
        if self.options.strict_cpu_reservation:
            all_cpus &= ~self._reserved
        default = state.default
        if default.is_empty():
            if state.assignments:
                raise StateError("default cpuset cannot be empty")
            state.default = CPUSet.from_mask(all_cpus)
            return
        if self.options.strict_cpu_reservation:
            overlap = default.mask & self._reserved
            if overlap:
                raise StateError(
                    f'some of strictly reserved cpus: "{CPUSet.from_mask(overlap).format()}" '
                    f'are present in defaultCpuSet: "{default.format()}"'
                )
        elif self._reserved & ~default.mask:
            raise StateError(
                f'not all reserved cpus: "{self.reserved.format()}" are present in defaultCpuSet: "{default.format()}"'
            )
        known = default.mask
        for pod in sorted(state.assignments):
            for container, cpus in sorted(state.assignments[pod].items()):
                if cpus.mask & default.mask:
                    raise StateError(
                        f'pod: {pod}, container: {container} cpuset: "{cpus.format()}" '
                        f'overlaps with default cpuset "{default.format()}"'
                    )
                known |= cpus.mask
        if known != all_cpus:
            raise StateError(
                f'current set of available CPUs "{CPUSet.from_mask(all_cpus).format()}" '
                f'doesn\'t match with CPUs in state "{CPUSet.from_mask(known).format()}"'
            )

    # -- requests ---------------------------------------------------------------------------------------
    def guaranteed_cpus(self, pod: Pod, container: Container | str) -> int:
        """Exclusive CPUs the container gets: its integer CPU request in a Guaranteed pod, else 0.

        Pods using pod-level resources stay shared (the kubelet's static policy skips them).
        """
        if not self._guaranteed(pod):
            return 0
        return self._container_cpus(pod, self._container(pod, container))

    def pod_guaranteed_cpus(self, pod: Pod) -> int:
        """``podGuaranteedCPUs``: max(largest init-phase need, app containers + sidecars)."""
        if not self._guaranteed(pod):
            return 0
        init_peak = sidecars = 0
        for c in pod.init_containers:
            if "cpu" not in c.requests:
                continue
            n = self._container_cpus(pod, c)
            if c.sidecar:
                sidecars += n
            else:
                init_peak = max(init_peak, sidecars + n)
        apps = sum(self._container_cpus(pod, c) for c in pod.containers if "cpu" in c.requests)
        return max(init_peak, apps + sidecars)

    def _guaranteed(self, pod: Pod) -> bool:
        # Pods are immutable: remember the QoS of the last pod seen (hints and allocate ask in turn).
        if self._qos_pod is None or self._qos_pod() is not pod:
            self._qos_guaranteed = pod.qos_class == "Guaranteed"
            self._qos_pod = weakref.ref(pod)
        return self._qos_guaranteed

    @staticmethod
    def _container_cpus(pod: Pod, container: Container) -> int:
        if pod.pod_requests_spec is not None or pod.pod_limits_spec is not None:
            return 0
        quantity = container.requests.get("cpu")
        if quantity is None:
            return 0
        value = quantity.value()
        if value * 1000 != quantity.milli_value() or value < 0:
            return 0
        return value

    @staticmethod
    def _container(pod: Pod, container: Container | str) -> Container:
        if isinstance(container, Container):
            return container
        found = pod.container(container)
        if found is None:
            raise ValueError(f"pod {pod.uid} has no container {container!r}")
        return found

    # -- hints ------------------------------------------------------------------------------------------
    def hints(self, state: CPUState, pod: Pod, container: Container | str) -> Hints | None:
        """``GetTopologyHints``: ``None`` = no preference, ``{"cpu": []}`` = cannot be satisfied."""
        c = self._container(pod, container)
        requested = self.guaranteed_cpus(pod, c)
        if requested == 0:
            return None
        allocated = state.get(pod.uid, c.name)
        if allocated is not None:
            if allocated.size() != requested:
                return {"cpu": []}
            return {"cpu": self._generate(allocated.mask, 0, requested)}
        reusable = state.reusable(pod.uid).mask
        return {"cpu": self._generate(state.default.mask & ~self._reserved, reusable, requested)}

    def pod_hints(self, state: CPUState, pod: Pod) -> Hints | None:
        """``GetPodTopologyHints`` (pod scope): hints for the pod-level CPU count."""
        requested = self.pod_guaranteed_cpus(pod)
        if requested == 0:
            return None
        assigned = 0
        for c in pod.all_containers():
            allocated = state.get(pod.uid, c.name)
            if allocated is not None:
                if allocated.size() != self.guaranteed_cpus(pod, c):
                    return {"cpu": []}
                assigned |= allocated.mask
        if assigned.bit_count() == requested:
            return {"cpu": self._generate(assigned, 0, requested)}
        reusable = state.reusable(pod.uid).mask | assigned
        return {"cpu": self._generate(state.default.mask & ~self._reserved, reusable, requested)}

    def _hint_table(self) -> _HintTable:
        if self._table is None:
            idx = self._idx
            masks = tuple(iterate_masks(idx.numa_ids))
            cpu_masks = tuple(idx.numa_cpus(m.bits) for m in masks)
            self._table = _HintTable(
                masks=masks,
                numa_bits=tuple(m.bits for m in masks),
                cpu_masks=cpu_masks,
                totals=tuple(c.bit_count() for c in cpu_masks),
                counts=tuple(m.count() for m in masks),
                sockets=tuple(len({idx.cpu_socket[c] for c in bits(cpus)}) for cpus in cpu_masks),
            )
        return self._table

    def _resolved_hints(self, request: int) -> tuple[TopologyHint, ...]:
        """One hint per mask with ``preferred`` settled for this request size (it ignores the state)."""
        hints = self._hint_sets.get(request)
        if hints is None:
            t = self._hint_table()
            # minAffinitySize: the narrowest mask holding the request on an empty machine.
            min_size = next(
                (c for c, total in zip(t.counts, t.totals, strict=True) if total >= request), len(self._idx.numa_ids)
            )
            socket_min = self._socket_min(min_size)
            hints = tuple(
                TopologyHint(m, c == min_size or s == socket_min)
                for m, c, s in zip(t.masks, t.counts, t.sockets, strict=True)
            )
            if len(self._hint_sets) < 1024:
                self._hint_sets[request] = hints
        return hints

    def _generate(self, available: int, reusable: int, request: int) -> list[TopologyHint]:
        """``generateCPUTopologyHints``: every NUMA mask holding enough available + reusable CPUs.

        A mask is dropped when a reusable CPU lies outside it; reusable CPUs count even if also available.
        """
        t = self._hint_table()
        hints = self._resolved_hints(request)
        if not reusable:
            return [h for h, m in zip(hints, t.cpu_masks, strict=True) if (available & m).bit_count() >= request]
        cpu_numa = self._idx.cpu_numa
        reuse_numas = 0
        for cpu in bits(reusable):
            reuse_numas |= 1 << cpu_numa.get(cpu, 0)
        need = request - reusable.bit_count()
        return [
            h
            for h, m, b in zip(hints, t.cpu_masks, t.numa_bits, strict=True)
            if not reuse_numas & ~b and (available & m).bit_count() >= need
        ]

    def _socket_min(self, min_size: int) -> int:
        """With align-by-socket: the socket count a preferred hint may span (-1: the rule is off)."""
        if not self.options.align_by_socket:
            return -1
        per_socket = self.topology.num_numa_nodes // self.topology.num_sockets if self.topology.num_sockets else 0
        return -(-min_size // per_socket) if per_socket else -1

    # -- allocation -------------------------------------------------------------------------------------
    def take_by_topology(self, available: CPUSet, count: int) -> CPUSet:
        """The configured algorithm (packed / spread / distributed, uncore alignment) over ``available``."""
        return CPUSet.from_mask(self._take(available.mask, count))

    def _take(self, available: int, count: int) -> int:
        opts = self.options
        if opts.distribute_cpus_across_numa:
            group = self._group if opts.full_pcpus_only else 1
            return take_distributed(self._idx, available, count, group, spread=opts.distribute_cpus_across_cores)
        return take_packed(
            self._idx,
            available,
            count,
            spread=opts.distribute_cpus_across_cores,
            uncore=opts.prefer_align_by_uncore_cache,
        )

    def allocate(
        self, state: CPUState, pod: Pod, container: Container | str, hint: TopologyHint | None = None
    ) -> CPUSet | None:
        """``Allocate``: the container's exclusive CPUs (recorded in ``state``), or ``None`` when shared.

        ``hint`` is the topology manager's affinity for the container (``None``: no NUMA affinity).
        """
        c = self._container(pod, container)
        count = self.guaranteed_cpus(pod, c)
        if count == 0:
            return None
        if self.options.full_pcpus_only:
            self._check_smt(state, count)
        existing = state.get(pod.uid, c.name)
        if existing is not None:
            self._update_reuse(state, pod.uid, c, existing)
            return existing
        numa = hint.numa if hint is not None else None
        cpus = CPUSet.from_mask(self._allocate_cpus(state, count, numa, state.reusable(pod.uid).mask))
        state.set(pod.uid, c.name, cpus)
        self._update_reuse(state, pod.uid, c, cpus)
        return cpus

    def _check_smt(self, state: CPUState, count: int) -> None:
        group = self._group
        if group < 1 or count % group:
            raise SMTAlignmentError(f"SMT Alignment Error: requested {count} cpus not multiple cpus per core = {group}")
        physical = (state.default.mask & ~self._reserved & ~self._reserved_physical).bit_count()
        if count > physical:
            raise SMTAlignmentError(
                "SMT Alignment Error: not enough free physical CPUs: "
                f"available physical CPUs = {physical}, requested CPUs = {count}, CPUs per core = {group}"
            )

    def _allocate_cpus(self, state: CPUState, count: int, numa: NUMAMask | None, reusable: int) -> int:
        allocatable = (state.default.mask & ~self._reserved) | reusable
        result = 0
        if numa is not None:
            aligned = allocatable & self._aligned_cpus(numa.bits)
            result = self._take(aligned, min(count, aligned.bit_count()))
        result |= self._take(allocatable & ~result, count - result.bit_count())
        state.default = CPUSet.from_mask(state.default.mask & ~result)
        return result

    def _aligned_cpus(self, numa_bits: int) -> int:
        """CPUs of the hinted NUMA nodes, or (align-by-socket) of every socket holding one of them."""
        cached = self._aligned.get(numa_bits)
        if cached is None:
            idx = self._idx
            cached = idx.numa_cpus(numa_bits)
            if self.options.align_by_socket:
                sockets = {idx.cpu_socket[c] for c in bits(cached)}
                cached = 0
                for s in sockets:
                    cached |= idx.socket_mask[s]
            self._aligned[numa_bits] = cached
        return cached

    @staticmethod
    def _update_reuse(state: CPUState, pod_uid: str, container: Container, cpus: CPUSet) -> None:
        """Regular init containers donate their CPUs to later containers; others consume them."""
        current = state.reusable(pod_uid).mask
        if container.init and not container.sidecar:
            current |= cpus.mask
        else:
            current &= ~cpus.mask
        state.set_reuse(pod_uid, CPUSet.from_mask(current))

    def remove_container(self, state: CPUState, pod_uid: str, container_name: str) -> CPUSet:
        """``RemoveContainer``: drop the assignment; return (and give back to the shared pool) the CPUs
        no other container of the pod still uses."""
        cpus = state.get(pod_uid, container_name)
        if cpus is None:
            return _EMPTY
        in_use = state.pod_cpus(pod_uid, exclude=container_name).mask
        state.delete(pod_uid, container_name)
        released = cpus.mask & ~in_use
        state.default = CPUSet.from_mask(state.default.mask | released)
        return CPUSet.from_mask(released)
