"""Capturing a cluster snapshot: read-only paginated lists of Nodes, NRTs and pods into a writer.

Only ``list`` requests are made (``limit`` / ``continue``, ``page_size`` objects per page), and each
object is reduced (:mod:`numaplane.sim.snapshot`) and written before the next is read, so memory
stays bounded by one page whatever the cluster's size. A cluster without the NRT CRD gives an empty
``nodeResourceTopologies`` section (its nodes are then modelled from their capacity).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Protocol

from numaplane.kube.errors import NotFound
from numaplane.kube.port import JsonObj
from numaplane.kube.resources import NODE, NODE_RESOURCE_TOPOLOGY, POD, Resource
from numaplane.sim.snapshot import SnapshotWriter, keep_pod, reduce_node, reduce_nrt, reduce_pod

__all__ = ["PagedLister", "capture"]

#: The server-side filter for pods that still hold resources (the client filters again).
ACTIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"


class PagedLister(Protocol):
    """What capturing needs of a Kubernetes port: a streamed, paginated list
    (:meth:`numaplane.kube.client.LightkubePort.iter_list`)."""

    def iter_list(
        self,
        res: Resource,
        *,
        page_size: int = 500,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> AsyncIterator[JsonObj]: ...


#: progress callback: (section, items written so far in it)
Progress = Callable[[str, int], None]


async def capture(
    port: PagedLister, writer: SnapshotWriter, *, page_size: int = 500, progress: Progress | None = None
) -> dict[str, int]:
    """Write the cluster's nodes, NRTs and active pods to ``writer``; returns the summary counts."""
    writer.section("nodes")
    count = 0
    async for obj in port.iter_list(NODE, page_size=page_size):
        writer.add(reduce_node(obj))
        count += 1
        if progress is not None:
            progress("nodes", count)
    writer.section("nodeResourceTopologies")
    count = 0
    try:
        async for obj in port.iter_list(NODE_RESOURCE_TOPOLOGY, page_size=page_size):
            writer.add(reduce_nrt(obj))
            count += 1
            if progress is not None:
                progress("nodeResourceTopologies", count)
    except NotFound:  # the NRT CRD is not installed: no NUMA data, nodes are modelled from capacity
        pass
    writer.section("pods")
    count = 0
    async for obj in port.iter_list(POD, page_size=page_size, field_selector=ACTIVE_PODS):
        if keep_pod(obj):
            writer.add(reduce_pod(obj))
            count += 1
            if progress is not None and count % 100 == 0:
                progress("pods", count)
    if progress is not None:
        progress("pods", count)
    return writer.close()
