"""One module per conformance kind, named after the kind with ``-`` replaced by ``_``."""
