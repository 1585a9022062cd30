"""The explaining room: the per-node functions, one pod on one node, with the full reason of a rejection.

``filter(pod, nrt, node) -> Fit | Reject`` (:mod:`.filter`, with :mod:`.admission` as the opt-in
kubelet-admission mode), ``score`` (:mod:`.score`, :mod:`.least_numa`), kube-scheduler's basic predicates
(:mod:`.predicates`) and the DRA zone checks (:mod:`.dra_zones`). They are the reference the deciding
arrays (:mod:`numaplane.placement.arrays`) equal, and in production answer only what arrays cannot say
(the text of a rejection, nodes without a row). Imports only :mod:`numaplane.placement.model`.
"""
