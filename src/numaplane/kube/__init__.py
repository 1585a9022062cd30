"""numaplane.kube: the Kubernetes adapter layer (imports nothing on its own; import the modules).

* :mod:`~numaplane.kube.port` — the ``KubePort`` base class: implementations answer one narrow
  ``Request`` (``send``) or watch (``stream``); the typed verbs are built on them once. The values
  that cross it (``Request``, ``WatchEvent``, ``ObjectList``, ``PatchType``) live in
  :mod:`~numaplane.kube.values`, the resource descriptors in :mod:`~numaplane.kube.resources`;
* :mod:`~numaplane.kube.errors` — the error tree every implementation raises;
* :mod:`~numaplane.kube.client` — ``LightkubePort``, the real adapter on lightkube's ``AsyncClient``
  (failures mapped by :mod:`~numaplane.kube.lightkube_errors`);
* :mod:`~numaplane.kube.memory` — ``InMemoryKube``, the in-process implementation (and the store
  behind ``numaplane.testing.fakeapi``), on :mod:`~numaplane.kube.objectstore` (objects, versions,
  writes), :mod:`~numaplane.kube.writes` (the pure write rules), :mod:`~numaplane.kube.crdserving`,
  :mod:`~numaplane.kube.watchhub`, :mod:`~numaplane.kube.selectors`, :mod:`~numaplane.kube.patch`
  and :mod:`~numaplane.kube.ssa`;
* the controller runtime, one module each: :mod:`~numaplane.kube.informer`,
  :mod:`~numaplane.kube.workqueue`, :mod:`~numaplane.kube.leader`, :mod:`~numaplane.kube.clock`;
  :mod:`~numaplane.kube.events` builds core/v1 Events.
"""
