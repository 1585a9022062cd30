"""The invariants of the agent's state, and the checks a restored checkpoint must pass first.

:func:`violations` lists every violated invariant of a container registry, its whole pods and the
resource manager (empty: consistent).
:func:`validate_manager_doc` checks a manager snapshot's shape and NUMA ids before it is restored;
:func:`canonical_check` that a snapshot encodes as the checkpoint writer encodes it. No I/O.

The invariants of :class:`~numaplane.agent.state.NodeAgentState`:

* a container admitted one at a time (``managed``, not ``whole_pod``) holds the manager pod
  ``<pod uid>/<container name>``; a ``whole_pod`` container belongs to the pod entry of its uid and
  sandbox; every manager pod belongs to exactly one live record or one pod entry;
* a record's ``exclusive`` CPUs equal the exclusive CPUs the plugins' ``allocations()`` give it
  (whichever plugin: the built-in CPU plugin or a vendor one, a remote one's from the driver's
  cache — ``ResourceManager.held_cpus``); the exclusive CPUs of different pods (or one-at-a-time
  containers) are disjoint and disjoint from the shared pool — no CPU is held twice (within one
  pod a later container may reuse a regular init container's CPUs, as on the kubelet);
* a container's desired cpuset is its exclusive set, else the current shared pool; desired memory
  nodes are those of its pinned memory (``None``: the agent leaves ``cpuset.mems`` alone).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from numaplane.agent.records import ContainerRecord
from numaplane.agent.wholepod import PodEntry
from numaplane.policy.manager import ResourceManager
from numaplane.topology.cpuset import CPUSet

__all__ = ["NUMA_KEYS", "canonical_check", "validate_manager_doc", "violations"]

#: Keys of a manager snapshot whose values are NUMA node ids.
NUMA_KEYS = frozenset({"numa", "numaAffinity", "cells", "numaNode", "numaNodes"})
#: Keys of a manager snapshot whose string values are CPU sets ("1,9", "0-3"); under ``entries`` every
#: string leaf is one (the CPU plugin's ``{"<pod>": {"<container>": "<cpuset>"}}``).
CPU_KEYS = frozenset({"cpus", "defaultCpuSet"})
_NUMBER = re.compile(r"\d+")


def _check_cpus(where: str, text: str, cpu_ids: set[int]) -> None:
    """Every CPU id written in ``text`` is one of ``cpu_ids`` (checked on the digits, before any CPU set is
    built from them: ``0-1099511627775`` would make a 2**40-bit mask)."""
    for digits in _NUMBER.findall(text):
        if len(digits) > 7 or int(digits) not in cpu_ids:
            raise ValueError(f"{where}: CPU {digits[:24]} is not one of this machine's")


def validate_manager_doc(doc: Any, numa_ids: set[int], cpu_ids: set[int] | None = None) -> None:
    """Check a manager snapshot's shape and every NUMA id in it against this machine, before restoring
    (an id such as 2**32 would make bitmask arithmetic slow and large); raises ``ValueError``.

    ``"numa": null`` is the snapshot of "no NUMA affinity" (a hint, a device without a NUMA node) and
    is accepted; ``null`` inside a list of ids is not. With ``cpu_ids``, every CPU set in it (``cpus``,
    ``defaultCpuSet``, the CPU plugin's ``entries``) names only this machine's CPUs."""
    if not isinstance(doc, Mapping):
        raise ValueError("manager is not an object")
    for key in ("plugins", "pods", "admissions"):
        if not isinstance(doc.get(key) or {}, Mapping):
            raise ValueError(f"manager.{key} is not an object")
    pods = doc.get("pods") or {}
    for uid, adm in (doc.get("admissions") or {}).items():
        pod = adm.get("pod", uid) if isinstance(adm, Mapping) else uid
        if uid not in pods or pod not in pods:
            raise ValueError(f"admission {uid!r} has no pod")
    stack: list[Any] = [doc]
    while stack:
        value = stack.pop()
        if isinstance(value, Mapping):
            for key, child in value.items():
                if cpu_ids is not None and key in CPU_KEYS and isinstance(child, str):
                    _check_cpus(str(key), child, cpu_ids)
                elif cpu_ids is not None and key == "entries" and isinstance(child, Mapping):
                    for pod, containers in child.items():
                        for name, cpus in containers.items() if isinstance(containers, Mapping) else ():
                            if isinstance(cpus, str):
                                _check_cpus(f"entries.{str(pod)[:64]}.{str(name)[:64]}", cpus, cpu_ids)
                if key in NUMA_KEYS:
                    if child is None and key == "numa":
                        continue  # a hint or device with no NUMA affinity (``TopologyHint.to_dict``)
                    ids = child if isinstance(child, list) else [child]
                    for i in ids:
                        if not isinstance(i, int) or isinstance(i, bool) or i not in numa_ids:
                            raise ValueError(f"{key}: NUMA id {str(i)[:24]!r} is not one of this machine's")
                elif key == "machineState" and isinstance(child, Mapping):
                    for k in child:
                        if not (isinstance(k, str) and k.isdigit() and len(k) < 8 and int(k) in numa_ids):
                            raise ValueError(f"machineState: NUMA id {str(k)[:24]!r} is not one of this machine's")
                stack.append(child)
        elif isinstance(value, list):
            stack.extend(value)


def canonical_check(doc: Any) -> None:
    """The checkpoint writer's encoding of ``doc`` works (sorted keys: every key a string)."""
    json.dumps(doc, sort_keys=True, separators=(",", ":"))


def violations(
    records: Mapping[str, ContainerRecord], pods: Mapping[str, PodEntry], manager: ResourceManager
) -> list[str]:
    """Every violated invariant (empty: consistent)."""
    problems: list[str] = []
    keys: dict[str, str] = {}
    owners: dict[str, int] = {}  # holder (a whole pod's uid, else a container key) → exclusive CPUs
    held = manager.held_cpus()
    by_pod: dict[str, int] = {}
    for (uid, _name), cpus in held.items():
        by_pod[uid] = by_pod.get(uid, 0) | cpus.mask
    for cid, r in records.items():
        if r.container_id != cid:
            problems.append(f"record {cid} names container {r.container_id}")
        if r.whole_pod:
            entry = pods.get(r.pod_uid)
            if entry is None or entry.sandbox_id != r.sandbox_id or not entry.knows(r.name):
                problems.append(f"container {cid} ({r.key}) belongs to no pod admitted as a whole")
            if r.key in keys:
                problems.append(f"{r.key} is held by containers {keys[r.key]} and {cid}")
            keys[r.key] = cid
            if held.get((r.pod_uid, r.name)) != r.exclusive:
                problems.append(f"container {cid} ({r.key}): exclusive CPUs differ from the plugins' allocations")
        elif r.managed:
            if r.key in keys:
                problems.append(f"{r.key} is held by containers {keys[r.key]} and {cid}")
            keys[r.key] = cid
            if r.key not in manager.pods:
                problems.append(f"container {cid} ({r.key}) is not admitted in the resource manager")
            if held.get((r.key, r.name)) != r.exclusive:
                problems.append(f"container {cid} ({r.key}): exclusive CPUs differ from the plugins' allocations")
        elif r.exclusive is not None:
            problems.append(f"container {cid} holds exclusive CPUs without an admission")
        if r.exclusive is not None:
            holder = r.pod_uid if r.whole_pod else r.key
            owners[holder] = owners.get(holder, 0) | r.exclusive.mask
    for uid, entry in pods.items():
        if entry.uid != uid or uid not in manager.pods:
            problems.append(f"pod {uid} admitted as a whole is not admitted in the resource manager")
        for name in entry.released:
            if (uid, name) in held:
                problems.append(f"pod {uid}: released init container {name} still holds CPUs")
        owners[uid] = owners.get(uid, 0) | by_pod.get(uid, 0)  # also containers not created yet
    seen = 0
    for mask in owners.values():
        if mask & seen:
            problems.append(f"CPUs {CPUSet.from_mask(mask & seen)} are held twice")
        seen |= mask
    for key in manager.pods:
        if key not in keys and key not in pods:
            problems.append(f"resource manager pod {key} belongs to no container")
    if seen & manager.shared_pool().mask:
        problems.append("exclusive CPUs overlap the shared pool")
    return problems
