"""Which NUMA zones of a node can hold a pod's CPUs and memory together with its DRA devices.

The standalone scheduler allocates the supported subset of a pod's claims itself
(:mod:`numaplane.policy.dra_select`); before choosing devices it asks, per candidate node, which zones
can hold the pod's effective request (:func:`~numaplane.placement.model.requests.pod_request`) *and* the
devices of its claims (``deviceclass.resource.kubernetes.io/<class>`` rows the exporter publishes with
``--dra``). The per-resource rule is the NUMA filter's (:func:`~numaplane.placement.explain.filter.suitable`):
non-Guaranteed pods need NUMA-affine resources only listed; every other resource needs
``available >= requested``; a host-level resource no zone lists is skipped, and so is a DRA row no
zone lists (an exporter without ``--dra``: the device side is then judged from the ResourceSlices
alone). The node's ``advertises`` check of the NUMA filter does not apply to DRA rows: a Node's
``status.allocatable`` never lists them.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

from numaplane.placement.explain.filter import suitable
from numaplane.placement.model.requests import is_host_level, pod_request
from numaplane.placement.model.view import NodeTopology
from numaplane.resources.pod import Pod
from numaplane.resources.quantity import Quantity

__all__ = ["RESTRICTIVE_POLICIES", "claim_zones"]

#: Node policies under which the kubelet (and numaplane's agent) refuse a pod it cannot align.
RESTRICTIVE_POLICIES = frozenset({"single-numa-node", "restricted"})


def claim_zones(topology: NodeTopology, pod: Pod, devices: Mapping[str, int]) -> tuple[int, ...]:
    """The NUMA ids (ascending) of ``topology``'s zones that hold ``pod``'s request and ``devices``
    (DRA row → count) together (module docstring)."""
    guaranteed = pod.qos_class == "Guaranteed"
    wanted: dict[str, Quantity] = {k: v for k, v in pod_request(pod).items() if not v.is_zero()}
    listed = {name for zone in topology.zones for name in zone.available}
    out: list[int] = []
    for zone in sorted(topology.zones, key=lambda z: z.numa_id):
        ok = True
        for name, qty in wanted.items():
            avail = zone.available.get(name)
            if avail is None:
                if name not in listed and is_host_level(name):
                    continue
                ok = False
                break
            if not suitable(guaranteed, name, qty, avail):
                ok = False
                break
        for row, count in devices.items():
            if not ok or row not in listed:
                continue
            avail = zone.available.get(row)
            ok = avail is not None and avail.amount >= count
        if ok:
            out.append(zone.numa_id)
    return tuple(out)
