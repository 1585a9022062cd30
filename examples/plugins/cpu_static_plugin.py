#!/usr/bin/env python3
"""The kubelet's static CPU policy served out of process over the numaplane plugin API v1.

An example vendor plugin: :class:`StaticCPUPlugin` implements numaplane's ``ResourcePlugin``
protocol around the kubelet-exact static policy (``numaplane.policy.cpu.StaticPolicy`` and its
``CPUState``), and :func:`main` serves it on a unix socket in the agent's plugin directory and keeps
it registered (``numaplane.grpcapi.pluginapi.server.run_plugin``). The project's tests run every
``cpu-static`` conformance case through the gRPC adapter against this process.

Configuration: the ``cpuManager`` section of the agent's NodeResourceConfig document —
``reservedCPUs`` (explicit list) and/or ``reservedCPUCount`` (count; the set is then chosen by
topology, as the kubelet does), ``options`` (static policy options) — and ``topologyManager.policy``
when present, or the section given with ``--cpu-manager`` (JSON), which replaces the agent's. The
agent's ``policy: none`` means its built-in CPU plugin is off and ``cpu`` is this plugin's: the static
policy runs with the section's reservation. An inconsistent reservation is refused with the
kubelet's own message.

Usage::

    python examples/plugins/cpu_static_plugin.py --plugin-dir /var/lib/numaplane/plugins
    python examples/plugins/cpu_static_plugin.py --socket /tmp/cpu.sock --no-register   # serve only

The agent accepts this plugin for ``cpu`` only when its built-in CPU plugin is off
(``cpuManager.policy: none``); it then takes containers' exclusive CPUs from this plugin's
allocations and leaves them out of the shared pool. For example::

    python examples/plugins/cpu_static_plugin.py --plugin-dir /var/lib/numaplane/plugins \
        --cpu-manager '{"reservedCPUs": "0"}'
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Mapping
from typing import Any

from numaplane.grpcapi.pluginapi.server import PluginFactory, PluginServer, run_plugin
from numaplane.grpcapi.pluginapi.v1 import api_pb2 as pb
from numaplane.policy.config import NodeResourceConfig
from numaplane.policy.cpu import ReservedCPUs, StaticPolicy
from numaplane.policy.cpu_state import CPUState
from numaplane.policy.errors import PolicyConfigError
from numaplane.policy.hints import NUMAMask, TopologyHint
from numaplane.policy.plugin import Hints, Inventory, PluginAllocation
from numaplane.resources.pod import Container, Pod
from numaplane.topology.cpuset import CPUSet
from numaplane.topology.model import Topology

NAME = "example.numaplane.io/cpu-static"
OPTIONS = pb.PluginOptions(pod_hints=True, validate_state=True, exclusive_amounts=True)


def _policy(topology: Topology, doc: Mapping[str, Any], own: Mapping[str, Any] | None = None) -> StaticPolicy:
    """The static policy for the ``cpuManager`` section of a config document, or ``own`` instead
    (kubelet's errors). ``policy: none`` (the agent's built-in CPU plugin is off) runs it too."""
    cpu = own if own is not None else doc.get("cpuManager") or {}
    if cpu.get("policy", "static") not in ("static", "none"):
        raise PolicyConfigError(f"this plugin runs the static policy, not {cpu.get('policy')!r}")
    raw_cpus = cpu.get("reservedCPUs")
    cpus = None if raw_cpus is None else CPUSet.parse(str(raw_cpus))
    count = cpu.get("reservedCPUCount")
    if count is None:
        count = 0 if cpus is None else cpus.size()
    tm_policy = (doc.get("topologyManager") or {}).get("policy")
    options = {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in (cpu.get("options") or {}).items()}
    return StaticPolicy(topology, ReservedCPUs(int(count), cpus), options, topology_manager_policy=tm_policy)


class StaticCPUPlugin:
    """The kubelet static CPU policy as a ``ResourcePlugin`` (one ``CPUState``)."""

    resources = frozenset({"cpu"})

    def __init__(
        self, topology: Topology, config: Mapping[str, Any], name: str = NAME, own: Mapping[str, Any] | None = None
    ) -> None:
        self.name = name
        self.topology = topology
        self.own = own  # a cpuManager section replacing the agent's (``--cpu-manager``)
        self.policy = _policy(topology, config, own)
        self.state = self.policy.new_state()

    # -- hints and allocation
    def hints(self, pod: Pod, container: Container) -> Hints | None:
        return self.policy.hints(self.state, pod, container)

    def pod_hints(self, pod: Pod) -> Hints | None:
        return self.policy.pod_hints(self.state, pod)

    def allocate(self, pod: Pod, container: Container, hint: TopologyHint) -> PluginAllocation:
        cpus = self.policy.allocate(self.state, pod, container, hint)
        return self._record(cpus)

    def _record(self, cpus: CPUSet | None) -> PluginAllocation:
        if cpus is None:
            return PluginAllocation(self.name)
        info = self.topology.cpu_info
        return PluginAllocation(self.name, cpus=cpus, numa=NUMAMask.from_ids({info[c].numa for c in cpus}))

    def release(self, pod_uid: str, container_name: str) -> None:
        self.policy.remove_container(self.state, pod_uid, container_name)

    # -- views
    def inventory(self) -> Inventory:
        return Inventory(cpus=self.policy.allocatable)

    def allocations(self) -> Mapping[tuple[str, str], PluginAllocation]:
        return {
            (uid, name): self._record(cpus)
            for uid, containers in self.state.assignments.items()
            for name, cpus in containers.items()
        }

    def allocatable(self) -> Mapping[int, Mapping[str, int]]:
        return {n: {"cpu": c} for n, c in self.policy.allocatable_by_numa().items()}

    def available(self) -> Mapping[int, Mapping[str, int]]:
        return {n: {"cpu": c} for n, c in self.policy.available_by_numa(self.state).items()}

    def exclusive_amounts(self, pod: Pod, container: str | None) -> dict[str, int]:
        if container is None:
            return {"cpu": self.policy.pod_guaranteed_cpus(pod)}
        return {"cpu": self.policy.guaranteed_cpus(pod, container)}

    # -- configuration
    def check_config(self, config: NodeResourceConfig) -> list[str]:
        try:
            policy = _policy(self.topology, config.to_dict(), self.own)
        except (PolicyConfigError, ValueError) as exc:
            return [str(exc)]
        held = policy.reserved.mask & self.state.assigned().mask
        if held:
            return [f"reserved CPUs {CPUSet.from_mask(held)} are held exclusively"]
        return []

    def reconfigure(self, config: NodeResourceConfig) -> None:
        policy = _policy(self.topology, config.to_dict(), self.own)
        assigned = self.state.assigned().mask
        default = self.topology.all_cpus.mask & ~assigned
        if policy.options.strict_cpu_reservation:
            default &= ~policy.reserved.mask
        self.state.default = CPUSet.from_mask(default)
        self.policy = policy

    # -- state
    def snapshot(self) -> dict[str, Any]:
        return self.state.snapshot()

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        self.state = CPUState.restore(snapshot)

    def validate_state(self, snapshot: Mapping[str, Any]) -> dict[str, Any]:
        """The kubelet's Start(): validate (and complete) a stored state; nothing changes on error."""
        state = CPUState.restore(snapshot)
        self.policy.start(state)
        self.state = state
        return state.snapshot()


def factory(topology: Topology, config: Mapping[str, Any]) -> StaticCPUPlugin:
    return StaticCPUPlugin(topology, config)


def factory_with(own: Mapping[str, Any] | None) -> PluginFactory:
    """A factory whose plugins use the ``cpuManager`` section ``own`` instead of the agent's (``None``: the agent's)."""

    def make(topology: Topology, config: Mapping[str, Any]) -> StaticCPUPlugin:
        return StaticCPUPlugin(topology, config, own=own)

    return make


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plugin-dir", default="/var/lib/numaplane/plugins", help="the agent's plugin directory")
    parser.add_argument(
        "--socket", default=None, help="serve on this socket path (default: <plugin dir>/cpu-static.sock)"
    )
    parser.add_argument("--name", default=NAME)
    parser.add_argument("--no-register", action="store_true", help="serve only; do not register with the agent")
    parser.add_argument(
        "--cpu-manager",
        type=json.loads,
        default=None,
        help='a cpuManager section (JSON) used instead of the agent\'s, e.g. \'{"reservedCPUs": "0"}\'',
    )
    args = parser.parse_args(argv)
    make = factory_with(args.cpu_manager)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    if args.no_register:
        server = PluginServer(
            make, name=args.name, resources=StaticCPUPlugin.resources, socket_path=args.socket, options=OPTIONS
        )
        server.start()
        print(f"serving {args.name} on {args.socket}", flush=True)
        done.wait()
        server.stop()
        return 0
    endpoint = None if args.socket is None else args.socket.rsplit("/", 1)[-1]
    with run_plugin(
        make,
        name=args.name,
        resources=StaticCPUPlugin.resources,
        plugin_dir=args.plugin_dir,
        endpoint=endpoint or "cpu-static.sock",
        options=OPTIONS,
    ) as server:
        print(f"serving {args.name} on {server.socket_path}", flush=True)
        done.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
