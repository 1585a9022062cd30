"""Kubernetes quantities, durations, object metadata (:mod:`~numaplane.resources.meta`) and pod resource rules (pure core)."""

from numaplane.resources.errors import PodSpecError, QuantityError, ResourceError
from numaplane.resources.pod import Container, Pod, compute_qos, parse_pod, parse_resource_list
from numaplane.resources.quantity import Quantity, format_quantity, parse_quantity

__all__ = [
    "Container",
    "Pod",
    "PodSpecError",
    "Quantity",
    "QuantityError",
    "ResourceError",
    "compute_qos",
    "format_quantity",
    "parse_pod",
    "parse_quantity",
    "parse_resource_list",
]
