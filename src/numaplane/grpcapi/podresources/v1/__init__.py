"""PodResources v1: generated protobuf / gRPC modules (``api_pb2``, ``api_pb2_grpc``) and their stubs."""
