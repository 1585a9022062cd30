#!/usr/bin/env python3
"""An example vendor plugin: ``example.com/accelerator``, a NUMA-affine accelerator with its own memory.

Each NUMA node holds ``--per-numa`` accelerators (ids ``acc<numa>-<i>``), each with
``--memory-gib`` GiB of device memory. The plugin implements numaplane's ``ResourcePlugin``
protocol and is served out of process over the plugin API v1 (:func:`main`), so the agent, the
simulator (``numaplane simulate --plugin``) and the tests reach it exactly as they reach any vendor
plugin.

Its own allocation policy (not the Device Manager's):

* hints: every single NUMA node with enough free accelerators is a preferred hint; when no single
  node has enough, the smallest NUMA sets that do are non-preferred hints (as the kubelet does for
  devices); a container asking for none gets no preference;
* allocation: inside the merged hint's NUMA nodes, the node with the *fewest* free accelerators
  that still satisfies the request first (best fit, keeps whole nodes free for big requests), then
  ids in order; all-or-nothing;
* enforcement: the allocation's ``extra`` carries the environment the container needs
  (``ACCELERATOR_VISIBLE_DEVICES``, ``ACCELERATOR_MEMORY_BYTES``); the agent applies it with the
  NRI adjustment that pins the container's CPUs.

Allocatable / available are reported per NUMA node as accelerator counts, which is what the NRT
zones and the scheduler's filter see; the inventory (``inventory()``, ``GetInventory``) lists every
accelerator with its id and NUMA node, which the agent's PodResources ``GetAllocatableResources``
answer lists.

Usage::

    python examples/plugins/accelerator_plugin.py --plugin-dir /var/lib/numaplane/plugins
    python examples/plugins/accelerator_plugin.py --socket /tmp/acc.sock --no-register   # serve only
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Mapping
from itertools import combinations
from pathlib import Path
from typing import Any

from numaplane.grpcapi.pluginapi.server import PluginServer, run_plugin
from numaplane.policy.config import NodeResourceConfig
from numaplane.policy.errors import UnexpectedAdmissionError
from numaplane.policy.hints import NUMAMask, TopologyHint
from numaplane.policy.plugin import DeviceInfo, Hints, Inventory, PluginAllocation
from numaplane.resources.pod import Container, Pod
from numaplane.topology.model import Topology

NAME = "example.com/accelerators"
RESOURCE = "example.com/accelerator"
ENV_DEVICES = "ACCELERATOR_VISIBLE_DEVICES"
ENV_MEMORY = "ACCELERATOR_MEMORY_BYTES"


class AcceleratorPlugin:
    """The accelerator policy (module docstring). Pure: no I/O; the server does the talking."""

    resources = frozenset({RESOURCE})

    def __init__(
        self, topology: Topology, config: Mapping[str, Any], *, per_numa: int = 2, memory_gib: int = 16
    ) -> None:
        self.name = NAME
        self.memory_bytes = memory_gib << 30
        self.devices = {f"acc{n}-{i}": n for n in topology.numa_ids if n < 64 for i in range(per_numa)}
        self.held: dict[tuple[str, str], tuple[str, ...]] = {}
        self.delay_seconds = 0.0

    # -- helpers ------------------------------------------------------------------------------------
    @staticmethod
    def wanted(container: Container) -> int:
        q = container.requests.get(RESOURCE) or container.limits.get(RESOURCE)
        return 0 if q is None else q.value()

    def _free_by_numa(self) -> dict[int, list[str]]:
        used = {i for ids in self.held.values() for i in ids}
        out: dict[int, list[str]] = {n: [] for n in sorted(set(self.devices.values()))}
        for dev, numa in sorted(self.devices.items()):
            if dev not in used:
                out[numa].append(dev)
        return out

    # -- ResourcePlugin -----------------------------------------------------------------------------
    def hints(self, pod: Pod, container: Container) -> Hints | None:
        n = self.wanted(container)
        if not n:
            return None
        free = self._free_by_numa()
        single = [TopologyHint(NUMAMask.of(numa), True) for numa, ids in free.items() if len(ids) >= n]
        if single:
            return {RESOURCE: single}
        nodes = list(free)
        for size in range(2, len(nodes) + 1):
            found = [
                TopologyHint(NUMAMask.from_ids(combo), False)
                for combo in combinations(nodes, size)
                if sum(len(free[c]) for c in combo) >= n
            ]
            if found:
                return {RESOURCE: found}
        return {RESOURCE: []}

    def pod_hints(self, pod: Pod) -> Hints | None:
        return None

    def allocate(self, pod: Pod, container: Container, hint: TopologyHint) -> PluginAllocation:
        if self.delay_seconds:
            time.sleep(self.delay_seconds)  # a slow device driver (tests)
        n = self.wanted(container)
        if not n:
            return PluginAllocation(self.name)
        free = self._free_by_numa()
        allowed = set(free) if hint.numa is None else set(hint.numa.ids()) & set(free)
        # best fit: the fullest allowed node that still satisfies the request, then the others
        order = sorted(allowed, key=lambda numa: (len(free[numa]) < n, len(free[numa]), numa))
        ids: list[str] = []
        for numa in order:
            ids.extend(free[numa][: n - len(ids)])
            if len(ids) == n:
                break
        if len(ids) < n:
            raise UnexpectedAdmissionError(f"not enough accelerators: requested {n}, free in hint {len(ids)}")
        chosen = tuple(ids)
        self.held[(pod.uid, container.name)] = chosen
        return self._record(chosen)

    def _record(self, ids: tuple[str, ...]) -> PluginAllocation:
        return PluginAllocation(
            self.name,
            devices={RESOURCE: ids},
            numa=NUMAMask.from_ids({self.devices[i] for i in ids}),
            extra={"env": {ENV_DEVICES: ",".join(ids), ENV_MEMORY: str(self.memory_bytes * len(ids))}},
        )

    def release(self, pod_uid: str, container_name: str) -> None:
        self.held.pop((pod_uid, container_name), None)

    def allocations(self) -> Mapping[tuple[str, str], PluginAllocation]:
        return {key: self._record(ids) for key, ids in self.held.items()}

    def inventory(self) -> Inventory:
        return Inventory(
            devices=tuple(DeviceInfo(RESOURCE, dev, (numa,)) for dev, numa in sorted(self.devices.items()))
        )

    def allocatable(self) -> Mapping[int, Mapping[str, int]]:
        out: dict[int, dict[str, int]] = {}
        for numa in self.devices.values():
            row = out.setdefault(numa, {RESOURCE: 0})
            row[RESOURCE] += 1
        return out

    def available(self) -> Mapping[int, Mapping[str, int]]:
        return {numa: {RESOURCE: len(ids)} for numa, ids in self._free_by_numa().items()}

    def check_config(self, config: NodeResourceConfig) -> list[str]:
        return []

    def reconfigure(self, config: NodeResourceConfig) -> None:
        return None

    def snapshot(self) -> dict[str, Any]:
        return {"held": [{"pod": k[0], "container": k[1], "ids": list(v)} for k, v in sorted(self.held.items())]}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        held = snapshot.get("held") or []
        self.held = {(str(h["pod"]), str(h["container"])): tuple(h["ids"]) for h in held}


def plugin_factory(topology: Topology, config: Any) -> AcceleratorPlugin:
    """The in-process form, for ``numaplane simulate --plugin examples/plugins/accelerator_plugin.py``."""
    return AcceleratorPlugin(topology, {})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--plugin-dir", type=Path, help="the agent's plugin directory (register there)")
    parser.add_argument("--socket", type=Path, help="serve on this socket instead (with --no-register)")
    parser.add_argument("--no-register", action="store_true")
    parser.add_argument("--per-numa", type=int, default=2)
    parser.add_argument("--memory-gib", type=int, default=16)
    parser.add_argument("--allocate-delay", type=float, default=0.0, help="sleep in Allocate (tests)")
    args = parser.parse_args(argv)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())

    def factory(topology: Topology, config: Mapping[str, Any]) -> AcceleratorPlugin:
        plugin = AcceleratorPlugin(topology, config, per_numa=args.per_numa, memory_gib=args.memory_gib)
        plugin.delay_seconds = args.allocate_delay
        return plugin

    if args.no_register:
        if args.socket is None:
            parser.error("--no-register needs --socket")
        server = PluginServer(factory, name=NAME, resources={RESOURCE}, socket_path=args.socket)
        server.start()
        print("ready", flush=True)
        done.wait()
        server.stop()
        return 0
    if args.plugin_dir is None:
        parser.error("--plugin-dir is required (or --socket with --no-register)")
    with run_plugin(factory, name=NAME, resources={RESOURCE}, plugin_dir=args.plugin_dir, endpoint="accelerator.sock"):
        print("ready", flush=True)
        done.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
