"""One shared :class:`~numaplane.nrt.model.Zone` object per distinct zone content (memory).

A scheduler holds the parsed NRT of every node; thousands of nodes of the same hardware, idle or
equally loaded, publish zones with the same content (name, type, parent, costs, attributes and
resource rows). :class:`ZoneTable` maps each parsed zone to the live zone of the same content, so
such objects share one :class:`Zone` (and everything under it) instead of holding a copy each, and
consumers that remember per zone object (:func:`numaplane.placement.view.node_topology`) read each
distinct zone once.

Invariants: a shared zone is equal to the zone it replaces *and* re-emits the same text
(:meth:`Zone.to_dict`): the content key includes the rows' raw values (:attr:`ResourceInfo.raw`),
which row equality ignores. The table holds zones weakly: an entry lives while some object still
holds its zone, so the table never holds more zones than the objects it served. An entry is the
key's hash and a weak reference (about 130 bytes: when every zone differs, 20,000 zones cost
2.6 MB more than unshared objects); a zone whose hash is taken by a zone of other content stays unshared.
Zones are immutable, so sharing changes no value.
"""

from __future__ import annotations

import weakref
from dataclasses import replace
from typing import Any

from numaplane.nrt.model import NodeResourceTopology, Zone

__all__ = ["ZoneTable", "zone_key"]


def zone_key(zone: Zone) -> tuple[Any, ...]:
    """What decides a zone's value and its ``to_dict`` text (the rows' raw values included)."""
    raws = tuple(row.raw for row in zone.resources)
    return (zone.name, zone.type, zone.parent, zone.costs, zone.attributes, zone.resources, raws)


class ZoneTable:
    """Live zones by content (module docstring). Not thread-safe (one informer thread feeds it)."""

    def __init__(self) -> None:
        self._zones: weakref.WeakValueDictionary[int, Zone] = weakref.WeakValueDictionary()

    def __len__(self) -> int:
        return len(self._zones)

    def zone(self, zone: Zone) -> Zone:
        """The live zone with ``zone``'s content (``zone`` itself when it is the first one)."""
        key = zone_key(zone)
        digest = hash(key)
        known = self._zones.get(digest)
        if known is None:
            self._zones[digest] = zone
            return zone
        return known if known is zone or zone_key(known) == key else zone

    def shared(self, nrt: NodeResourceTopology) -> NodeResourceTopology:
        """``nrt`` with every zone replaced by the live zone of the same content (equal object)."""
        zones = tuple(self.zone(z) for z in nrt.zones)
        if all(a is b for a, b in zip(zones, nrt.zones, strict=True)):
            return nrt
        return replace(nrt, zones=zones)
