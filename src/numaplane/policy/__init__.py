"""numaplane.policy."""
