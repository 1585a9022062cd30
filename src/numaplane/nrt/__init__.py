"""NodeResourceTopology (NRT): object model, per-zone accounting, pod-set fingerprint, CRD (pure core).

Modules: ``model`` (the v1alpha2 object), ``parse`` (reading it from JSON), ``podresources`` (kubelet
PodResources values), ``state`` (abstract allocation state), ``zones`` (per-NUMA-zone computation), ``fingerprint`` (``pfp0v001``),
``crd`` (our CRD manifest and a JSON Schema for validation), ``errors``.
"""

from numaplane.nrt.errors import NRTError, NRTFormatError, ZoneInputError
from numaplane.nrt.fingerprint import (
    METHOD_ALL,
    METHOD_WITH_EXCLUSIVE_RESOURCES,
    Fingerprinter,
    check_fingerprint,
    compute_fingerprint,
    select_pods,
)
from numaplane.nrt.model import (
    API_VERSION,
    ZONE_TYPE_NODE,
    Attribute,
    CostInfo,
    NodeResourceTopology,
    ObjectMeta,
    OwnerReference,
    ResourceInfo,
    Zone,
    find_attribute,
    zone_name,
    zone_numa_id,
)
from numaplane.nrt.parse import parse_lenient
from numaplane.nrt.state import ContainerAllocation, DeviceAssignment, MemoryBlock, NodeAllocationState
from numaplane.nrt.zones import MachineView, NUMANodeView, ZoneConfig, compute_zones, make_nrt, zones_from_state

__all__ = [
    "API_VERSION",
    "METHOD_ALL",
    "METHOD_WITH_EXCLUSIVE_RESOURCES",
    "ZONE_TYPE_NODE",
    "Attribute",
    "ContainerAllocation",
    "CostInfo",
    "DeviceAssignment",
    "Fingerprinter",
    "MachineView",
    "MemoryBlock",
    "NRTError",
    "NRTFormatError",
    "NUMANodeView",
    "NodeAllocationState",
    "NodeResourceTopology",
    "ObjectMeta",
    "OwnerReference",
    "ResourceInfo",
    "Zone",
    "ZoneConfig",
    "ZoneInputError",
    "check_fingerprint",
    "compute_fingerprint",
    "compute_zones",
    "find_attribute",
    "make_nrt",
    "parse_lenient",
    "select_pods",
    "zone_name",
    "zone_numa_id",
    "zones_from_state",
]
