"""numaplane.scheduler."""
