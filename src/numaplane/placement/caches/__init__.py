"""The caches room: the NRT caches as event-driven state machines (Passthrough, DiscardReserved in
:mod:`.cache`, over-reserve in :mod:`.overreserve`, their common base in :mod:`.cachebase`).

Imports the explaining and model rooms only (the cache asks the per-node filter which nodes a rejected
pod may have over-reserved). Pure: no I/O, no clock.
"""
