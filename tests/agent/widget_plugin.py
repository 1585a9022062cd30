"""A small out-of-process vendor plugin for the tests: 'example.com/widget' devices, two per NUMA node.

Run as a script (``python widget_plugin.py --plugin-dir D``) it serves and keeps registered with the
agent through ``numaplane.grpcapi.pluginapi.server.run_plugin``. ``--allocate-delay`` makes Allocate
slow (to test the agent's deadline), ``--unhealthy-file`` answers Health unhealthy while that file exists.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from numaplane.grpcapi.pluginapi.server import run_plugin
from numaplane.policy.config import NodeResourceConfig
from numaplane.policy.errors import UnexpectedAdmissionError
from numaplane.policy.hints import NUMAMask, TopologyHint
from numaplane.policy.plugin import Hints, PluginAllocation
from numaplane.resources.pod import Container, Pod
from numaplane.topology.model import Topology

RESOURCE = "example.com/widget"


class WidgetPlugin:
    resources = frozenset({RESOURCE})

    def __init__(self, topology: Topology, config: Mapping[str, Any], name: str, delay: float = 0.0) -> None:
        self.name = name
        self.delay = delay
        self.devices = {f"w{n}{i}": n for n in topology.numa_ids for i in range(2)}  # id -> NUMA node
        self.held: dict[str, list[str]] = {}  # "<pod uid>|<container>" -> ids

    def _want(self, container: Container) -> int:
        q = container.requests.get(RESOURCE) or container.limits.get(RESOURCE)
        return 0 if q is None else q.value()

    def _free(self) -> list[str]:
        used = {i for ids in self.held.values() for i in ids}
        return sorted(i for i in self.devices if i not in used)

    def hints(self, pod: Pod, container: Container) -> Hints | None:
        n = self._want(container)
        if not n:
            return None
        free = self._free()
        nodes = sorted({self.devices[i] for i in free if sum(self.devices[j] == self.devices[i] for j in free) >= n})
        return {RESOURCE: [TopologyHint(NUMAMask.of(node), True) for node in nodes]}

    def pod_hints(self, pod: Pod) -> Hints | None:
        return None

    def allocate(self, pod: Pod, container: Container, hint: TopologyHint) -> PluginAllocation:
        if self.delay:
            time.sleep(self.delay)
        n = self._want(container)
        if not n:
            return PluginAllocation(self.name)
        free = [i for i in self._free() if hint.numa is None or self.devices[i] in hint.numa.ids()]
        if len(free) < n:
            raise UnexpectedAdmissionError(f"not enough widgets: requested {n}, free {len(free)}")
        ids = free[:n]
        self.held[f"{pod.uid}|{container.name}"] = ids
        return PluginAllocation(
            self.name, devices={RESOURCE: tuple(ids)}, numa=NUMAMask.from_ids({self.devices[i] for i in ids})
        )

    def release(self, pod_uid: str, container_name: str) -> None:
        self.held.pop(f"{pod_uid}|{container_name}", None)

    def allocations(self) -> Mapping[tuple[str, str], PluginAllocation]:
        out = {}
        for key, ids in self.held.items():
            uid, name = key.split("|", 1)
            out[(uid, name)] = PluginAllocation(self.name, devices={RESOURCE: tuple(ids)})
        return out

    def allocatable(self) -> Mapping[int, Mapping[str, int]]:
        out: dict[int, dict[str, int]] = {}
        for numa in self.devices.values():
            out.setdefault(numa, {RESOURCE: 0})[RESOURCE] += 1
        return out

    def available(self) -> Mapping[int, Mapping[str, int]]:
        out: dict[int, dict[str, int]] = {n: {RESOURCE: 0} for n in set(self.devices.values())}
        for i in self._free():
            out[self.devices[i]][RESOURCE] += 1
        return out

    def check_config(self, config: NodeResourceConfig) -> list[str]:
        return []

    def reconfigure(self, config: NodeResourceConfig) -> None:
        return None

    def snapshot(self) -> dict[str, Any]:
        return {"held": {k: list(v) for k, v in sorted(self.held.items())}}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        self.held = {str(k): list(v) for k, v in (snapshot.get("held") or {}).items()}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--plugin-dir", required=True)
    parser.add_argument("--name", default="example.com/widgets")
    parser.add_argument("--allocate-delay", type=float, default=0.0)
    args = parser.parse_args()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())

    def factory(topology: Topology, config: Mapping[str, Any]) -> WidgetPlugin:
        return WidgetPlugin(topology, config, args.name, args.allocate_delay)

    with run_plugin(
        factory,
        name=args.name,
        resources={RESOURCE},
        plugin_dir=Path(args.plugin_dir),
        endpoint="widgets.sock",
        poll_seconds=0.05,
    ):
        print("ready", flush=True)
        done.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
