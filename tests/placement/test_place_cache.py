"""NRT caches: the upstream behaviours of scheduler-nrt.md C (the E.8 cache vectors are not machine-readable
in the conformance set, so they are re-derived here from the C.x facts) and the races users hit."""

from __future__ import annotations

from dataclasses import replace

from place_helpers import container, gu_pod, node_doc, nrt, pod, zone

from numaplane.nrt.fingerprint import compute_fingerprint
from numaplane.nrt.model import NodeResourceTopology
from numaplane.nrt.parse import parse_strict
from numaplane.placement.caches.cache import (
    DiscardReservedCache,
    OverReserveCache,
    OverReserveConfig,
    PassthroughCache,
    filter_with_cache,
    make_cache,
    score_with_cache,
)
from numaplane.placement.model.result import Fit, Reject
from numaplane.placement.model.strategies import ScoringStrategy
from numaplane.resources.pod import Pod

NODE = node_doc("n1", {"cpu": "8", "memory": "16Gi", "vendor/nic": "4"})
CFG = OverReserveConfig(resync_period_seconds=5, profile_names=frozenset({"topo-aware-scheduler"}))


def topo(
    cpu: int = 4, *, fingerprint: str | None = None, annotation: str | None = None, **kw: object
) -> NodeResourceTopology:
    attrs = {"nodeTopologyPodsFingerprint": fingerprint} if fingerprint else {}
    attrs.update(kw.pop("attributes", {}) or {})  # type: ignore[arg-type]
    annotations = {"topology.node.k8s.io/fingerprint": annotation} if annotation else None
    return nrt(
        "n1",
        [zone(0, {"cpu": cpu, "memory": "8Gi"}), zone(1, {"cpu": cpu, "memory": "8Gi"})],
        attributes=attrs,
        annotations=annotations,
        **kw,  # type: ignore[arg-type]
    )


def bound(p: Pod, node: str = "n1", phase: str = "Running", scheduler: str = "topo-aware-scheduler") -> Pod:
    return pod(
        p.name,
        [container(c.name, {k: str(v) for k, v in c.requests.items()}) for c in p.containers],
        namespace=p.namespace,
        node=node,
        phase=phase,
        scheduler=scheduler,
    )


def fp(*pods: Pod) -> str:
    return compute_fingerprint((p.namespace, p.name) for p in pods)


def cpu_left(cache: object, zone_index: int = 0) -> int:
    view = cache.get("n1").topology  # type: ignore[attr-defined]
    assert view is not None
    return view.zones[zone_index].available["cpu"].value()


# --- the race: stale NRT, two pods in one cycle ------------------------------------------------------


def test_passthrough_overcommits_with_stale_nrt() -> None:
    cache = PassthroughCache([topo(4)])
    a, b = gu_pod("a", cpu=3), gu_pod("b", cpu=3)
    for p in (a, b):  # the exporter has not republished between the two pods
        assert isinstance(filter_with_cache(p, cache, NODE), Fit)
        cache.reserve("n1", p)
    # the cache still shows 4 free cpus per zone, so a third 3-cpu pod also passes: 9 cpus sent to 2 x 4
    c = gu_pod("c", cpu=3)
    assert isinstance(filter_with_cache(c, cache, NODE), Fit)


def test_over_reserve_prevents_overcommit_with_stale_nrt() -> None:
    cache = OverReserveCache(CFG, [topo(4)])
    a, b = gu_pod("a", cpu=3), gu_pod("b", cpu=3)
    assert isinstance(filter_with_cache(a, cache, NODE), Fit)
    cache.reserve("n1", a)
    # a is charged to EVERY zone: 4 - 3 = 1 cpu left on each
    assert [z.available["cpu"].value() for z in cache.get("n1").topology.zones] == [1, 1]  # type: ignore[union-attr]
    verdict = filter_with_cache(b, cache, NODE)
    assert isinstance(verdict, Reject) and verdict.reason == "cannot align container"
    assert cache.dirty("n1")["maybe_overreserved"] == 1  # every rejection marks the node


def test_reserve_clamps_at_zero_and_unreserve_releases() -> None:
    cache = OverReserveCache(CFG, [topo(4)])
    big = gu_pod("big", cpu=6)
    cache.reserve("n1", big)
    assert cpu_left(cache) == 0
    cache.reserve("n1", big)  # same pod: overwritten, not added
    assert list(cache.assumed("n1")) == ["default/big"]
    cache.unreserve("n1", big)
    assert cpu_left(cache) == 4
    cache.unreserve("n1", big)  # no-op


def test_reserve_on_node_without_nrt_is_ignored() -> None:
    cache = OverReserveCache(CFG, [])
    cache.reserve("n2", gu_pod())
    assert cache.assumed("n2") == {}
    got = cache.get("n2")
    assert got.topology is None and got.fresh


def test_postbind_and_pod_deletion_release_nothing() -> None:
    cache = OverReserveCache(CFG, [topo(4)])
    a = gu_pod("a", cpu=3)
    cache.reserve("n1", a)
    cache.post_bind("n1", a)
    cache.pod_updated(bound(a))
    cache.pod_deleted(bound(a))
    assert cpu_left(cache) == 1


# --- resync ------------------------------------------------------------------------------------------


def test_resync_flushes_only_on_matching_fingerprint() -> None:
    cache = OverReserveCache(CFG, [topo(4)])
    a = gu_pod("a", cpu=3)
    cache.reserve("n1", a)
    cache.node_maybe_overreserved("n1", gu_pod("b", cpu=3))
    cache.pod_updated(bound(a))
    # the exporter publishes an NRT computed before a started: fingerprint of no pods
    cache.nrt_updated(topo(4, fingerprint=fp()))
    report = cache.tick(100.0)
    assert report is not None and report.flushed == () and report.skipped == {"n1": "fingerprint signature mismatch"}
    assert cpu_left(cache) == 1 and cache.generation == 0
    # now it accounts for a: fingerprint matches the scheduler's view
    cache.nrt_updated(topo(4, fingerprint=fp(a)))
    assert cache.tick(102.0) is None  # period not elapsed
    report = cache.tick(105.0)
    assert report is not None and report.flushed == ("n1",) and report.generation == 1
    assert cache.assumed("n1") == {} and cache.dirty("n1") == {
        "maybe_overreserved": 0,
        "foreign_pods": 0,
        "config_changed": 0,
    }
    assert cpu_left(cache) == 4  # the new NRT's values (the test exporter did not subtract a)


def test_no_fingerprint_means_dirty_nodes_never_resync() -> None:
    cache = OverReserveCache(CFG, [topo(4)])
    a = gu_pod("a")
    cache.reserve("n1", a)
    cache.node_maybe_overreserved("n1", a)
    cache.pod_updated(bound(a))
    cache.nrt_updated(topo(4))
    report = cache.tick(0.0)
    assert report is not None and report.skipped == {"n1": "NRT carries no pod fingerprint"}
    assert cache.assumed("n1") != {}


def test_node_without_relevant_pods_never_resyncs() -> None:
    cache = OverReserveCache(CFG, [topo(4)])
    cache.node_maybe_overreserved("n1", gu_pod())
    cache.nrt_updated(topo(4, fingerprint=fp()))
    report = cache.tick(0.0)
    assert report is not None and report.skipped == {"n1": "no relevant pods on the node"}


def test_legacy_annotation_fingerprint_is_used() -> None:
    cache = OverReserveCache(CFG, [topo(4)])
    a = gu_pod("a")
    cache.reserve("n1", a)
    cache.node_maybe_overreserved("n1", a)
    cache.pod_updated(bound(a))
    cache.nrt_updated(topo(4, annotation=fp(a)))
    report = cache.tick(0.0)
    assert report is not None and report.flushed == ("n1",)


def test_exclusive_only_fingerprint_method() -> None:
    cache = OverReserveCache(CFG, [topo(4)])
    gu = gu_pod("gu", cpu=2)
    burst = pod("burst", [container("c", {"cpu": 1}, guaranteed=False)])
    for p in (gu, burst):
        cache.pod_updated(bound(p))
    cache.node_maybe_overreserved("n1", gu)
    method = {"nodeTopologyPodsFingerprintMethod": "with-exclusive-resources"}
    cache.nrt_updated(topo(4, fingerprint=fp(gu), attributes=method))
    report = cache.tick(0.0)
    assert report is not None and report.flushed == ("n1",)
    # with the resync method forced to All, the Burstable pod counts and the same NRT mismatches
    cache2 = OverReserveCache(OverReserveConfig(resync_method="All"), [topo(4)])
    for p in (gu, burst):
        cache2.pod_updated(bound(p))
    cache2.node_maybe_overreserved("n1", gu)
    cache2.nrt_updated(topo(4, fingerprint=fp(gu), attributes=method))
    assert cache2.tick(0.0).flushed == ()  # type: ignore[union-attr]


def test_informer_modes_and_terminal_pods() -> None:
    # Dedicated (default) counts Succeeded pods like the kubelet's podresources view; Shared does not (#598).
    done = bound(gu_pod("job"), phase="Succeeded")
    pending = bound(gu_pod("new"), phase="Pending")
    for mode, flushed in (("Dedicated", ("n1",)), ("Shared", ())):
        cache = OverReserveCache(OverReserveConfig(informer_mode=mode), [topo(4)])  # type: ignore[arg-type]
        cache.pod_updated(done)
        cache.pod_updated(pending)
        cache.pod_updated(bound(gu_pod("run")))
        cache.node_maybe_overreserved("n1", done)
        cache.nrt_updated(topo(4, fingerprint=fp(done, gu_pod("run"))))
        assert cache.tick(0.0).flushed == flushed  # type: ignore[union-attr]


def test_a_fingerprint_without_the_terminal_pods_flushes_a_dedicated_node() -> None:
    # The canary was deleted: the kubelet turned it Failed and freed its CPU, the exporter (dropping
    # terminal pods) republished without it, but its object is still there. Upstream waits for the
    # object to go; numaplane flushes, drops the canary's charge and trusts the node again.
    canary, placed = gu_pod("canary", cpu=3), gu_pod("placed", cpu=1)
    for match, flushed, left in ((True, ("n1",), 4), (False, (), 0)):
        cache = OverReserveCache(replace(CFG, match_without_terminal_pods=match), [topo(4)])
        cache.reserve("n1", canary)
        cache.pod_updated(bound(placed))
        cache.pod_updated(bound(canary, phase="Failed"))
        cache.pod_updated(bound(gu_pod("web", cpu=1), scheduler="default-scheduler"))  # foreign: untrusted
        assert not cache.get("n1").fresh
        cache.nrt_updated(topo(4, fingerprint=fp(placed, gu_pod("web"))))
        report = cache.tick(0.0)
        assert report is not None and report.flushed == flushed
        assert cache.get("n1").fresh is match
        if match:
            assert cache.assumed("n1") == {} and cpu_left(cache) == left
        else:
            assert report.skipped == {"n1": "fingerprint signature mismatch"}
    # a mismatch that terminal pods do not explain stays a mismatch
    cache = OverReserveCache(CFG, [topo(4)])
    cache.pod_updated(bound(placed))
    cache.pod_updated(bound(canary, phase="Succeeded"))
    cache.node_maybe_overreserved("n1", placed)
    cache.nrt_updated(topo(4, fingerprint=fp(gu_pod("other"))))
    assert cache.tick(0.0).skipped == {"n1": "fingerprint signature mismatch"}  # type: ignore[union-attr]


def test_reserve_during_resync_keeps_late_reservation_and_does_not_stick() -> None:
    a, late = gu_pod("a", cpu=1), gu_pod("late", cpu=2)
    for keep, expected in ((True, 2), (False, 4)):
        cache = OverReserveCache(OverReserveConfig(keep_late_reservations=keep), [topo(4)])
        cache.reserve("n1", a)
        cache.pod_updated(bound(a))
        cache.node_maybe_overreserved("n1", a)
        cache.nrt_updated(topo(4, fingerprint=fp(a)))
        plan = cache.resync_begin()
        assert plan is not None
        cache.reserve("n1", late)  # lands between snapshot and flush
        report = cache.resync_commit(plan)
        assert report.flushed == ("n1",)
        assert cpu_left(cache) == expected  # kept: late is still charged; upstream drops it
        assert not cache.dirty_node("n1")  # not stuck: the dirty mark was cleared by the flush
        assert "default/a" not in cache.assumed("n1")


def test_reserve_does_not_clear_dirty_mark() -> None:
    cache = OverReserveCache(CFG, [topo(4)])
    cache.node_maybe_overreserved("n1", gu_pod())
    cache.reserve("n1", gu_pod("x"))
    assert cache.dirty_node("n1")


# --- what a resync flush keeps charged ----------------------------------------------------------------


def accounted(available: tuple[int, int], fingerprint: str) -> NodeResourceTopology:
    """An exporter's NRT of n1 (4 cpus per zone) with ``available`` cpus left and a pod fingerprint."""
    doc = topo(4, fingerprint=fingerprint).to_dict()
    for z, left in zip(doc["zones"], available, strict=True):
        for res in z["resources"]:
            if res["name"] == "cpu":
                res["available"] = str(left)
    return parse_strict(doc)


def test_a_flush_keeps_charging_a_bound_pending_pod_and_prevents_the_overcommit() -> None:
    """The NRT's fingerprint matches the node's relevant (bound, not Pending) pods; a pod the kubelet
    has not admitted yet is in neither that set nor the NRT's numbers, so the flush must not forget it."""
    running, waiting = gu_pod("running", cpu=1), gu_pod("waiting", cpu=3)
    next_pod = gu_pod("next", cpu=2)
    for recharge, left, verdict in ((False, 4, Fit), (True, 1, Reject)):
        cache = OverReserveCache(OverReserveConfig(recharge_uncovered=recharge), [topo(4)])
        cache.pod_updated(bound(running))
        cache.reserve("n1", waiting)
        cache.pod_updated(bound(waiting, phase="Pending"))
        cache.node_maybe_overreserved("n1", next_pod)
        # published after running started, before waiting was admitted: running is in zone 1
        cache.nrt_updated(accounted((4, 3), fp(running)))
        report = cache.tick(0.0)
        assert report is not None and report.flushed == ("n1",)
        assert cpu_left(cache) == left
        # upstream's flush forgets waiting: next fits zone 0, where the kubelet may also put waiting
        # (3 + 2 cpus on a 4-cpu zone); with the recharge it does not
        assert isinstance(filter_with_cache(next_pod, cache, NODE), verdict)
        assert dict(report.charged) == ({"n1": ("default/waiting",)} if recharge else {})
    # once admitted and counted by a later NRT, waiting is covered: charged once, by the NRT only
    cache.pod_updated(bound(waiting))
    cache.node_maybe_overreserved("n1", next_pod)
    cache.nrt_updated(accounted((1, 3), fp(running, waiting)))
    assert cache.tick(10.0).flushed == ("n1",)  # type: ignore[union-attr]
    assert cache.assumed("n1") == {} and cpu_left(cache, 0) == 1 and cpu_left(cache, 1) == 3


def test_a_covered_reservation_is_not_charged_twice() -> None:
    a = gu_pod("a", cpu=3)
    cache = OverReserveCache(CFG, [topo(4)])
    cache.reserve("n1", a)
    cache.pod_updated(bound(a))
    assert cpu_left(cache, 1) == 1  # charged to every zone while the NRT is stale
    cache.node_maybe_overreserved("n1", gu_pod("b", cpu=3))
    cache.nrt_updated(accounted((4, 1), fp(a)))  # the NRT has a in zone 1
    report = cache.tick(0.0)
    assert report is not None and report.flushed == ("n1",) and dict(report.charged) == {}
    assert cache.assumed("n1") == {}
    assert (cpu_left(cache, 0), cpu_left(cache, 1)) == (4, 1)  # not (1, 0): a counted once, where it is


def test_a_flush_keeps_pods_still_being_bound_and_drops_pods_that_hold_nothing_here() -> None:
    cache = OverReserveCache(CFG, [topo(8)])
    running = gu_pod("running", cpu=1)
    cache.pod_updated(bound(running))
    binding = gu_pod("binding", cpu=1)
    cache.pod_updated(binding)  # the informer shows it unbound: its binding is in flight
    cache.reserve("n1", binding)
    gone = gu_pod("gone", cpu=1)
    cache.reserve("n1", gone)
    cache.pod_updated(bound(gone, phase="Pending"))
    cache.pod_deleted(bound(gone, phase="Pending"))  # deleted: its resources are free again
    unseen = gu_pod("unseen", cpu=1)
    cache.reserve("n1", unseen)  # never shown by the informer: indistinguishable from a deleted pod
    elsewhere = gu_pod("elsewhere", cpu=1)
    cache.reserve("n1", elsewhere)
    cache.pod_updated(bound(elsewhere, node="n2", phase="Pending"))  # bound to another node after all
    failed = gu_pod("failed", cpu=1)
    cache.reserve("n1", failed)
    cache.pod_updated(failed.with_changes(phase="Failed"))  # ended before binding
    foreign = bound(gu_pod("foreign", cpu=2), phase="Pending", scheduler="default-scheduler")
    cache.pod_updated(foreign)  # never reserved by us, holds 2 cpus the NRT does not count yet
    cache.node_maybe_overreserved("n1", running)
    cache.nrt_updated(topo(8, fingerprint=fp(running)))
    report = cache.tick(0.0)
    assert report is not None and report.flushed == ("n1",)
    assert set(cache.assumed("n1")) == {"default/binding", "default/foreign"}
    assert cpu_left(cache) == 8 - 1 - 2 and cache.get("n1").fresh  # the flush cleared the foreign mark
    # both admitted (the foreign one marks the node again), but this NRT predates binding: no flush
    cache.pod_updated(bound(binding))
    cache.pod_updated(bound(foreign, scheduler="default-scheduler"))
    cache.nrt_updated(topo(8, fingerprint=fp(running, foreign)))
    report = cache.tick(10.0)
    assert report is not None and report.skipped == {"n1": "fingerprint signature mismatch"}
    assert set(cache.assumed("n1")) == {"default/binding", "default/foreign"}
    cache.nrt_updated(topo(8, fingerprint=fp(running, foreign, binding)))
    assert cache.tick(20.0).flushed == ("n1",)  # type: ignore[union-attr]
    assert cache.assumed("n1") == {} and cpu_left(cache) == 8


def test_a_new_pod_of_a_deleted_pods_name_is_charged_only_as_itself() -> None:
    """StatefulSet pods come back under the same name: a reservation of the deleted pod must not be
    taken for the new one, which is charged by the rule, at its own request, or not at all."""
    running = gu_pod("running", cpu=1)
    cache = OverReserveCache(CFG, [topo(8)])
    cache.pod_updated(bound(running))
    web0 = gu_pod("web-0", cpu=3)
    cache.pod_updated(web0)
    cache.reserve("n1", web0)
    cache.pod_deleted(web0)  # deleted while being bound
    cache.pod_updated(gu_pod("web-0", cpu=3))  # its successor waits to be scheduled: holds nothing yet
    web1 = gu_pod("web-1", cpu=3)
    cache.reserve("n1", web1)
    cache.pod_updated(bound(web1, phase="Pending"))
    cache.pod_updated(gu_pod("web-1", cpu=3))  # seen unbound again: the deletion was missed, a new pod
    web2 = gu_pod("web-2", cpu=3)
    cache.reserve("n1", web2)
    cache.pod_updated(bound(web2, phase="Pending"))
    cache.pod_deleted(bound(web2, phase="Pending"))
    cache.pod_updated(bound(gu_pod("web-2", cpu=2), phase="Pending"))  # the successor, bound: charged as itself
    cache.node_maybe_overreserved("n1", running)
    cache.nrt_updated(topo(8, fingerprint=fp(running)))
    assert cache.tick(0.0).flushed == ("n1",)  # type: ignore[union-attr]
    assert {k: str(r["cpu"]) for k, r in cache.assumed("n1").items()} == {"default/web-2": "2"}
    assert cpu_left(cache) == 6


def test_a_flush_recharges_pods_that_became_relevant_after_its_snapshot() -> None:
    """The NRT accounts for the snapshot's relevant pods: a pod admitted between the snapshot and the
    flush is not in the fingerprint, so its charge survives even though it is Running now."""
    running, late_runner = gu_pod("running", cpu=1), gu_pod("late-runner", cpu=2)
    cache = OverReserveCache(CFG, [topo(4)])
    cache.pod_updated(bound(running))
    cache.reserve("n1", late_runner)
    cache.pod_updated(bound(late_runner, phase="Pending"))
    cache.node_maybe_overreserved("n1", running)
    cache.nrt_updated(topo(4, fingerprint=fp(running)))
    plan = cache.resync_begin()
    assert plan is not None
    cache.pod_updated(bound(late_runner))  # admitted mid-resync
    assert cache.resync_commit(plan).flushed == ("n1",)
    assert set(cache.assumed("n1")) == {"default/late-runner"} and cpu_left(cache) == 2


def test_late_reservations_without_keep_late_follow_the_rule() -> None:
    """``keep_late_reservations=False`` removes the late reservations' protection, nothing more: a late
    reservation of a pod still being bound stays charged by the rule, one of an unknown pod does not."""
    running = gu_pod("running", cpu=1)
    binding, unknown = gu_pod("binding", cpu=1), gu_pod("unknown", cpu=2)
    for keep, charged in ((True, {"default/binding", "default/unknown"}), (False, {"default/binding"})):
        cache = OverReserveCache(OverReserveConfig(keep_late_reservations=keep), [topo(4)])
        cache.pod_updated(bound(running))
        cache.pod_updated(binding)
        cache.node_maybe_overreserved("n1", running)
        cache.nrt_updated(topo(4, fingerprint=fp(running)))
        plan = cache.resync_begin()
        assert plan is not None
        cache.reserve("n1", binding)
        cache.reserve("n1", unknown)
        assert cache.resync_commit(plan).flushed == ("n1",)
        assert set(cache.assumed("n1")) == charged
    upstream = OverReserveCache(OverReserveConfig(keep_late_reservations=False, recharge_uncovered=False), [topo(4)])
    upstream.pod_updated(bound(running))
    upstream.pod_updated(binding)
    upstream.reserve("n1", binding)
    upstream.node_maybe_overreserved("n1", running)
    upstream.nrt_updated(topo(4, fingerprint=fp(running)))
    assert upstream.tick(0.0).flushed == ("n1",)  # type: ignore[union-attr]
    assert upstream.assumed("n1") == {}  # upstream: a flush drops every reservation


def test_recharge_follows_the_informer_mode_and_the_exclusive_only_method() -> None:
    running = bound(gu_pod("running", cpu=1))
    job = bound(gu_pod("job", cpu=1), phase="Succeeded")
    unknown_phase = bound(gu_pod("starting", cpu=1), phase="")
    shared = OverReserveCache(OverReserveConfig(informer_mode="Shared"), [topo(4)])
    for p in (running, job, unknown_phase):
        shared.pod_updated(p)
    shared.node_maybe_overreserved("n1", running)
    shared.nrt_updated(topo(4, fingerprint=fp(running)))
    assert shared.tick(0.0).flushed == ("n1",)  # type: ignore[union-attr]
    # Shared counts only Running pods: the terminal job holds nothing, the phase-less pod is charged
    assert set(shared.assumed("n1")) == {"default/starting"}
    # an exclusive-only fingerprint leaves relevant pods without exclusive resources out of the hash;
    # they hold nothing the zones subtract, so they are not charged (no flush could ever cover them)
    burst = bound(pod("burst", [container("c", {"cpu": 1}, guaranteed=False)]))
    excl = OverReserveCache(CFG, [topo(4)])
    for p in (running, burst):
        excl.pod_updated(p)
    excl.node_maybe_overreserved("n1", running)
    method = {"nodeTopologyPodsFingerprintMethod": "with-exclusive-resources"}
    excl.nrt_updated(topo(4, fingerprint=fp(running), attributes=method))
    assert excl.tick(0.0).flushed == ("n1",)  # type: ignore[union-attr]
    assert excl.assumed("n1") == {}


def test_a_flush_never_charges_a_stuck_pending_pod_without_exclusive_resources() -> None:
    """A Burstable pod bound to the node but stuck Pending (an image that cannot be pulled) holds
    nothing the zones subtract: the exporter never counts it, so no flush could ever cover it. Charging
    its cpu request made the node refuse a 1-cpu Guaranteed pod its NRT could hold (found on the real
    cluster: a leftover operator Deployment whose image could not be pulled)."""
    running = bound(gu_pod("running", cpu=3))
    stuck = pod("stuck", [container("c", {"cpu": "100m"}, guaranteed=False)], node="n1", phase="Pending")
    stuck_gu = pod("stuck-gu", [container("c", {"cpu": 1, "memory": "1Gi"})], node="n1", phase="Pending")
    canary = gu_pod("canary", cpu=1)
    cache = OverReserveCache(CFG, [topo(4)])
    for p in (running, stuck):
        cache.pod_updated(p)
    cache.node_maybe_overreserved("n1", canary)
    cache.nrt_updated(accounted((1, 0), fp(running)))  # running holds 3 of zone 0's 4 cpus
    assert cache.tick(0.0).flushed == ("n1",)  # type: ignore[union-attr]
    assert cache.assumed("n1") == {}
    assert cpu_left(cache) == 1
    assert isinstance(filter_with_cache(canary, cache, NODE), Fit)
    # a stuck Guaranteed pod with an exclusive cpu is still charged: the kubelet may yet admit it
    cache.pod_updated(stuck_gu)
    cache.node_maybe_overreserved("n1", canary)
    cache.nrt_updated(accounted((1, 0), fp(running)))
    assert cache.tick(10.0).flushed == ("n1",)  # type: ignore[union-attr]
    assert set(cache.assumed("n1")) == {"default/stuck-gu"}
    assert isinstance(filter_with_cache(canary, cache, NODE), Reject)


def test_adopting_an_nrt_charges_nothing() -> None:
    cache = OverReserveCache(CFG, [])
    cache.pod_updated(bound(gu_pod("waiting", cpu=3), phase="Pending"))
    cache.nrt_updated(topo(4))
    assert cache.assumed("n1") == {} and cpu_left(cache) == 4


# --- foreign pods ------------------------------------------------------------------------------------


def test_foreign_pod_makes_node_untrusted_until_resync() -> None:
    cache = OverReserveCache(CFG, [topo(4)])
    foreign = bound(gu_pod("infra"), scheduler="default-scheduler")
    cache.pod_updated(foreign)
    got = cache.get("n1")
    assert not got.fresh and got.topology is None
    verdict = filter_with_cache(gu_pod(), cache, NODE)
    assert isinstance(verdict, Reject) and verdict.reason == "invalid node topology data"
    assert score_with_cache(gu_pod(), cache, "n1", ScoringStrategy()) == 0
    assert cache.dirty("n1")["maybe_overreserved"] == 0  # not a per-zone rejection
    cache.nrt_updated(topo(4, fingerprint=fp(foreign)))
    assert cache.tick(0.0).flushed == ("n1",)  # type: ignore[union-attr]
    assert cache.get("n1").fresh


def test_foreign_detection_modes() -> None:
    shared = bound(pod("shared", [container("c", {"cpu": "500m"}, guaranteed=False)]), scheduler="default-scheduler")
    only_excl = OverReserveCache(OverReserveConfig(foreign_pods_detect="OnlyExclusiveResources"), [topo(4)])
    only_excl.pod_updated(shared)
    assert only_excl.get("n1").fresh
    only_excl.pod_updated(bound(gu_pod("pinned", cpu=2), scheduler="default-scheduler"))
    assert not only_excl.get("n1").fresh
    off = OverReserveCache(OverReserveConfig(foreign_pods_detect="None"), [topo(4)])
    off.pod_updated(bound(gu_pod("pinned", cpu=2), scheduler="default-scheduler"))
    assert off.get("n1").fresh
    no_nrt = OverReserveCache(CFG, [])
    no_nrt.pod_updated(bound(gu_pod("x"), scheduler="other"))
    assert no_nrt.get("n1").fresh


# --- topology manager config changes, new objects, malformed objects ---------------------------------


def test_config_change_flushes_without_fingerprint() -> None:
    cache = OverReserveCache(CFG, [topo(4)])
    cache.reserve("n1", gu_pod("a", cpu=3))
    cache.nrt_updated(topo(8, policy="best-effort"))
    assert cache.dirty("n1")["config_changed"] == 1
    assert cache.tick(0.0).flushed == ("n1",)  # type: ignore[union-attr]
    view = cache.get("n1").topology
    assert view is not None and view.config.policy == "best-effort" and cpu_left(cache) == 8
    only_res = OverReserveCache(OverReserveConfig(resync_scope="OnlyResources"), [topo(4)])
    only_res.nrt_updated(topo(8, policy="best-effort"))
    assert only_res.tick(0.0) is None


def test_resource_only_updates_are_ignored_until_resync() -> None:
    cache = OverReserveCache(CFG, [topo(4)])
    cache.nrt_updated(topo(1))
    assert cpu_left(cache) == 4


def test_new_nrt_objects_adopted_or_ignored() -> None:
    adopt = OverReserveCache(CFG, [])
    adopt.nrt_updated(topo(4))
    assert adopt.get("n1").topology is not None
    upstream = OverReserveCache(OverReserveConfig(adopt_new_nrts=False), [])
    upstream.nrt_updated(topo(4))
    assert upstream.get("n1").topology is None  # scheduler-plugins#967


def test_malformed_nrt_event_rejects_the_node_with_a_reason() -> None:
    doc = topo(4).to_dict()
    doc["zones"][0]["resources"][0]["available"] = "4 cores"
    for cache in (PassthroughCache([doc]), OverReserveCache(CFG, [doc]), DiscardReservedCache([doc])):
        cache.nrt_updated(doc)
        verdict = filter_with_cache(gu_pod(), cache, NODE)
        assert isinstance(verdict, Reject) and verdict.reason == "malformed node topology data", cache
        assert "zones[0].resources[0].available" in verdict.explain()


# --- discard reserved --------------------------------------------------------------------------------


def test_discard_reserved_locks_node_between_reserve_and_postbind() -> None:
    cache = DiscardReservedCache([topo(4)])
    a = gu_pod("a")
    assert isinstance(filter_with_cache(a, cache, NODE), Fit)
    cache.reserve("n1", a)
    verdict = filter_with_cache(gu_pod("b"), cache, NODE)
    assert isinstance(verdict, Reject) and verdict.reason == "invalid node topology data"
    assert score_with_cache(gu_pod("b"), cache, "n1", ScoringStrategy()) == 0
    cache.post_bind("n1", a)
    assert cache.get("n1").fresh and cache.reserved("n1") == frozenset()
    cache.reserve("n1", a)
    cache.unreserve("n1", a)
    assert cache.get("n1").fresh


def test_make_cache_selection_and_changed_nodes() -> None:
    assert isinstance(make_cache(discard_reserved_nodes=True, resync_period_seconds=5), DiscardReservedCache)
    assert isinstance(make_cache(resync_period_seconds=0), PassthroughCache)
    over = make_cache(resync_period_seconds=7, initial=[topo(4)])
    assert isinstance(over, OverReserveCache) and over.config.resync_period_seconds == 7
    assert over.drain_changed() == {"n1"}
    assert over.drain_changed() == set()
    over.reserve("n1", gu_pod())
    assert over.drain_changed() == {"n1"}


def test_exclusive_resources_definition() -> None:
    from numaplane.placement.model.requests import is_exclusive, pod_has_exclusive_resources
    from numaplane.resources.quantity import parse_quantity as q

    names = frozenset({"cpu", "memory", "vendor/nic"})
    assert is_exclusive("Guaranteed", "cpu", q("2"), names)
    assert not is_exclusive("Guaranteed", "cpu", q("1500m"), names)
    assert not is_exclusive("Burstable", "cpu", q("2"), names)
    assert is_exclusive("Guaranteed", "hugepages-2Mi", q("2Mi"), names)
    assert is_exclusive("BestEffort", "vendor/nic", q("1"), names)  # devices: any QoS, if the NRT lists them
    assert not is_exclusive("BestEffort", "vendor/other", q("1"), names)
    # regular init containers are skipped, sidecars count
    init_only = pod(
        "p",
        [container("app", {"vendor/other": 1}, guaranteed=False)],
        init=[container("i", {"vendor/nic": 1}, guaranteed=False)],
    )
    assert not pod_has_exclusive_resources(init_only, names)
    sidecar = pod(
        "p",
        [container("app", {"vendor/other": 1}, guaranteed=False)],
        init=[container("s", {"vendor/nic": 1}, guaranteed=False, restartPolicy="Always")],
    )
    assert pod_has_exclusive_resources(sidecar, names)
