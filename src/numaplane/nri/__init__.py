"""numaplane.nri."""
