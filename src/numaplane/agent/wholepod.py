"""Pods admitted as a whole: what the agent keeps between a pod's admission and its last container.

When the agent knows the Pod (the node's Pod informer, ``pods.py``) it admits the whole pod once with
:meth:`~numaplane.policy.manager.ResourceManager.admit` — init containers, sidecars and app containers
in the kubelet's order, so the CPU, memory and device policies reuse regular init containers'
resources for later containers, the topology manager's ``pod`` scope aligns the pod as a whole, and
pods with pod-level ``spec.resources`` stay shared as the kubelet's static policies leave them. Each
container then receives its own allocation from the admission when its CreateContainer arrives.

A :class:`PodEntry` is that admission as the agent tracks it: the manager pod (keyed by the real pod
uid), the sandbox it belongs to, how far the pod has got, and which init containers were released.

Init containers, as the kubelet runs them: the kubelet creates a container only after every regular
(non-restartable) init container before it has completed, so once a container at position *i* of
the admission order (init containers, then app containers) was created, every regular init container
before *i* has *finished* (:meth:`PodEntry.finished`). A finished init container's RemoveContainer
releases what later containers do not reuse (``ResourceManager.remove_container``, the kubelet's
static-policy ``RemoveContainer``); until then — the kubelet keeps the latest instance of a completed
init container until the pod goes — its CPUs stay out of the shared pool, exactly as on a kubelet.
Restartable init containers (sidecars) are never finished: their CPUs are never reused.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from numaplane.resources.pod import Container, Pod

__all__ = ["PodEntry", "admission_pod", "pod_needs_manager"]

_NOT_EXTENDED = frozenset({"cpu", "memory", "ephemeral-storage", "storage"})


def admission_pod(pod: Pod) -> Pod:
    """``pod`` with container requests defaulted to limits, as the API server stores it (objects
    built elsewhere may lack them)."""

    def fill(c: Container) -> Container:
        missing = {k: v for k, v in c.limits.items() if k not in c.requests}
        return replace(c, requests={**c.requests, **missing}) if missing else c

    if not any(k not in c.requests for c in pod.all_containers() for k in c.limits):
        return pod
    return replace(
        pod,
        init_containers=tuple(fill(c) for c in pod.init_containers),
        containers=tuple(fill(c) for c in pod.containers),
    )


def pod_needs_manager(pod: Pod) -> bool:
    """Whether admission can give the pod anything beyond the shared pool: Guaranteed pods (exclusive
    CPUs, pinned memory) and pods requesting extended resources (devices, vendor plugins)."""
    if pod.qos_class == "Guaranteed":
        return True
    for c in pod.all_containers():
        for name in (*c.requests, *c.limits):
            if name not in _NOT_EXTENDED and not name.startswith("hugepages-"):
                return True
    return False


@dataclass
class PodEntry:
    """One pod admitted as a whole. ``pod`` is the admitted pod (the manager's ``pods[uid]``).

    ``progress`` is the highest admission-order index of a container created in this sandbox (-1:
    none yet); ``released`` names init containers whose allocation was given back.
    """

    pod: Pod
    sandbox_id: str
    progress: int = -1
    released: set[str] = field(default_factory=set)

    @property
    def uid(self) -> str:
        return self.pod.uid

    @cached_property
    def order(self) -> dict[str, int]:
        """Container name → position in the admission order (init containers first)."""
        return {c.name: i for i, c in enumerate(self.pod.all_containers())}

    @cached_property
    def regular_init(self) -> frozenset[str]:
        """Names of the regular (run-to-completion, non-sidecar) init containers."""
        return frozenset(c.name for c in self.pod.init_containers if not c.sidecar)

    @cached_property
    def listed(self) -> tuple[str, ...]:
        """The containers the kubelet's PodResources API lists: app containers, then sidecars."""
        return tuple(c.name for c in self.pod.containers) + tuple(c.name for c in self.pod.init_containers if c.sidecar)

    def knows(self, name: str) -> bool:
        return name in self.order

    def note_created(self, name: str) -> None:
        index = self.order.get(name)
        if index is not None and index > self.progress:
            self.progress = index

    def finished(self, name: str) -> bool:
        """Whether ``name`` is a regular init container that has completed (see the module docstring)."""
        return name in self.regular_init and self.order[name] < self.progress

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"uid": self.uid, "sandbox": self.sandbox_id, "progress": self.progress}
        if self.released:
            doc["released"] = sorted(self.released)
        return doc

    @staticmethod
    def from_dict(doc: Mapping[str, Any], pods: Mapping[str, Pod]) -> PodEntry:
        """Rebuild an entry; ``pods`` are the manager's admitted pods (raises ``KeyError`` if absent)."""
        entry = PodEntry(pods[str(doc["uid"])], str(doc.get("sandbox", "")), int(doc.get("progress", -1)))
        entry.released = {str(n) for n in doc.get("released", [])}
        unknown = entry.released - set(entry.order)
        if unknown:
            raise KeyError(f"released containers {sorted(unknown)} are not in pod {entry.uid}")
        return entry
