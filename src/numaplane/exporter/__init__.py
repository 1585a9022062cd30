"""numaplane.exporter."""
