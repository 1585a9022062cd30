"""numaplane's test harness: real components for the tests and benchmarks, not part of the product.

Not installed (not in the wheel): the tests find it through pytest's ``pythonpath`` (``pyproject.toml``),
benchmarks and scripts put ``harness/`` on ``sys.path`` themselves.

* :mod:`.kubecluster`, :mod:`.kubecerts` — a private control plane (etcd, kube-apiserver,
  controller-manager, kube-scheduler v1.36.2) with fresh certificates;
* :mod:`.kubelet` — a real kubelet v1.36.2 on :mod:`.containerd` (containerd 1.7 with NRI, CRI
  client in :mod:`.cri`); :mod:`.image` builds the project's OCI image from hashed locks;
* :mod:`.debian` — the private apt fetch those fixtures install from; :mod:`.processes`,
  :mod:`.unavailable` — stopping processes, and the one way a fixture skips (or fails under
  ``NUMAPLANE_REQUIRE_*``);
* :mod:`.nodeprobes` — CPU sampling of node processes and pod watches for ``bench/real_node.py``;
* :mod:`.clustergen` — a generated cluster with consistent NRT objects (snapshot/what-if tests, benches).

The fakes that are part of the product (the fake Kubernetes API server) stay in :mod:`numaplane.testing`.
"""
