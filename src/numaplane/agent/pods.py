"""The node's own Pods from the Kubernetes API (optional): exact requests where NRI carries none.

A read-only :class:`~numaplane.kube.informer.Informer` on ``pods`` with the field selector
``spec.nodeName=<node>``, indexed by ``metadata.uid``. :meth:`PodSource.lookup` never waits: when the
informer has not seen a pod yet (or the API is unreachable) the agent falls back to what NRI carries
(``containers.derive``). Parsed pods are cached per ``resourceVersion``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import structlog

from numaplane.agent.background import cancel_and_wait
from numaplane.kube.informer import Informer
from numaplane.kube.port import KubePort
from numaplane.kube.resources import POD
from numaplane.resources.errors import PodSpecError
from numaplane.resources.pod import Pod, parse_pod
from numaplane.supervisor import Supervisor

__all__ = ["PodSource"]

log = structlog.get_logger("numaplane.agent")


def _uid(obj: Mapping[str, Any]) -> list[str]:
    uid = (obj.get("metadata") or {}).get("uid")
    return [str(uid)] if uid else []


class PodSource:
    """Pods bound to ``node_name``, by uid."""

    def __init__(self, kube: KubePort, node_name: str) -> None:
        self.informer = Informer(
            kube, POD, field_selector=f"spec.nodeName={node_name}", indexers={"uid": _uid}, name="node-pods"
        )
        self._cache: dict[str, tuple[str, Pod]] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self, tasks: Supervisor | None = None) -> None:
        """Run the informer: as a child of ``tasks`` (the agent's supervisor), or in its own task."""
        if tasks is None:
            self.informer.start()
        else:
            self._task = tasks.spawn(self.informer.run(), f"informer-{self.informer.name}")

    async def stop(self) -> None:
        await self.informer.stop()
        task, self._task = self._task, None
        await cancel_and_wait(task)

    def lookup(self, uid: str) -> Pod | None:
        """The pod with ``uid``, or ``None`` (unknown yet, or malformed)."""
        found = self.informer.store.by_index("uid", uid)
        if not found:
            return None
        obj = found[0]
        version = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        cached = self._cache.get(uid)
        if cached is not None and cached[0] == version:
            return cached[1]
        try:
            pod = parse_pod(obj)
        except PodSpecError as exc:
            log.warning("pod from the API cannot be parsed; using the runtime's view", uid=uid, error=str(exc))
            return None
        if len(self._cache) > 4096:
            self._cache.clear()
        self._cache[uid] = (version, pod)
        return pod
