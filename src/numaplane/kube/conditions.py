"""Pod status conditions written with server-side apply: one condition, owned by one field manager."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from numaplane.kube.port import JsonObj, KubePort, PatchType
from numaplane.kube.resources import POD

__all__ = ["apply_pod_condition"]


async def apply_pod_condition(
    kube: KubePort, *, name: str, namespace: str, uid: str, condition: Mapping[str, Any], field_manager: str
) -> JsonObj:
    """Apply ``condition`` to the pod's ``status.conditions`` (a list-map keyed by type: the other
    conditions and their owners are left alone). ``uid`` makes the write fail if the pod was recreated.
    Raises :mod:`numaplane.kube.errors` types."""
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "status": {"conditions": [dict(condition)]},
    }
    return await kube.patch_status(
        POD, name, body, namespace=namespace, patch_type=PatchType.APPLY, field_manager=field_manager, force=True
    )
