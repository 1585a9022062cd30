"""Leader election on a ``coordination.k8s.io/v1`` Lease, with client-go's algorithm.

* **Acquire**: every ``retry_period_seconds`` (plus jitter) try to take the lease. It can be taken
  when it does not exist, has no holder (released), is ours, or has expired. Expiry is judged with
  the *local* clock from the moment this elector last saw the lease record change, plus the
  record's ``leaseDurationSeconds`` — never by comparing the other holder's timestamps with our
  wall clock, so clock skew between nodes does not matter.
* **Renew**: while leading, write ``renewTime`` every ``retry_period_seconds``, in a task of its own.
  A failed or unanswered attempt is retried inside the renew deadline: one attempt may use at most
  half of what is left of the deadline (and at least a retry period), so a request stuck on a dead
  connection is abandoned in time for another one. If no renewal has succeeded for
  ``renew_deadline_seconds``, leadership is lost: the ``on_started_leading`` task is cancelled,
  ``on_stopped_leading`` is called and :meth:`LeaderElector.run` returns (callers normally exit the
  process, as client-go users do). The loss is logged with its cause (the last attempt's error,
  the number of attempts, how late the event loop woke the renewal).
* **A starved event loop** (CPU-bound work, a loaded node) wakes the renewal late. Time the loop
  could not run is not a failed renewal: if the deadline passed while no attempt could be made,
  one attempt is still made as long as the lease has not expired (``lease_duration_seconds`` since
  the last renewal, less one retry period of margin). That is safe: every write is conditional,
  so a renewal only succeeds when nobody took the lease over in between. A late wake-up is logged
  (``event loop blocked``).
* **Release**: when :meth:`LeaderElector.run` is cancelled while leading and
  ``release_on_cancel`` is set, the holder is cleared so another candidate takes over at once.

Every write is a conditional ``replace`` (the read's ``resourceVersion``): two candidates
racing for an expired lease cannot both win; the loser gets a 409 and retries.
Invariant (with sane clocks): ``lease_duration > renew_deadline > retry_period``, so a leader
gives up before any other candidate may consider the lease expired.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from numaplane.kube.clock import Clock, SystemClock, format_micro_time
from numaplane.kube.errors import AlreadyExists, Conflict, KubeError, NotFound
from numaplane.kube.port import JsonObj, KubePort
from numaplane.kube.resources import LEASE
from numaplane.supervisor import Supervisor

__all__ = ["LeaderElectionConfig", "LeaderElector"]

log = logging.getLogger(__name__)

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class LeaderElectionConfig:
    """Which lease, who we are, and the timings (seconds)."""

    lease_name: str
    namespace: str
    identity: str
    lease_duration_seconds: float = 15.0
    renew_deadline_seconds: float = 10.0
    retry_period_seconds: float = 2.0
    jitter_factor: float = 1.2
    release_on_cancel: bool = True

    def __post_init__(self) -> None:
        if not self.identity:
            raise ValueError("leader election needs a non-empty identity")
        if not self.lease_duration_seconds > self.renew_deadline_seconds:
            raise ValueError("lease_duration_seconds must exceed renew_deadline_seconds")
        if not self.renew_deadline_seconds > self.retry_period_seconds:
            raise ValueError("renew_deadline_seconds must exceed retry_period_seconds")
        if self.jitter_factor < 1.0:
            raise ValueError("jitter_factor must be at least 1.0 (1.0: no jitter)")


def _signature(spec: JsonObj) -> tuple[Any, ...]:
    return (
        spec.get("holderIdentity") or "",
        spec.get("renewTime"),
        spec.get("acquireTime"),
        spec.get("leaseTransitions"),
        spec.get("leaseDurationSeconds"),
    )


class LeaderElector:
    """Runs the election for one candidate (see the module docstring).

    Callbacks: ``on_started_leading`` is started as a task when leadership is acquired and cancelled
    when it is lost; ``on_stopped_leading`` is called once after leadership ends; ``on_new_leader``
    is called with the holder's identity whenever the observed holder changes.
    """

    def __init__(
        self,
        kube: KubePort,
        config: LeaderElectionConfig,
        *,
        clock: Clock | None = None,
        on_started_leading: Callable[[], Awaitable[None]] | None = None,
        on_stopped_leading: Callable[[], None] | None = None,
        on_new_leader: Callable[[str], None] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.kube = kube
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.on_new_leader = on_new_leader
        self._rng = rng or random.Random()
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._observed_record: JsonObj | None = None
        self._leading = False
        self.leader: str | None = None
        self.transitions_seen = 0
        #: why leadership was lost (empty while leading or before)
        self.lost_cause = ""
        self._failure = ""

    @property
    def is_leader(self) -> bool:
        return self._leading

    # ------------------------------------------------------------------ run

    async def run(self) -> None:
        """Acquire, lead while renewals succeed, then return (leadership lost). Cancel to stop.

        While leading, ``on_started_leading`` and the renewals are the two children of a
        :class:`~numaplane.supervisor.Supervisor`: losing the lease cancels (and awaits) the leading
        work; leading work that fails stops the renewals, releases the lease and raises
        :class:`~numaplane.supervisor.TaskFailed` (a leader whose work died must not keep the lease).
        """
        try:
            await self._acquire()
            self._leading = True
            log.info("leader election %s: %s is leading", self.config.lease_name, self.config.identity)
            async with Supervisor(f"leader-{self.config.lease_name}") as tasks:
                if self.on_started_leading is not None:
                    tasks.spawn(self._lead(self.on_started_leading), "lead")
                tasks.spawn(self._renew_then_stop(tasks), "renew")
                await tasks.wait()
            log.warning(
                "leader election %s: %s lost the lease: %s",
                self.config.lease_name,
                self.config.identity,
                self.lost_cause or "the renewals stopped",
            )
        finally:
            was_leading, self._leading = self._leading, False
            if was_leading:
                if self.config.release_on_cancel:
                    with contextlib.suppress(Exception):
                        await asyncio.shield(self._release())
                if self.on_stopped_leading is not None:
                    try:
                        self.on_stopped_leading()
                    except Exception:
                        log.exception("on_stopped_leading failed")

    @staticmethod
    async def _lead(callback: Callable[[], Awaitable[None]]) -> None:
        await callback()

    async def _renew_then_stop(self, tasks: Supervisor) -> None:
        self.lost_cause = await self._renew_until_lost()
        tasks.stop()

    async def _acquire(self) -> None:
        while True:
            if await self._try_acquire_or_renew():
                return
            await self.clock.sleep(self._jittered(self.config.retry_period_seconds))

    async def _renew_until_lost(self) -> str:
        """Renew every retry period; return the cause once no renewal succeeded for the renew deadline."""
        cfg = self.config
        last_renew = self.clock.monotonic()
        while True:
            planned = self.clock.monotonic() + cfg.retry_period_seconds
            await self.clock.sleep(cfg.retry_period_seconds)
            late = self.clock.monotonic() - planned
            if late >= cfg.retry_period_seconds:
                log.warning(
                    "leader election %s: event loop blocked: the renewal woke %.1f s late (%.1f s since the last renewal)",
                    cfg.lease_name,
                    late,
                    self.clock.monotonic() - last_renew,
                )
            attempts = 0
            cause = ""
            while True:
                elapsed = self.clock.monotonic() - last_renew
                left = cfg.renew_deadline_seconds - elapsed
                if left <= 0:
                    # starved past the deadline without a single attempt: one attempt while the lease holds
                    left = cfg.lease_duration_seconds - cfg.retry_period_seconds - elapsed if attempts == 0 else 0.0
                    if left <= 0:
                        return (
                            f"no renewal succeeded for {elapsed:.1f} s (renew deadline {cfg.renew_deadline_seconds:g} s;"
                            f" {attempts} attempt(s), the loop woke {max(late, 0.0):.1f} s late)"
                            + (f"; last attempt: {cause}" if cause else "")
                        )
                    budget = left
                else:
                    budget = max(min(left, cfg.retry_period_seconds), left / 2)
                attempts += 1
                started = self.clock.monotonic()
                self._failure = ""
                try:
                    renewed = await self._within(self._try_acquire_or_renew(), budget)
                except TimeoutError:
                    renewed = False
                    self._failure = f"no answer within {budget:.1f} s"
                if renewed:
                    last_renew = self.clock.monotonic()
                    if attempts > 1:
                        log.info("leader election %s: renewed after %d attempts", cfg.lease_name, attempts)
                    break
                cause = self._failure or "not renewed"
                log.warning("leader election %s: renewal attempt %d failed: %s", cfg.lease_name, attempts, cause)
                if self.leader not in (None, cfg.identity):
                    return f"the lease is held by {self.leader}"
                if self.clock.monotonic() - started < cfg.retry_period_seconds:
                    left = last_renew + cfg.renew_deadline_seconds - self.clock.monotonic()
                    if left > 0:
                        await self.clock.sleep(min(cfg.retry_period_seconds, left))

    async def _within(self, coro: Awaitable[R], seconds: float) -> R:
        """Await ``coro`` but give up (TimeoutError) after ``seconds`` of the injected clock."""
        work = asyncio.ensure_future(coro)
        timer = asyncio.ensure_future(self.clock.sleep(seconds))
        try:
            await asyncio.wait({work, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
        if not work.done():
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await work
            raise TimeoutError
        return work.result()

    def _jittered(self, seconds: float) -> float:
        if self.config.jitter_factor <= 1.0:
            return seconds
        return seconds * (1.0 + self._rng.random() * (self.config.jitter_factor - 1.0))

    # ------------------------------------------------------------------ one attempt

    def _record(self, transitions: int, acquire_time: str, now: str) -> JsonObj:
        return {
            "holderIdentity": self.config.identity,
            "leaseDurationSeconds": max(1, math.ceil(self.config.lease_duration_seconds)),
            "acquireTime": acquire_time,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    def _observe(self, spec: JsonObj) -> None:
        signature = _signature(spec)
        if signature != self._observed:
            self._observed = signature
            self._observed_at = self.clock.monotonic()
            self._observed_record = dict(spec)
        holder = spec.get("holderIdentity") or None
        if holder != self.leader:
            self.leader = holder
            if holder is not None:
                self.transitions_seen += 1
                if self.on_new_leader is not None:
                    try:
                        self.on_new_leader(holder)
                    except Exception:
                        log.exception("on_new_leader failed")

    async def _try_acquire_or_renew(self) -> bool:
        cfg = self.config
        now = format_micro_time(self.clock.now())
        try:
            lease = await self.kube.get(LEASE, cfg.lease_name, namespace=cfg.namespace)
        except NotFound:
            fresh = self._record(0, now, now)
            try:
                await self.kube.create(
                    LEASE, {"metadata": {"name": cfg.lease_name, "namespace": cfg.namespace}, "spec": fresh}
                )
            except (AlreadyExists, Conflict):
                self._failure = "the lease was created by another candidate"
                return False
            except KubeError as exc:
                log.info("leader election %s: create failed: %s", cfg.lease_name, exc)
                self._failure = f"create failed: {exc}"
                return False
            self._observe(fresh)
            return True
        except KubeError as exc:
            log.info("leader election %s: get failed: %s", cfg.lease_name, exc)
            self._failure = f"get failed: {type(exc).__name__}: {exc}"
            return False

        spec: JsonObj = dict(lease.get("spec") or {})
        self._observe(spec)
        holder = spec.get("holderIdentity") or ""
        duration = float(spec.get("leaseDurationSeconds") or cfg.lease_duration_seconds)
        ours = holder == cfg.identity
        if holder and not ours and self._observed_at + duration > self.clock.monotonic():
            self._failure = f"the lease is held by {holder}"
            return False  # someone else holds a lease that has not expired in our eyes
        transitions = int(spec.get("leaseTransitions") or 0)
        if ours:
            record = self._record(transitions, str(spec.get("acquireTime") or now), now)
        else:
            record = self._record(transitions + 1, now, now)
        updated = dict(lease, spec=record)
        try:
            await self.kube.replace(LEASE, updated)
        except Conflict:
            self._failure = "update conflict: the lease changed since it was read"
            return False
        except KubeError as exc:
            log.info("leader election %s: update failed: %s", cfg.lease_name, exc)
            self._failure = f"update failed: {type(exc).__name__}: {exc}"
            return False
        self._observe(record)
        return True

    async def _release(self) -> None:
        cfg = self.config
        lease = await self.kube.get(LEASE, cfg.lease_name, namespace=cfg.namespace)
        spec = dict(lease.get("spec") or {})
        if spec.get("holderIdentity") != cfg.identity:
            return
        now = format_micro_time(self.clock.now())
        released = {
            "leaseDurationSeconds": 1,
            "renewTime": now,
            "acquireTime": now,
            "leaseTransitions": spec.get("leaseTransitions", 0),
        }
        await self.kube.replace(LEASE, dict(lease, spec=released))
        log.info("leader election %s: %s released the lease", cfg.lease_name, cfg.identity)
