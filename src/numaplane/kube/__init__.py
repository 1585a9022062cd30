"""numaplane.kube: the Kubernetes adapter layer (imports nothing on its own; import the modules).

* :mod:`~numaplane.kube.port` — the ``KubePort`` Protocol on plain dicts, ``WatchEvent``,
  ``ObjectList``, ``PatchType`` and the resource descriptors (from :mod:`~numaplane.kube.resources`);
* :mod:`~numaplane.kube.errors` — the error tree every implementation raises;
* :mod:`~numaplane.kube.client` — ``LightkubePort``, the real adapter on lightkube's ``AsyncClient``;
* :mod:`~numaplane.kube.memory` — ``InMemoryKube``, the in-process implementation (and the store
  behind ``numaplane.testing.fakeapi``), built on :mod:`~numaplane.kube.watchhub`,
  :mod:`~numaplane.kube.selectors`, :mod:`~numaplane.kube.patch` and :mod:`~numaplane.kube.ssa`;
* :mod:`~numaplane.kube.runtime` — informer, work queue, leader election and clocks
  (:mod:`~numaplane.kube.informer`, :mod:`~numaplane.kube.workqueue`, :mod:`~numaplane.kube.leader`,
  :mod:`~numaplane.kube.clock`); :mod:`~numaplane.kube.events` builds core/v1 Events.
"""
