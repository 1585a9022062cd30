"""Machine topology: CPU sets and the machine model (pure), sysfs discovery and rendering (adapters)."""

from numaplane.topology.cpuset import CPUSet
from numaplane.topology.model import CPUInfo, HugePages, NUMANode, PCIDevice, Topology, synthetic

__all__ = ["CPUInfo", "CPUSet", "HugePages", "NUMANode", "PCIDevice", "Topology", "synthetic"]
