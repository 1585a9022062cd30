"""Building core/v1 ``Event`` objects (what ``kubectl describe`` shows under "Events").

:func:`make_event` returns the dict to pass to :meth:`KubePort.create_event`. Event names follow
the client-go recorder's convention (``<object name>.<hex nanoseconds>``), so they are unique per
object and time.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from numaplane.kube.clock import format_time
from numaplane.kube.port import JsonObj

__all__ = ["make_event"]


def make_event(
    involved: Mapping[str, Any],
    *,
    reason: str,
    message: str,
    now: datetime,
    event_type: Literal["Normal", "Warning"] = "Normal",
    component: str = "numaplane",
    host: str | None = None,
    action: str | None = None,
) -> JsonObj:
    """An ``Event`` about ``involved`` (any object with ``apiVersion``, ``kind`` and ``metadata``).

    The event lives in the involved object's namespace (``default`` for cluster-scoped objects,
    as the kubelet and scheduler do).
    """
    meta = involved.get("metadata") or {}
    name = str(meta.get("name", ""))
    namespace = str(meta.get("namespace") or "default")
    ref: JsonObj = {
        "apiVersion": involved.get("apiVersion", ""),
        "kind": involved.get("kind", ""),
        "name": name,
    }
    if meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    if meta.get("uid"):
        ref["uid"] = meta["uid"]
    if meta.get("resourceVersion"):
        ref["resourceVersion"] = meta["resourceVersion"]
    nanos = int(now.timestamp() * 1_000_000_000)
    source: JsonObj = {"component": component}
    if host:
        source["host"] = host
    event: JsonObj = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{nanos:x}", "namespace": namespace},
        "involvedObject": ref,
        "reason": reason,
        "message": message,
        "type": event_type,
        "source": source,
        "firstTimestamp": format_time(now),
        "lastTimestamp": format_time(now),
        "count": 1,
        "reportingComponent": component,
        "reportingInstance": host or component,
    }
    if action:
        event["action"] = action
    return event
