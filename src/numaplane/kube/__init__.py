"""numaplane.kube."""
