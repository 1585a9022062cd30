"""Fakes shipped as product, for users' own tests: the fake Kubernetes API server (:mod:`.fakeapi`,
also a pytest plugin). The harnesses that start real components for numaplane's own tests live
outside the package, in ``harness/numaplane_harness`` (not installed)."""
