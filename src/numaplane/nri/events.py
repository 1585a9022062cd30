"""What NRI carries, as plain frozen values: pods, containers, cpuset updates and adjustments, events.

The vocabulary of every NRI handler (``nri/stub.py``: handlers take and return these) and of the node
agent's state machine, which sees only these types, never a protobuf message: ``nri/translate.py``
turns the runtime's protobuf messages into them and the answers back into protobuf. They
live here, in the NRI adapter package but with no protobuf import, because both sides use them: the
adapter (``nri``) may not import the agent (a component, higher up the layers), while the agent may
import the adapter; a pure module further down (``resources``, ``topology``) would have had to know
NRI's vocabulary, which is not the pure core's business. import-linter checks that neither this module
nor the agent's state machine imports the generated protobuf modules.

Units: CPU shares as the runtime writes them (the kubelet writes ``milli × 1024 / 1000``, at least 2),
CFS quota and period in microseconds, memory and hugepage limits in bytes; ``None`` means unset (a
field the runtime did not send), never zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from functools import lru_cache
from types import MappingProxyType

from numaplane.topology.cpuset import CPUSet

__all__ = [
    "Adjustment",
    "CgroupResources",
    "ContainerState",
    "CpusetUpdate",
    "Event",
    "RuntimeContainer",
    "RuntimeInfo",
    "Sandbox",
    "SyncPart",
    "cpuset_text",
]

_EMPTY: Mapping[str, str] = MappingProxyType({})


class ContainerState(IntEnum):
    """A container's state as the runtime reports it (the numbers are NRI's ``ContainerState``)."""

    UNKNOWN = 0
    CREATED = 1
    PAUSED = 2
    RUNNING = 3
    STOPPED = 4

    @property
    def live(self) -> bool:
        """Everything but STOPPED: the container may run, so it holds (or waits for) its cpuset."""
        return self is not ContainerState.STOPPED


class Event(IntEnum):
    """An NRI event a plugin subscribes to (the numbers are NRI's ``Event``; bit ``1 << (n - 1)`` of
    ``ConfigureResponse.events``). CREATE/UPDATE/STOP_CONTAINER are requests the runtime waits for,
    the others arrive as ``StateChange``."""

    RUN_POD_SANDBOX = 1
    STOP_POD_SANDBOX = 2
    REMOVE_POD_SANDBOX = 3
    CREATE_CONTAINER = 4
    POST_CREATE_CONTAINER = 5
    START_CONTAINER = 6
    POST_START_CONTAINER = 7
    UPDATE_CONTAINER = 8
    POST_UPDATE_CONTAINER = 9
    STOP_CONTAINER = 10
    REMOVE_CONTAINER = 11

    @property
    def bit(self) -> int:
        """This event's bit in ``ConfigureResponse.events``."""
        return 1 << (self.value - 1)


@dataclass(frozen=True, slots=True)
class RuntimeInfo:
    """What Configure says: the plugin's ``config`` text from the runtime's NRI configuration (empty
    if none) and the runtime's name and version (e.g. ``containerd``, ``1.7.24~ds1``)."""

    config: str = ""
    runtime: str = ""
    version: str = ""


@dataclass(frozen=True, slots=True)
class Sandbox:
    """A pod sandbox: its runtime ``id``, the pod's ``uid``/``name``/``namespace`` and annotations,
    and the cgroup parent the kubelet chose (which encodes the QoS class). Empty strings: unknown."""

    id: str
    uid: str = ""
    name: str = ""
    namespace: str = ""
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    cgroup_parent: str = ""


@dataclass(frozen=True, slots=True)
class CgroupResources:
    """The Linux resources the runtime reports for a container (see the module docstring for units).

    ``cpus`` / ``mems``: the cpuset strings (empty when unset); ``hugepage_limits``: ``(page size as
    the runtime spells it, e.g. "2MB", limit in bytes)`` in the runtime's order.
    """

    cpu_shares: int | None = None
    cpu_quota: int | None = None
    cpu_period: int | None = None
    memory_limit: int | None = None
    cpus: str = ""
    mems: str = ""
    hugepage_limits: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class RuntimeContainer:
    """A container as the runtime reports it: ids, name, state and Linux resources."""

    id: str
    pod_sandbox_id: str
    name: str
    state: ContainerState = ContainerState.UNKNOWN
    resources: CgroupResources = field(default_factory=CgroupResources)


@dataclass(frozen=True, slots=True)
class CpusetUpdate:
    """Set a container's ``cpuset.cpus`` (and ``cpuset.mems`` unless ``None``)."""

    container_id: str
    cpus: CPUSet
    mems: CPUSet | None = None


@dataclass(frozen=True, slots=True)
class Adjustment:
    """A creation-time adjustment: the new container's ``cpuset.cpus`` (and ``cpuset.mems`` unless
    ``None``) and environment variables to add, ``(name, value)`` in order. ``cpus`` ``None``: the
    cpuset is left as the runtime has it."""

    cpus: CPUSet | None = None
    mems: CPUSet | None = None
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class SyncPart:
    """One ``SynchronizeRequest``: pods and containers, and ``more`` when further parts follow (NRI >= 0.8
    splits a large state). The stub joins the parts; a handler sees the whole list once."""

    pods: tuple[Sandbox, ...]
    containers: tuple[RuntimeContainer, ...]
    more: bool = False


@lru_cache(maxsize=4096)
def cpuset_text(cpus: CPUSet) -> str:
    """``cpus.format()``, memoised: a pool change formats one set for hundreds of containers."""
    return cpus.format()
