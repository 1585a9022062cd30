"""What a runtime's NRI can safely do, from the name and version it sends in ``Configure``.

**Unsolicited updates.** A plugin may change running containers on its own with
``Runtime.UpdateContainers``. In every NRI library before 0.12.1 the runtime's adaptation holds its
own lock while it calls the runtime's update callback, and containerd's callback then takes
containerd's NRI lock; every container and pod lifecycle event takes the two locks in the opposite
order (containerd's NRI lock, then the adaptation's, held while the plugins are asked). An
unsolicited call that takes the adaptation lock just as a lifecycle event took containerd's lock
deadlocks both: the runtime stops answering CRI and the kubelet marks the node NotReady
(containerd#13733, containerd#10583). The plugin cannot see the event coming (it reaches the plugin
only after the lock it waits for), so no timing on the plugin's side makes the call safe. Fixed in
containerd/nri#301 (NRI 0.12.1, July 2026); the first containerd with it is 2.4.0 (v2.4.0-beta.0;
containerd 1.7.x up to 1.7.34, 2.0.x, 2.1.x, 2.2.x and 2.3.x ship NRI 0.6.1 to 0.12.0 without it).

The replies the runtime asks for are safe on every version: the ``update`` lists of the
``Synchronize``, ``CreateContainer``, ``UpdateContainer`` and ``StopContainer`` answers are applied by
the runtime inside the event, under the locks it already holds in order.

**Split Synchronize.** NRI 0.8 (containerd 1.7.26 and 2.0.0 on) splits a runtime state too large for
one ttrpc message (4 MiB) over several ``Synchronize`` requests (``more``); an older runtime cannot send
it at all (containerd/nri#102) and drops the plugin after ``Configure``.

No I/O; the version is what the runtime says (``1.7.24~ds1``, ``v2.4.0-beta.0``, ``2.4.1``).
"""

from __future__ import annotations

import re

__all__ = [
    "FIXED_CONTAINERD",
    "SPLIT_SYNC_CONTAINERD",
    "parse_version",
    "splits_synchronize",
    "unsolicited_updates_safe",
]

#: The first containerd release whose NRI does not deadlock on unsolicited updates (containerd/nri#301).
FIXED_CONTAINERD = (2, 4, 0)
#: The first containerd release that splits a large Synchronize (NRI 0.8; every 2.x does too).
SPLIT_SYNC_CONTAINERD = (1, 7, 26)

_VERSION = re.compile(r"v?(\d{1,6})\.(\d{1,6})(?:\.(\d{1,6}))?")


def parse_version(text: str) -> tuple[int, int, int] | None:
    """``(major, minor, patch)`` from the front of a runtime's version string, ``None`` if it has none.

    A pre-release (``2.4.0-beta.0``, ``2.4.0~rc1``) counts as its release: containerd's pre-releases
    of a version already carry that version's dependencies."""
    match = _VERSION.match(text.strip())
    if match is None:
        return None
    return int(match[1]), int(match[2]), int(match[3] or 0)


def _containerd(name: str) -> bool:
    return name.strip().lower() in {"containerd", "io.containerd"}


def unsolicited_updates_safe(runtime_name: str, runtime_version: str) -> bool:
    """Whether ``Runtime.UpdateContainers`` from the plugin cannot deadlock this runtime (see the
    module docstring): containerd >= 2.4.0 only; any other or unknown runtime is treated as unsafe."""
    version = parse_version(runtime_version)
    return _containerd(runtime_name) and version is not None and version >= FIXED_CONTAINERD


def splits_synchronize(runtime_name: str, runtime_version: str) -> bool | None:
    """Whether the runtime splits a large Synchronize; ``None`` when unknown (not containerd)."""
    if not _containerd(runtime_name):
        return None
    version = parse_version(runtime_version)
    if version is None:
        return None
    return version >= SPLIT_SYNC_CONTAINERD
