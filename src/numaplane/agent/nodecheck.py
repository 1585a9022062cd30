"""Does the node's allocatable CPU leave out the CPUs the agent reserves?

With the agent enforcing, the kubelet's CPU manager is ``none``; node allocatable CPU then still comes
from the kubelet's own reservation (``reservedSystemCPUs``, or ``systemReserved`` + ``kubeReserved``
cpu). If that reserves less than the agent's policy, the scheduler and the kubelet's admission place
Guaranteed pods the agent cannot pin: the agent refuses them at CreateContainer and they loop in
``CreateContainerError`` instead of being refused up front (``OutOfcpu``), as under the kubelet's
static policy. Seen on a real kubelet v1.36.2 (``tests/realkube/test_real_node_agent.py``).

:func:`allocatable_cpu_problem` is pure: the Node object and the reserved count in, a message or None out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from numaplane.resources.errors import QuantityError
from numaplane.resources.quantity import parse_quantity

__all__ = ["allocatable_cpu_problem"]


def _millicpu(resources: Any) -> int | None:
    if not isinstance(resources, Mapping) or "cpu" not in resources:
        return None
    try:
        amount = parse_quantity(str(resources["cpu"])).amount
    except QuantityError:
        return None
    return int(amount * 1000)  # Fraction: exact


def allocatable_cpu_problem(node: Mapping[str, Any], reserved_cpus: int) -> str | None:
    """A warning if ``status.allocatable.cpu`` exceeds ``status.capacity.cpu`` minus ``reserved_cpus``.

    None when it does not, or when the Node does not say (no status yet, unparseable quantities).
    """
    status = node.get("status")
    if not isinstance(status, Mapping) or reserved_cpus <= 0:
        return None
    capacity = _millicpu(status.get("capacity"))
    allocatable = _millicpu(status.get("allocatable"))
    if capacity is None or allocatable is None:
        return None
    ceiling = capacity - reserved_cpus * 1000
    if allocatable <= ceiling:
        return None
    return (
        f"node allocatable cpu is {allocatable}m but the agent reserves {reserved_cpus} of the {capacity}m:"
        f" the scheduler and the kubelet will admit Guaranteed pods the agent cannot pin (they fail with"
        f" CreateContainerError instead of OutOfcpu); reserve the same CPUs in the kubelet"
        f" (reservedSystemCPUs, or systemReserved/kubeReserved cpu of at least {reserved_cpus})"
    )
