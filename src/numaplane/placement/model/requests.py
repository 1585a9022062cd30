"""Resource classes and request sums as the NodeResourceTopologyMatch plugin sees them.

Resource classes (scheduler-nrt.md A.6):

* *native*: a name without ``/``, or one containing ``kubernetes.io/`` (Kubernetes ``IsNativeResource``).
  A bare name such as ``gpu`` is native.
* *NUMA-affine*: ``cpu``, ``memory`` and ``hugepages-*``. For pods that are not Guaranteed these are
  never checked by quantity, only for presence in a zone.
* *host-level*: ``ephemeral-storage``, ``storage`` and every non-native resource. A host-level resource
  that no NUMA zone lists is ignored by the filter.

Requests (A.8): the plugin's pod request is, per resource, ``max(sum over app containers, max over all
init containers)`` plus ``spec.overhead``. Restartable (sidecar) init containers only take part in the
max, unlike kube-scheduler's own accounting (:meth:`Pod.effective_requests`); this difference is
deliberate, it is what the plugin does. Container scope uses each container's own ``requests``.

All quantities are exact :class:`Quantity` values; counts for CPUs and devices, bytes for memory.
"""

from __future__ import annotations

from collections.abc import Mapping

from numaplane.resources.pod import Container, Pod, add_resources, max_resources
from numaplane.resources.quantity import Quantity

__all__ = [
    "ALWAYS_ALLOCATABLE",
    "include_non_native",
    "is_exclusive",
    "is_host_level",
    "is_native",
    "is_numa_affine",
    "nonzero",
    "pod_has_exclusive_resources",
    "pod_request",
]

# Keys the scheduler's node allocatable list always holds, possibly with value 0 (util.ResourceList).
ALWAYS_ALLOCATABLE = frozenset({"cpu", "memory", "pods", "ephemeral-storage"})


def is_native(name: str) -> bool:
    """Kubernetes ``IsNativeResource``: no ``/`` in the name, or a ``kubernetes.io/`` prefixed name."""
    return "/" not in name or "kubernetes.io/" in name


def is_numa_affine(name: str) -> bool:
    """``cpu``, ``memory`` or ``hugepages-<size>``: resources that must be NUMA-bound."""
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def is_host_level(name: str) -> bool:
    """Resources that may legitimately have no NUMA affinity (ephemeral storage, devices, extended)."""
    return name in ("ephemeral-storage", "storage") or not is_native(name)


def include_non_native(pod: Pod) -> bool:
    """True if any container (init or app) names a non-native resource in its requests, any quantity."""
    return any(not is_native(name) for c in pod.all_containers() for name in c.requests)


def pod_request(pod: Pod) -> dict[str, Quantity]:
    """The plugin's pod effective request: max(sum of apps, max over every init) + overhead."""
    apps: dict[str, Quantity] = {}
    for c in pod.containers:
        apps = add_resources(apps, c.requests)
    inits: dict[str, Quantity] = {}
    for c in pod.init_containers:
        inits = max_resources(inits, c.requests)
    total = max_resources(apps, inits)
    if pod.overhead:
        total = add_resources(total, pod.overhead)
    return total


def is_exclusive(qos: str, name: str, quantity: Quantity, nrt_resources: frozenset[str] | set[str]) -> bool:
    """Whether a container's request of ``name`` is an exclusive allocation (scheduler-nrt.md C.10).

    Non-native resources are exclusive iff the node's NRT zones list them. Native ones only for
    Guaranteed pods: an integral positive cpu count, or a positive memory / hugepages size.
    """
    if not is_native(name):
        return name in nrt_resources
    if qos != "Guaranteed":
        return False
    if name == "cpu":
        return quantity.amount > 0 and quantity.amount.denominator == 1
    if name == "memory" or name.startswith("hugepages-"):
        return quantity.value() > 0
    return False


def _container_exclusive(qos: str, container: Container, nrt_resources: frozenset[str] | set[str]) -> bool:
    return any(is_exclusive(qos, name, q, nrt_resources) for name, q in container.requests.items())


def pod_has_exclusive_resources(pod: Pod, nrt_resources: frozenset[str] | set[str]) -> bool:
    """Any app or sidecar container with an exclusive request; regular init containers are skipped."""
    qos = pod.qos_class
    sidecars = (c for c in pod.init_containers if c.sidecar)
    return any(_container_exclusive(qos, c, nrt_resources) for c in (*sidecars, *pod.containers))


def nonzero(requests: Mapping[str, Quantity]) -> dict[str, Quantity]:
    """The request list without zero quantities (the plugin skips those everywhere in Filter)."""
    return {name: q for name, q in requests.items() if not q.is_zero()}
