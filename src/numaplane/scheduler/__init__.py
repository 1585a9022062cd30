"""numaplane.scheduler: the NUMA-aware scheduler component (imports nothing on its own; import the modules).

Two modes over one state:

* :mod:`~numaplane.scheduler.state` — cluster state from the informers → NRT cache → vectorised
  placement pipeline; basic kube-scheduler predicates; per-node usage (:mod:`~numaplane.scheduler.usage`);
  per-node records in :mod:`~numaplane.scheduler.records`, per-node verdicts and explanations in
  :mod:`~numaplane.scheduler.verdicts`; one standalone decision in :mod:`~numaplane.scheduler.decision`
  (the node-selection rule it shares with the simulator: :mod:`numaplane.placement.cycle`);
  the command line's settings in :mod:`~numaplane.scheduler.settings`;
* :mod:`~numaplane.scheduler.extender` + :mod:`~numaplane.scheduler.wire` — the kube-scheduler extender
  (filter, prioritize, bind) and its wire format;
* :mod:`~numaplane.scheduler.loop` + :mod:`~numaplane.scheduler.queue` — the standalone secondary
  scheduler: scheduling queue with backoff, cycles, background binding, Events;
* :mod:`~numaplane.scheduler.service` — process wiring: informers (:mod:`~numaplane.scheduler.informers`),
  cache resync, HTTP endpoints (:class:`numaplane.observability.http.ProbeServer`), leader election;
* :mod:`~numaplane.scheduler.config`, :mod:`~numaplane.scheduler.metrics`, :mod:`~numaplane.scheduler.errors`
  (logs: :mod:`numaplane.observability.logs`, with the upstream plugin's key names ``pod``, ``podUID``,
  ``node``, ``flow``, ``generation`` where they exist, so logs of both can be compared);
* :mod:`~numaplane.scheduler.explain` — ``numaplane explain``: per-node NUMA verdicts with explanations.

Layering: imports the kube and observability adapters and the pure core (placement, nrt, resources),
never another component. User documentation: ``docs/scheduler.md``.
"""
