"""``numaplane simulate --dra-devices-per-numa N``: DRA devices per zone, claims in the workload, and the
comparison the kubelet cannot win (issue 28 item 4).

Every node gets ``N`` devices of the DeviceClass ``accel`` on each NUMA node (one ResourceSlice per node,
devices in NUMA order, as a driver publishes them). A share of the workload's Guaranteed pods with
whole CPUs carries a claim for one device (seeded, the same pods in both runs). The same arrivals and
departures run three times:

* ``kubelet managers + DRA`` — kube-scheduler's view: a node whose free CPUs hold the pod and that has a
  free device; its DRA allocator takes the first free device of the slice (it knows no NUMA node of the
  CPUs); the node's resource manager admits the pod as the kubelet does, without the devices (the
  kubelet prepares claims after admission, so DRA takes no part in its topology manager);
* ``kube-scheduler DRA + numaplane agent`` — extender mode: kube-scheduler's allocator chooses the
  device as above, numaplane's agent admits with the DRA hint provider, so the CPUs follow the device
  when its zone has room; otherwise ``single-numa-node`` refuses the pod and ``best-effort`` runs it
  misaligned (the residual misalignment of extender mode; a claim selector on the NUMA attribute pins
  the allocator, docs/dra.md);
* ``numaplane + DRA`` — the same node order, but a node is taken only where
  :func:`~numaplane.placement.explain.dra_zones.claim_zones` (the node's NRT) and
  :func:`~numaplane.policy.dra_select.allocate_claims` find a free device in a zone that holds the
  pod's CPUs and memory (``scheduler run --dra``); the node's manager has the DRA hint provider
  (:class:`~numaplane.policy.dra.DRAPlugin`, numaplane's agent), so the CPUs follow the device.

Node order in both: most free CPUs first (LeastAllocated), lowest name on ties. A pod no node takes waits
and is retried after each departure. Counted per run: pods with a claim that ran, of them *misaligned*
(a device on a NUMA node outside the container's exclusive CPUs), pods refused by a node's admission at
least once (the controller's recreation is tried on the next node), and pods that never ran. Pure simulation: the real resource manager, hint provider and allocator, no I/O.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from numaplane.nrt.from_manager import NRTPublisher
from numaplane.placement.explain.dra_zones import RESTRICTIVE_POLICIES, claim_zones
from numaplane.placement.model.view import node_topology
from numaplane.policy.dra import ClaimDevice, DRAPlugin, PodClaims
from numaplane.policy.dra_select import ClaimRequest, DeviceClass, SliceDevice, allocate_claims
from numaplane.policy.manager import ResourceManager
from numaplane.resources.pod import Container, Pod
from numaplane.sim.cluster import NodeTemplate, allocatable_of
from numaplane.sim.workload import PodArrival

__all__ = ["DRA_MODES", "DRAModeResult", "compare_dra", "with_claims"]

DRIVER = "accel.example.com"
CLAIM = "accel"
DRA_MODES = ("kubelet managers + DRA", "kube-scheduler DRA + numaplane agent", "numaplane + DRA")
_CLASS = DeviceClass("accel")
_REQUEST = ClaimRequest("req", _CLASS, 1)


@dataclass
class DRAModeResult:
    """One run's counts (module docstring)."""

    mode: str
    pods: int = 0
    claim_pods_run: int = 0
    misaligned: int = 0
    rejected: int = 0
    never_ran: int = 0
    rejection_reasons: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "pods": self.pods,
            "claimPodsRun": self.claim_pods_run,
            "misaligned": self.misaligned,
            "aligned": self.claim_pods_run - self.misaligned,
            "admissionRejections": self.rejected,
            "rejectionReasons": dict(sorted(self.rejection_reasons.items())),
            "neverRan": self.never_ran,
        }


def with_claims(arrivals: Sequence[PodArrival], share: float, seed: int) -> list[PodArrival]:
    """``arrivals`` with a claim for one ``accel`` device on ``share`` of the Guaranteed pods whose
    containers all ask whole CPUs (seeded)."""
    rng = random.Random(seed * 7919 + 28)
    out: list[PodArrival] = []
    for arrival in arrivals:
        pod = arrival.pod
        whole = all((q := c.requests.get("cpu")) is not None and q.milli_value() % 1000 == 0 for c in pod.containers)
        if pod.qos_class == "Guaranteed" and pod.containers and whole and rng.random() < share:
            first, *rest = pod.containers
            claimed = Container(first.name, first.requests, first.limits, claims=((CLAIM, ""),))
            raw = {**pod.raw, "spec": {**(pod.raw.get("spec") or {}), "resourceClaims": [{"name": CLAIM}]}}
            pod = pod.with_changes(containers=(claimed, *rest), raw=raw)
        out.append(PodArrival(arrival.arrival_s, arrival.duration_s, pod, arrival.group))
    return out


def _devices(topology_numa: Sequence[int], per_numa: int, node: str) -> list[SliceDevice]:
    return [
        SliceDevice(DRIVER, node, f"accel-{numa}-{i}", (numa,), {"driver": DRIVER, "attributes": {}, "capacity": {}})
        for numa in topology_numa
        for i in range(per_numa)
    ]


class _Node:
    def __init__(self, template: NodeTemplate, index: int, per_numa: int, aware: bool) -> None:
        self.name = f"{template.name}-{index}"
        self.devices = _devices(template.topology.numa_ids, per_numa, self.name)
        self.taken: dict[tuple[str, str, str], str] = {}  # device → pod uid
        self.held: dict[str, list[SliceDevice]] = {}
        extra = [DRAPlugin(template.topology.numa_ids, self._lookup)] if aware else []
        self.manager = ResourceManager(template.topology, template.config, extra_plugins=extra)
        self.policy = template.config.topology_policy
        cpu = allocatable_of(template.topology, self.manager).get("cpu")
        self.cpus = float(cpu.amount) if cpu is not None else 0.0
        self.used = 0.0

    def _lookup(self, pod: Pod) -> PodClaims:
        devices = tuple(
            ClaimDevice(CLAIM, f"{pod.name}-{CLAIM}", pod.namespace, "req", d.driver, d.pool, d.name, d.numa)
            for d in self.held.get(pod.uid, ())
        )
        return PodClaims({CLAIM: devices} if devices else {})

    def free_devices(self) -> list[SliceDevice]:
        return [d for d in self.devices if d.key not in self.taken]


def _cpu(pod: Pod) -> float:
    q = pod.effective_requests().get("cpu")
    return float(q.amount) if q is not None else 0.0


def _run(mode: str, templates: Sequence[NodeTemplate], arrivals: Sequence[PodArrival], per_numa: int) -> DRAModeResult:
    aware = mode == DRA_MODES[2]  # numaplane chooses the device
    agent = mode != DRA_MODES[0]  # numaplane's agent admits (the DRA hint provider)
    nodes = [_Node(t, i, per_numa, agent) for i, t in enumerate(templates)]
    result = DRAModeResult(mode, pods=len(arrivals))
    events: list[tuple[float, int, str, Any]] = []
    for i, arrival in enumerate(arrivals):
        heapq.heappush(events, (arrival.arrival_s, i, "arrive", arrival))
    seq = len(arrivals)
    waiting: list[PodArrival] = []
    ran: set[str] = set()
    refused: set[str] = set()

    def place(arrival: PodArrival) -> bool:
        nonlocal seq
        pod = arrival.pod
        claimed = any(c.claims for c in pod.containers)
        need = _cpu(pod)
        for node in sorted(nodes, key=lambda n: (-(n.cpus - n.used), n.name)):
            if node.cpus - node.used < need:
                continue
            picks: list[SliceDevice] = []
            if claimed:
                if aware:
                    view = node_topology(NRTPublisher(node.manager, node.name).publish())
                    zones = claim_zones(view, pod, {})
                    got = allocate_claims(
                        {CLAIM: (_REQUEST,)}, node.devices, set(node.taken), zones,
                        spread=node.policy not in RESTRICTIVE_POLICIES,
                    )  # fmt: skip
                    if got is None:
                        continue
                    picks = [d for _, d in got[CLAIM]]
                else:
                    free = node.free_devices()
                    if not free:
                        continue
                    picks = free[:1]
            node.held[pod.uid] = picks
            admission = node.manager.admit(pod)
            if not admission.admitted:
                node.held.pop(pod.uid, None)
                if pod.uid not in refused:  # counted once per pod; its recreation is tried on the next node
                    refused.add(pod.uid)
                    result.rejected += 1
                    reason = admission.reason or "?"
                    result.rejection_reasons[reason] = result.rejection_reasons.get(reason, 0) + 1
                continue
            for device in picks:
                node.taken[device.key] = pod.uid
            node.used += need
            ran.add(pod.uid)
            if claimed:
                result.claim_pods_run += 1
                cpus: set[int] = set()
                for container in admission.containers:
                    if container.exclusive_cpus is not None:
                        cpus |= set(container.exclusive_cpus)
                numa = {n for n, owned in node.manager.topology.cpus_by_numa.items() if cpus & set(owned)}
                if any(not set(d.numa) <= numa for d in picks):
                    result.misaligned += 1
            if arrival.duration_s is not None:
                seq += 1
                heapq.heappush(events, (now + arrival.duration_s, seq, "depart", (node, pod, need)))
            return True
        return False

    now = 0.0
    while events:
        now, _, kind, payload = heapq.heappop(events)
        if kind == "arrive":
            if not place(payload):
                waiting.append(payload)
        else:
            node, pod, need = payload
            node.manager.remove(pod.uid)
            node.held.pop(pod.uid, None)
            for key in [k for k, uid in node.taken.items() if uid == pod.uid]:
                del node.taken[key]
            node.used -= need
            still = []
            for arrival in waiting:
                if not place(arrival):
                    still.append(arrival)
            waiting = still
    result.never_ran = sum(1 for a in arrivals if a.pod.uid not in ran)
    return result


def compare_dra(
    templates: Sequence[NodeTemplate], arrivals: Sequence[PodArrival], per_numa: int
) -> list[DRAModeResult]:
    """Both runs over the same nodes and arrivals (module docstring)."""
    return [_run(mode, templates, arrivals, per_numa) for mode in DRA_MODES]
