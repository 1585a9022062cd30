"""Informers on Pods, Nodes and NodeResourceTopologies feeding a :class:`SchedulerState`.

:class:`ClusterInformers` runs one informer per resource through the kube port (list, then watch,
relist on 410, backoff on errors; :mod:`numaplane.kube.informer`) and registers the core's handlers
first, so every later handler (the standalone scheduler's queue) sees the core already updated.
Pods are watched in every namespace: the core needs bound pods for usage, fingerprints and foreign
pod detection. :attr:`ClusterInformers.synced` is true once all three have listed once; a missing
NodeResourceTopology CRD keeps the NRT informer retrying and the process not ready.
"""

from __future__ import annotations

import asyncio
from typing import Any

from numaplane.kube.clock import Clock
from numaplane.kube.informer import EventHandlers, Informer
from numaplane.kube.port import JsonObj, KubePort
from numaplane.kube.resources import NODE, NODE_RESOURCE_TOPOLOGY, POD
from numaplane.scheduler.state import SchedulerState

__all__ = ["ClusterInformers"]


class ClusterInformers:
    """The three informers of a scheduler process (module docstring)."""

    def __init__(
        self, kube: KubePort, core: SchedulerState, *, clock: Clock | None = None, backoff_max_seconds: float = 10.0
    ) -> None:
        common: dict[str, Any] = {"clock": clock, "backoff_max_seconds": backoff_max_seconds}
        self.core = core
        self.nodes = Informer(kube, NODE, name="nodes", **common)
        self.nrts = Informer(kube, NODE_RESOURCE_TOPOLOGY, name="noderesourcetopologies", **common)
        self.pods = Informer(kube, POD, name="pods", **common)
        self.nodes.add_handler(
            EventHandlers(
                on_add=core.node_upserted,
                on_update=lambda old, new: core.node_upserted(new),
                on_delete=core.node_deleted,
            )
        )
        self.nrts.add_handler(
            EventHandlers(
                on_add=core.nrt_upserted,
                on_update=lambda old, new: core.nrt_upserted(new),
                on_delete=core.nrt_deleted,
            )
        )
        self.pods.add_handler(
            EventHandlers(
                on_add=self._pod_added,
                on_update=self._pod_updated,
                on_delete=core.pod_deleted,
            )
        )

    def _pod_added(self, obj: JsonObj) -> None:
        self.core.pod_upserted(None, obj)

    def _pod_updated(self, old: JsonObj, new: JsonObj) -> None:
        self.core.pod_upserted(old, new)

    @property
    def all(self) -> tuple[Informer, ...]:
        # Nodes and NRTs first: pods referencing them then find the node known.
        return (self.nodes, self.nrts, self.pods)

    @property
    def synced(self) -> bool:
        return all(i.has_synced for i in self.all)

    def status(self) -> dict[str, Any]:
        """Per informer: synced, cached objects, last error (for /readyz)."""
        return {
            i.name: {
                "synced": i.has_synced,
                "objects": len(i.store),
                **({"lastError": str(i.last_error)} if i.last_error is not None else {}),
            }
            for i in self.all
        }

    def start(self) -> None:
        for informer in self.all:
            informer.start()

    async def wait_for_sync(self) -> None:
        await asyncio.gather(*(i.wait_for_sync() for i in self.all))

    async def stop(self) -> None:
        for informer in self.all:
            await informer.stop()
