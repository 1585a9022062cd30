"""numaplane plugin API v1 (``numaplane.plugin.v1``): the .proto and its generated modules."""
