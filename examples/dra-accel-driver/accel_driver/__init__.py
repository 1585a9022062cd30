"""An example DRA driver for a NUMA-affine accelerator ``accel.example.com`` (numaplane issue 28)."""
