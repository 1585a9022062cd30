"""numaplane's node agent: the resource manager enforced through the container runtime's NRI.

The kubelet's CPU manager is set to ``none``; the agent decides every container's CPUs (and memory
nodes when memory is pinned) and has the runtime apply them, as production NRI resource plugins do.

Modules:

* ``containers`` — what NRI carries about a container → QoS, requests, limits (or the Pod from the API);
* ``core`` — the state machine: admission, shared pool, release, Synchronize, snapshots (no I/O);
* ``handler`` — the NRI handler: serialised core calls, background ``UpdateContainers``;
* ``checkpoint`` — versioned, checksummed state file, atomic writes off the request path;
* ``configwatch`` — live reconfiguration from the config file;
* ``plugins`` — the registry of out-of-process plugins (numaplane plugin API v1);
* ``podresources`` — the kubelet PodResources v1 API served from the agent's allocations;
* ``pods`` — the optional read-only informer on the node's Pods;
* ``notify`` — touches the exporter's notify file after allocation changes (``--notify-file``);
* ``policyreport`` — the policy revision applied or rejected, as a condition on the agent's own pod;
* ``metrics`` — Prometheus metrics (served with ``/healthz`` and ``/readyz`` by
  :class:`numaplane.observability.http.ProbeServer`; logs set up by :mod:`numaplane.observability.logs`);
* ``daemon`` — :class:`~numaplane.agent.daemon.Agent`, wiring everything (``numaplane agent``).

Known limits (the agent admits one container at a time, see ``containers``): init containers' CPUs
are released when they stop rather than reused by the pod's later containers, the topology manager's
``pod`` scope acts per container, and pod-level ``spec.resources`` only feeds the QoS class. Without
API access, extended resources are known only from the ``resources.numaplane.io/<container>`` pod
annotation.
"""
