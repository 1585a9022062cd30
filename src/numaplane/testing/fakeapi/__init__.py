"""The project's fake Kubernetes API server (aiohttp on 127.0.0.1) and its pytest fixtures.

* :class:`FakeApiServer` — async context manager; ``server.port_client()`` gives the production
  :class:`~numaplane.kube.client.LightkubePort` pointed at it, ``server.lightkube_client()`` a raw
  lightkube ``AsyncClient``, ``server.kubeconfig()`` / ``write_kubeconfig(path)`` a kubeconfig.
* :class:`FaultyKube` — wraps any port (e.g. the in-memory one) with the same fault injection.
* :func:`fake_apiserver` — ``async with fake_apiserver() as server: ...``.
* :func:`crd_for` — a minimal ``CustomResourceDefinition`` object that makes a
  :class:`~numaplane.kube.resources.Resource` served.
* ``numaplane.testing.fakeapi.pytest_plugin`` — fixtures ``fake_apiserver`` and ``fake_kube``.
"""

from numaplane.testing.fakeapi.crd import crd_for
from numaplane.testing.fakeapi.faults import Fault, FaultInjector
from numaplane.testing.fakeapi.faulty import FaultyKube
from numaplane.testing.fakeapi.server import FakeApiServer, fake_apiserver

__all__ = ["FakeApiServer", "Fault", "FaultInjector", "FaultyKube", "crd_for", "fake_apiserver"]
