"""numaplane's node agent: the resource manager enforced through the container runtime's NRI.

The kubelet's CPU manager is set to ``none``; the agent decides every container's CPUs (and memory
nodes when memory is pinned) and has the runtime apply them, as production NRI resource plugins do.

Modules:

* ``containers`` — what NRI carries about a container → QoS, requests, limits (or the Pod from the API);
* ``wholepod`` — pods admitted as a whole when the Pod is known (init-container reuse, pod scope);
* ``state`` — the state machine (:class:`~numaplane.agent.state.NodeAgentState`): admission, shared
  pool, release, whole-pod admission, Synchronize, snapshots (no I/O), with ``records``, ``admitting``,
  ``consistency`` (invariants) and ``listing`` (PodResources answers); it sees the
  agent's own NRI values (:mod:`numaplane.nri.events`), never protobuf;
* ``handler`` — the NRI handler: protobuf translated (:mod:`numaplane.nri.translate`), state calls
  serialised by ``runner`` (with background ``UpdateContainers``);
* ``checkpoint`` — versioned, checksummed state file, atomic writes off the request path;
* ``configwatch`` — live reconfiguration from the config file;
* ``plugins`` — the registry of out-of-process plugins (numaplane plugin API v1);
* ``podresources`` — the kubelet PodResources v1 API served from the agent's allocations;
* ``pods`` — the read-only informer on the node's Pods (``--watch-pods``);
* ``notify`` — touches the exporter's notify file after allocation changes (``--notify-file``);
* ``policyreport`` — the policy revision applied or rejected, as a condition on the agent's own pod;
* ``metrics`` — Prometheus metrics (served with ``/healthz`` and ``/readyz`` by
  :class:`numaplane.observability.http.ProbeServer`; logs set up by :mod:`numaplane.observability.logs`);
* ``daemon`` — :class:`~numaplane.agent.daemon.Agent`, wiring everything (``numaplane agent``).

With the node's Pods from the API (``--watch-pods``) a pod that needs the resource manager is admitted
as a whole, as the kubelet admits it (``wholepod``, ``state``). Without them — or for a pod the informer
has not seen at its first container — the agent admits one container at a time, and then cannot reuse
init containers' resources, apply the topology manager's ``pod`` scope to the whole pod, or see
pod-level ``spec.resources``, and grants no extended resources at all: annotations never grant
(a ``resources.numaplane.io/<container>`` pod annotation is a claim checked against the pod spec,
refused when the spec does not back it or is not known; the exact list is in ``containers``).
"""
