"""The numaplane plugin API v1 over gRPC: out-of-process resource plugins.

* ``v1/api.proto`` — the API (package ``numaplane.plugin.v1``), generated modules beside it;
* :mod:`.adapter` — :class:`~.adapter.GrpcResourcePlugin`, a
  :class:`~numaplane.policy.plugin.ResourcePlugin` whose calls go to a plugin process over a unix
  socket (what the agent plugs into its resource manager);
* :mod:`.server` — what a vendor runs: :func:`~.server.serve_plugin` wraps any ``ResourcePlugin``
  factory into the gRPC service, and :func:`~.server.register` announces it to the agent;
* :mod:`.registry` — the agent side of registration: the ``Registration`` service, endpoint and
  SO_PEERCRED checks, health checks and isolation of broken plugins.
"""
