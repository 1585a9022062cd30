"""The resource manager's configuration document (one YAML/JSON document, with a JSON schema).

Example (every field optional; the defaults are the kubelet's defaults with the static policies)::

    apiVersion: numaplane.io/v1
    kind: NodeResourceConfig
    topologyManager:
      policy: single-numa-node          # none | best-effort | restricted | single-numa-node
      scope: container                  # container | pod
      options: {prefer-closest-numa-nodes: "true", max-allowable-numa-nodes: "8"}
    cpuManager:
      policy: static                    # static | none
      reservedCPUs: "0,1"               # explicit list (kubelet --reserved-cpus) ...
      reservedCPUCount: 2               # ... or a count (kube-reserved + system-reserved cpu, rounded up)
      options: {full-pcpus-only: "true"}
    memoryManager:
      policy: Static                    # Static | None
      reservedMemory:                   # per NUMA node, bytes or quantities
        - {numaNode: 0, limits: {memory: 1Gi}}
    devices:                            # device inventory as device plugins report it
      vendor.com/gpu:
        - {id: gpu0, numa: [0]}
        - {id: gpu1, numa: [1]}
    dra:                                # DRA devices as a topology hint provider (the agent: needs API access)
      enabled: true
      numaAttributes: [gpu.amd.com/numaNode]   # besides resource.kubernetes.io/numaNode, in this order

The agent reads the same document from a file; the operator's ``NodeResourcePolicy`` renders it.
Values are validated as a whole: :func:`parse_config` raises :class:`PolicyConfigError` listing every
problem found, so a user fixes everything in one go.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from numaplane.limits import MAX_CPU_ID, MAX_DEVICE_ID_CHARS
from numaplane.policy.config_schema import (
    API_VERSION,
    CONFIG_SCHEMA,
    CPU_POLICIES,
    KIND,
    MEMORY_POLICIES,
    TM_POLICIES,
    TM_SCOPES,
)
from numaplane.policy.errors import PolicyConfigError
from numaplane.resources.errors import QuantityError
from numaplane.resources.quantity import parse_quantity
from numaplane.topology.cpuset import CPUSet
from numaplane.topology.errors import CPUSetParseError
from numaplane.topology.model import Topology

__all__ = ["DeviceSpec", "NodeResourceConfig", "invalid_config", "machine_problems", "parse_config"]


@dataclass(frozen=True, slots=True)
class DeviceSpec:
    """One device as a device plugin reports it: id and NUMA nodes (``None``: no affinity)."""

    id: str
    numa: tuple[int, ...] | None = None
    healthy: bool = True


@dataclass(frozen=True)
class NodeResourceConfig:
    """The parsed configuration. Invariant: every field has been validated by :func:`parse_config`."""

    topology_policy: str = "none"
    topology_scope: str = "container"
    topology_options: Mapping[str, str] = field(default_factory=dict)
    cpu_policy: str = "static"
    reserved_cpus: CPUSet | None = None
    reserved_cpu_count: int | None = None
    cpu_options: Mapping[str, str] = field(default_factory=dict)
    memory_policy: str = "None"
    reserved_memory: Mapping[int, Mapping[str, int]] = field(default_factory=dict)
    devices: Mapping[str, tuple[DeviceSpec, ...]] = field(default_factory=dict)
    #: ``dra.enabled``: a pod's allocated ResourceClaims take part in the topology manager's merge.
    dra_enabled: bool = False
    #: ``dra.numaAttributes``: driver-specific NUMA attributes (qualified names), after the standard one.
    dra_numa_attributes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The document form (round-trips through :func:`parse_config`)."""
        cpu: dict[str, Any] = {"policy": self.cpu_policy, "options": dict(self.cpu_options)}
        if self.reserved_cpus is not None:
            cpu["reservedCPUs"] = self.reserved_cpus.format()
        if self.reserved_cpu_count is not None:
            cpu["reservedCPUCount"] = self.reserved_cpu_count
        doc: dict[str, Any] = {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "topologyManager": {
                "policy": self.topology_policy,
                "scope": self.topology_scope,
                "options": dict(self.topology_options),
            },
            "cpuManager": cpu,
            "memoryManager": {
                "policy": self.memory_policy,
                "reservedMemory": [
                    {"numaNode": numa, "limits": dict(limits)} for numa, limits in sorted(self.reserved_memory.items())
                ],
            },
            "devices": {
                name: [{"id": d.id, "numa": None if d.numa is None else list(d.numa)} for d in devs]
                for name, devs in sorted(self.devices.items())
            },
        }
        if self.dra_enabled or self.dra_numa_attributes:  # absent by default: older documents stay as they were
            doc["dra"] = {"enabled": self.dra_enabled, "numaAttributes": list(self.dra_numa_attributes)}
        return doc

    @property
    def effective_reserved_count(self) -> int:
        """Reserved CPU count: the explicit list's size, else the count, else 0."""
        if self.reserved_cpu_count is not None:
            return self.reserved_cpu_count
        return self.reserved_cpus.size() if self.reserved_cpus is not None else 0


def parse_config(doc: Any, machine: Topology | None = None) -> NodeResourceConfig:
    """Validate and parse a config document; raise :class:`PolicyConfigError` listing all problems.

    With ``machine`` the same pass also checks the document against that machine
    (:func:`machine_problems`: reserved CPUs and NUMA nodes named by reservedMemory and devices exist),
    so every problem — schema, values and machine — is listed at once."""
    problems: list[str] = []
    if doc is None:
        doc = {}
    if not isinstance(doc, Mapping):
        raise PolicyConfigError("config must be a mapping (YAML/JSON object)")
    problems.extend(_unknown_fields(doc))
    if doc.get("apiVersion", API_VERSION) != API_VERSION:
        problems.append(f"apiVersion must be {API_VERSION!r}")
    if doc.get("kind", KIND) != KIND:
        problems.append(f"kind must be {KIND!r}")

    tm = _section(doc, "topologyManager", problems)
    tm_policy = _choice(tm, "policy", TM_POLICIES, "none", "topologyManager", problems)
    tm_scope = _choice(tm, "scope", TM_SCOPES, "container", "topologyManager", problems)
    tm_options = _options(tm, "topologyManager", problems)
    _check_topology_options(tm_options, problems)

    cpu = _section(doc, "cpuManager", problems)
    cpu_policy = _choice(cpu, "policy", CPU_POLICIES, "static", "cpuManager", problems)
    cpu_options = _options(cpu, "cpuManager", problems)
    _check_cpu_options(cpu_options, problems)
    reserved_cpus: CPUSet | None = None
    raw_list = cpu.get("reservedCPUs")
    if raw_list is not None:
        if not isinstance(raw_list, str):
            problems.append('cpuManager.reservedCPUs must be a cpuset string such as "0-1,8"')
        else:
            try:
                reserved_cpus = CPUSet.parse(raw_list)
            except CPUSetParseError as exc:
                problems.append(f"cpuManager.reservedCPUs: {exc}")
    reserved_count: int | None = None
    raw_count = cpu.get("reservedCPUCount")
    if raw_count is not None:
        if isinstance(raw_count, bool) or not isinstance(raw_count, int) or raw_count < 0:
            problems.append("cpuManager.reservedCPUCount must be a non-negative integer")
        elif raw_count > MAX_CPU_ID + 1:
            problems.append(f"cpuManager.reservedCPUCount must be at most {MAX_CPU_ID + 1}")
        else:
            reserved_count = raw_count
    if reserved_cpus is not None and reserved_count is not None and reserved_cpus.size() != reserved_count:
        problems.append(
            f"cpuManager.reservedCPUs has {reserved_cpus.size()} CPUs but reservedCPUCount is {reserved_count}"
        )
    if cpu_policy == "none" and cpu_options:
        problems.append("cpuManager.options are not allowed with policy none")

    mem = _section(doc, "memoryManager", problems)
    mem_policy = _choice(mem, "policy", MEMORY_POLICIES, "None", "memoryManager", problems)
    reserved_memory = _reserved_memory(mem, problems)

    devices = _devices(doc.get("devices"), problems)
    dra_enabled, dra_attributes = _dra(_section(doc, "dra", problems), problems)
    if machine is not None:
        problems.extend(
            _machine_problems(
                machine, reserved_cpus, reserved_count, reserved_memory, devices, mem.get("reservedMemory")
            )
        )

    if problems:
        raise invalid_config(problems)
    return NodeResourceConfig(
        topology_policy=tm_policy,
        topology_scope=tm_scope,
        topology_options=tm_options,
        cpu_policy=cpu_policy,
        reserved_cpus=reserved_cpus,
        reserved_cpu_count=reserved_count,
        cpu_options=cpu_options,
        memory_policy=mem_policy,
        reserved_memory=reserved_memory,
        devices=devices,
        dra_enabled=dra_enabled,
        dra_numa_attributes=dra_attributes,
    )


def invalid_config(problems: list[str]) -> PolicyConfigError:
    """The one error listing every problem of a configuration."""
    return PolicyConfigError(
        f"invalid configuration ({len(problems)} problem{'s' if len(problems) > 1 else ''}): " + "; ".join(problems)
    )


def machine_problems(config: NodeResourceConfig, machine: Topology) -> list[str]:
    """Every way an already parsed ``config`` does not fit ``machine`` (empty: it fits), each naming its path:
    reserved CPUs that are not online CPUs of the machine, a reserved count above its CPU count, and
    ``reservedMemory`` or device NUMA nodes it does not have."""
    return _machine_problems(
        machine, config.reserved_cpus, config.reserved_cpu_count, config.reserved_memory, config.devices, None
    )


def _machine_problems(
    machine: Topology,
    reserved_cpus: CPUSet | None,
    reserved_count: int | None,
    reserved_memory: Mapping[int, Mapping[str, int]],
    devices: Mapping[str, tuple[DeviceSpec, ...]],
    raw_reserved_memory: Any,
) -> list[str]:
    problems: list[str] = []
    online = machine.all_cpus
    if reserved_cpus is not None and not reserved_cpus.is_subset_of(online):
        problems.append(
            f"cpuManager.reservedCPUs: CPU {reserved_cpus.difference(online).format()} not online on this machine "
            f"(CPUs {online.format() or 'none'})"
        )
    if reserved_count is not None and reserved_count > online.size():
        problems.append(
            f"cpuManager.reservedCPUCount: {reserved_count} is more than the machine's {online.size()} CPUs"
        )
    nodes = machine.memory_numa_ids
    known = f"(NUMA nodes {', '.join(map(str, nodes)) or 'none'})"
    raw = raw_reserved_memory if isinstance(raw_reserved_memory, list) else []
    for numa in sorted(reserved_memory):
        if numa not in nodes:
            index = next((i for i, e in enumerate(raw) if isinstance(e, Mapping) and e.get("numaNode") == numa), None)
            where = f"memoryManager.reservedMemory[{index}]" if index is not None else "memoryManager.reservedMemory"
            problems.append(f"{where}.numaNode: NUMA node {numa} is not on this machine {known}")
    for resource, specs in sorted(devices.items()):
        for i, spec in enumerate(specs):
            missing = sorted(set(spec.numa or ()) - set(nodes))
            if missing:
                problems.append(
                    f"devices.{resource}[{i}].numa: NUMA node {', '.join(map(str, missing))} is not on this machine "
                    f"{known} (device {spec.id})"
                )
    return problems


#: A qualified DRA attribute name: ``<DNS subdomain>/<C identifier>`` (resource.k8s.io/v1 limits).
_DRA_ATTRIBUTE = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/[A-Za-z_][A-Za-z0-9_]{0,63}")
MAX_DRA_ATTRIBUTES = 16


def _dra(section: Mapping[str, Any], problems: list[str]) -> tuple[bool, tuple[str, ...]]:
    enabled = section.get("enabled", False)
    if not isinstance(enabled, bool):
        problems.append("dra.enabled must be a boolean")
        enabled = False
    raw = section.get("numaAttributes")
    if raw is None:
        return enabled, ()
    if not isinstance(raw, list):
        problems.append("dra.numaAttributes must be a list of qualified attribute names")
        return enabled, ()
    if len(raw) > MAX_DRA_ATTRIBUTES:
        problems.append(f"dra.numaAttributes: {len(raw)} names, at most {MAX_DRA_ATTRIBUTES}")
        return enabled, ()
    names: list[str] = []
    for i, name in enumerate(raw):
        if not isinstance(name, str) or not _DRA_ATTRIBUTE.fullmatch(name):
            problems.append(
                f"dra.numaAttributes[{i}]: {str(name)[:64]!r} is not a qualified attribute name "
                "(<driver domain>/<name>, e.g. gpu.amd.com/numaNode)"
            )
        elif name not in names:
            names.append(name)
    return enabled, tuple(names)


def _unknown_fields(doc: Mapping[str, Any]) -> list[str]:
    """``path: unknown field`` for every field the schema does not define (as ``kubectl --validate=strict``)."""
    import jsonschema

    out = []
    for error in jsonschema.Draft202012Validator(CONFIG_SCHEMA).iter_errors(doc):
        if error.validator != "additionalProperties" or not isinstance(error.instance, Mapping):
            continue  # everything else is checked below, in our own words
        allowed = error.schema.get("properties", {})
        where = ".".join(str(p) if isinstance(p, str) else f"[{p}]" for p in error.absolute_path).replace(".[", "[")
        for key in error.instance:
            if key not in allowed:
                out.append(f"{where + '.' if where else ''}{key}: unknown field")
    return sorted(out)


def _check_cpu_options(options: Mapping[str, str], problems: list[str]) -> None:
    from numaplane.policy.cpu import GO_FALSE, GO_TRUE, OPTION_FIELDS, StaticPolicyOptions

    before = len(problems)
    for name, value in sorted(options.items()):
        if name not in OPTION_FIELDS:
            problems.append(f"cpuManager.options.{name}: unknown option (known: {', '.join(sorted(OPTION_FIELDS))})")
        elif value not in GO_TRUE and value not in GO_FALSE:
            problems.append(f'cpuManager.options.{name}: {value!r} is not a boolean ("true" or "false")')
    if len(problems) == before:
        try:
            StaticPolicyOptions.parse(options)
        except PolicyConfigError as exc:
            problems.append(f"cpuManager.options: {exc}")


def _check_topology_options(options: Mapping[str, str], problems: list[str]) -> None:
    from numaplane.policy.topology_manager import (
        DEFAULT_MAX_ALLOWABLE_NUMA_NODES,
        OPTION_MAX_ALLOWABLE,
        OPTION_PREFER_CLOSEST,
    )

    for name, value in sorted(options.items()):
        where = f"topologyManager.options.{name}"
        if name == OPTION_PREFER_CLOSEST:
            if value not in ("1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False"):
                problems.append(f'{where}: {value!r} is not a boolean ("true" or "false")')
        elif name == OPTION_MAX_ALLOWABLE:
            if not value.lstrip("+-").isdigit() or not value.isascii():
                problems.append(f"{where}: {value!r} is not an integer")
            elif int(value) < DEFAULT_MAX_ALLOWABLE_NUMA_NODES:
                problems.append(f"{where}: must be at least {DEFAULT_MAX_ALLOWABLE_NUMA_NODES}, got {value}")
        else:
            problems.append(f"{where}: unknown option (known: {OPTION_MAX_ALLOWABLE}, {OPTION_PREFER_CLOSEST})")


def _section(doc: Mapping[str, Any], key: str, problems: list[str]) -> Mapping[str, Any]:
    value = doc.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.append(f"{key} must be a mapping")
        return {}
    return value


def _choice(
    section: Mapping[str, Any], key: str, allowed: tuple[str, ...], default: str, where: str, problems: list[str]
) -> str:
    value = section.get(key, default)
    if value not in allowed:
        problems.append(f"{where}.{key}: {value!r} is not one of {', '.join(allowed)}")
        return default
    return str(value)


def _options(section: Mapping[str, Any], where: str, problems: list[str]) -> dict[str, str]:
    raw = section.get("options")
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.append(f"{where}.options must be a mapping of option name to string value")
        return {}
    out: dict[str, str] = {}
    for name, value in raw.items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, int):
            # beyond 64 bits an option is out of range anyway (and huge ints cannot become text)
            value = str(value) if value.bit_length() <= 64 else "9" * 20
        if not isinstance(name, str) or not isinstance(value, str):
            problems.append(f"{where}.options.{str(name)[:64]}: values must be strings")
            continue
        if len(name) > 253 or len(value) > 256:
            problems.append(f"{where}.options.{name[:64]}: option names and values are at most 253/256 characters")
            continue
        out[name] = value
    return out


def _reserved_memory(mem: Mapping[str, Any], problems: list[str]) -> dict[int, dict[str, int]]:
    raw = mem.get("reservedMemory")
    if raw is None:
        return {}
    if not isinstance(raw, list):
        problems.append("memoryManager.reservedMemory must be a list of {numaNode, limits}")
        return {}
    out: dict[int, dict[str, int]] = {}
    for i, entry in enumerate(raw):
        where = f"memoryManager.reservedMemory[{i}]"
        if not isinstance(entry, Mapping):
            problems.append(f"{where} must be a mapping")
            continue
        numa = entry.get("numaNode")
        if isinstance(numa, bool) or not isinstance(numa, int) or numa < 0:
            problems.append(f"{where}.numaNode must be a non-negative integer")
            continue
        limits = entry.get("limits")
        if not isinstance(limits, Mapping):
            problems.append(f"{where}.limits must be a mapping of resource to quantity")
            continue
        for resource, quantity in limits.items():
            try:
                out.setdefault(numa, {})[str(resource)] = parse_quantity(quantity).value()
            except QuantityError as exc:
                problems.append(f"{where}.limits.{resource}: {exc}")
    return out


def _devices(raw: Any, problems: list[str]) -> dict[str, tuple[DeviceSpec, ...]]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.append("devices must be a mapping of resource name to a list of devices")
        return {}
    out: dict[str, tuple[DeviceSpec, ...]] = {}
    for resource, devs in raw.items():
        if not isinstance(devs, list):
            problems.append(f"devices.{resource} must be a list")
            continue
        specs: list[DeviceSpec] = []
        for i, d in enumerate(devs):
            where = f"devices.{resource}[{i}]"
            if not isinstance(d, Mapping) or not isinstance(d.get("id"), str):
                problems.append(f"{where} must be a mapping with a string id")
                continue
            if not 0 < len(d["id"]) <= MAX_DEVICE_ID_CHARS:
                problems.append(f"{where}.id must have 1 to {MAX_DEVICE_ID_CHARS} characters (got {len(d['id'])})")
                continue
            numa = d.get("numa")
            if numa is not None and (
                not isinstance(numa, list)
                or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in numa)
            ):
                problems.append(f"{where}.numa must be a list of NUMA node ids or null")
                continue
            specs.append(
                DeviceSpec(id=d["id"], numa=None if numa is None else tuple(numa), healthy=bool(d.get("healthy", True)))
            )
        out[str(resource)] = tuple(specs)
    return out
