"""The kubelet gRPC APIs the driver serves, written from the documented API facts and compiled by scripts/gen_protos.py."""
