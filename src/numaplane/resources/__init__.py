"""numaplane.resources."""
