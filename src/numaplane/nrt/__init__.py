"""numaplane.nrt."""
