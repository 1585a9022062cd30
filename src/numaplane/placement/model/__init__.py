"""The placement values every room shares (bottom room; imports no other room).

What the scheduler reads from an NRT object and a Node (:mod:`.view`, :mod:`.node`), a pod's summed
requests and effective preferences (:mod:`.requests`, :mod:`.effective`), kube-scheduler's quantities
(:mod:`.fit_quantity`), a verdict (:mod:`.result`), the typed errors (:mod:`.errors`) and the table of
scoring strategies (:mod:`.strategies`). Pure: no I/O, no clock. Imports nothing itself (submodules are
imported directly).
"""
