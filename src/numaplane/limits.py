"""Every bound on untrusted input, in one place.

Each parser of data that comes from outside the process (API objects, request bodies, annotations,
files, archives, checkpoints) refuses input beyond these limits with its own typed error, so that the
work and memory one input can cost stay bounded. Values are chosen well above anything real
(the captured kube-scheduler bodies in ``shared/wire/captures`` are 2-7 KiB per node; the largest real
machine has 512 CPUs) and well below what would stall a daemon.

No imports: every layer may read this module.
"""

from __future__ import annotations

from typing import Final

# --- quantities (as the API server bounds them) ------------------------------------------------------
#: Longest quantity text accepted (the CRD schemas carry the same ``maxLength``).
MAX_QUANTITY_CHARS: Final = 64
#: Largest magnitude of a quantity's value (Kubernetes keeps quantities in int64 after scaling).
MAX_QUANTITY_VALUE: Final = 2**63 - 1
#: Largest decimal exponent magnitude (``1e<exp>``) accepted.
MAX_QUANTITY_EXPONENT: Final = 1000

# --- JSON documents ----------------------------------------------------------------------------------
#: Deepest JSON nesting accepted from any untrusted document (Kubernetes objects need < 20).
MAX_JSON_DEPTH: Final = 64
#: Longest annotation value parsed as JSON (the API server's limit on all annotations together).
MAX_ANNOTATION_BYTES: Final = 256 * 1024

# --- kube-scheduler extender -------------------------------------------------------------------------
#: Largest request body on the wire (compressed or not): a filter request carrying 5,000 full Node
#: objects of the captured size (~7 KiB each) is ~35 MiB.
MAX_EXTENDER_BODY_BYTES: Final = 48 * 1024 * 1024
#: Largest decoded body of a ``Content-Encoding: gzip|deflate`` request.
MAX_EXTENDER_DECODED_BYTES: Final = 48 * 1024 * 1024
#: Most nodes one filter/prioritize request may name (kube-scheduler's own cap is 5,000 scored nodes
#: in practice; clusters are limited to 5,000 nodes by the Kubernetes scalability envelope).
MAX_EXTENDER_NODES: Final = 15_000
#: Largest ``Pod`` of an extender request: the API server refuses request bodies over 3 MiB, so no real
#: Pod is larger. The Pod is the one part of a request decoded in full; the others are bounded by count.
MAX_EXTENDER_POD_BYTES: Final = 3 * 1024 * 1024
#: Most objects and arrays in that Pod (a real Pod with managedFields has a few hundred).
MAX_EXTENDER_POD_CONTAINERS: Final = 50_000
#: Most members of the request's top-level object and of its ``Nodes`` NodeList (real ones have 3-4).
MAX_EXTENDER_OBJECT_MEMBERS: Final = 64
#: Most filter results remembered for binding (pod -> nodes that passed), oldest dropped first ...
MAX_REMEMBERED_FILTERS: Final = 10_000
#: ... and most node names they hold together.
MAX_REMEMBERED_FILTER_NODES: Final = 1_000_000

# --- simulator ----------------------------------------------------------------------------------------
#: Most nodes one simulated cluster may have (``--nodes``, the counts of ``--topology``): three times the
#: Kubernetes scalability envelope of 5,000 nodes (a 15,000-node cluster of the largest built-in machine
#: takes about 100 MB to build).
MAX_SIMULATED_NODES: Final = 15_000

# --- CPU sets, topology ------------------------------------------------------------------------------
#: Longest cpuset text (``0-8191`` style lists; a full list of 8,192 single CPUs is ~40 KiB).
MAX_CPUSET_CHARS: Final = 64 * 1024
#: Highest CPU id accepted in a cpuset.
MAX_CPU_ID: Final = 65_535
#: Highest NUMA node id accepted (Linux ``MAX_NUMNODES`` is at most 1024).
MAX_NUMA_ID: Final = 1023
#: Longest device id accepted (device plugins report PCI addresses, UUIDs, names: tens of characters).
MAX_DEVICE_ID_CHARS: Final = 253

# --- configuration files -----------------------------------------------------------------------------
#: Largest number of seconds a configuration may give (periods, back-offs): a year.
MAX_CONFIG_SECONDS: Final = 366 * 24 * 3600
#: Largest integer a configuration may give for a weight or a concurrency.
MAX_CONFIG_INTEGER: Final = 1_000_000

# --- sysfs snapshot archives -------------------------------------------------------------------------
#: Most members of a snapshot archive (the largest real one, 2 sockets x 112 threads with PCI, has 8,669).
MAX_SNAPSHOT_MEMBERS: Final = 50_000
#: Most bytes extracted from a snapshot archive (files' sizes summed).
MAX_SNAPSHOT_BYTES: Final = 64 * 1024 * 1024
#: Most symlinks in a snapshot archive (the largest real one has 480: one per CPU, node and PCI device link).
MAX_SNAPSHOT_LINKS: Final = 5_000
#: Most symlinks followed to resolve one symlink's target (in real snapshots no target goes through
#: another symlink; the kernel itself stops at 40). Bounds the work per link, so extraction stays linear.
MAX_SNAPSHOT_LINK_DEPTH: Final = 8

# --- simulator workloads -----------------------------------------------------------------------------
#: Most pods one workload entry's ``count`` may ask for, and the whole workload together (a pod costs
#: a few KiB in the simulator: 100,000 pods are a few hundred MiB).
MAX_WORKLOAD_PODS: Final = 100_000
