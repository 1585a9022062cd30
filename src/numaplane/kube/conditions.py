"""Status conditions: the transition rule, finding one by type, and writing a pod's with server-side apply.

The rule every writer follows (``metav1.Condition`` and the pod conditions alike): a condition's
``lastTransitionTime`` moves only when its ``status`` flips; rewriting the same status (a new reason,
message or probe time) keeps the previous transition time. :func:`condition` is the one place that
rule is written; callers pass the previous condition of that type (or ``None``) and ``now`` as a
Kubernetes ``Time`` string (:func:`numaplane.kube.clock.format_time` of their injected clock).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from numaplane.kube.port import JsonObj, KubePort, PatchType
from numaplane.kube.resources import POD

__all__ = ["PodIdentity", "apply_pod_condition", "condition", "find_condition", "transition_time"]


def find_condition(conditions: Iterable[Mapping[str, Any]] | None, ctype: str) -> Mapping[str, Any] | None:
    """The first condition of type ``ctype`` in ``conditions`` (a ``status.conditions`` list), if any."""
    return next((c for c in conditions or () if c.get("type") == ctype), None)


def transition_time(previous: Mapping[str, Any] | None, status: str, now: str) -> str:
    """``lastTransitionTime`` for a condition about to be written with ``status``: the previous one's
    when it had the same status and a time, else ``now`` (the status flips, or it is new)."""
    if previous is not None and previous.get("status") == status:
        return str(previous.get("lastTransitionTime") or now)
    return now


def condition(
    ctype: str,
    status: str,
    reason: str,
    message: str,
    *,
    previous: Mapping[str, Any] | None,
    now: str,
    **extra: Any,
) -> dict[str, Any]:
    """A condition of type ``ctype`` replacing ``previous`` (same type, or ``None``): ``status``
    (``"True"``/``"False"``/``"Unknown"``), ``reason``, ``message`` and any ``extra`` fields
    (``observedGeneration``, ``lastProbeTime``), with ``lastTransitionTime`` from :func:`transition_time`."""
    return {
        "type": ctype,
        "status": status,
        **extra,
        "lastTransitionTime": transition_time(previous, status, now),
        "reason": reason,
        "message": message,
    }


class PodIdentity(Protocol):
    """Which pod: its name, namespace and uid (the scheduler's ``Pod`` view is one)."""

    @property
    def name(self) -> str: ...

    @property
    def namespace(self) -> str: ...

    @property
    def uid(self) -> str: ...


async def apply_pod_condition(
    kube: KubePort, pod: PodIdentity, condition: Mapping[str, Any], *, field_manager: str
) -> JsonObj:
    """Apply ``condition`` to ``pod``'s ``status.conditions`` (a list-map keyed by type: the other
    conditions and their owners are left alone). The uid makes the write fail if the pod was recreated.
    Raises :mod:`numaplane.kube.errors` types."""
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
        "status": {"conditions": [dict(condition)]},
    }
    return await kube.patch_status(
        POD,
        pod.name,
        body,
        namespace=pod.namespace,
        patch_type=PatchType.APPLY,
        field_manager=field_manager,
        force=True,
    )
