"""numaplane.operator."""
