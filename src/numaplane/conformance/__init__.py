"""numaplane.conformance."""
