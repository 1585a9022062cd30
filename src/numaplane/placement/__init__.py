"""numaplane.placement."""
