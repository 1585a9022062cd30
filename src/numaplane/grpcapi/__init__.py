"""numaplane.grpcapi."""
