"""NodeResourceTopology (NRT): object model, per-zone accounting, pod-set fingerprint (pure core)."""

from numaplane.nrt.errors import NRTError, NRTFormatError
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
    parse_lenient,
    zone_name,
    zone_numa_id,
)

__all__ = [
    "API_VERSION",
    "ZONE_TYPE_NODE",
    "Attribute",
    "CostInfo",
    "NRTError",
    "NRTFormatError",
    "NodeResourceTopology",
    "ObjectMeta",
    "OwnerReference",
    "ResourceInfo",
    "Zone",
    "find_attribute",
    "parse_lenient",
    "zone_name",
    "zone_numa_id",
]
