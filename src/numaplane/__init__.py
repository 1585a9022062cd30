"""numaplane: NUMA-aware resource management for Kubernetes."""

__version__ = "0.1.0"
