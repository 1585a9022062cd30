"""``numaplane scheduler extender``: the NUMA filter, score and bind for the stock kube-scheduler.

Routes (``prefix`` is the ``urlPrefix`` path of the scheduler's ``extenders`` entry, e.g. ``""`` or
``/numaplane``): ``POST <prefix>/filter``, ``POST <prefix>/prioritize``, ``POST <prefix>/bind``; wire
shapes in :mod:`numaplane.scheduler.wire`. A body that cannot be used gets HTTP 400 with
``{"Error": reason}``; an unexpected failure HTTP 500 likewise.

Semantics:

Filter and prioritize read the verdicts and scores of the state's scheduling cycle
(:class:`~numaplane.placement.cycle.Cycle`, the one the standalone scheduler and the simulator drive):
kube-scheduler has already searched, applied its other filters and chosen the candidates, so the
extender asks the cycle about exactly those nodes, one call per verb
(:meth:`Cycle.filter <numaplane.placement.cycle.Cycle.filter>`, :meth:`Cycle.prioritize
<numaplane.placement.cycle.Cycle.prioritize>`).

* **filter** — the NUMA filter of the pod on every node of the request, from the state's cache.
  Node objects always come from our informer, with either ``nodeCacheCapable`` setting: a request
  body never adds or changes a node (a name we do not know fails with ``node not found``), so made-up
  nodes cost nothing and never pass. The nodes that pass are remembered per pod for bind.
  Each rejected node goes to ``FailedNodes`` when preemption could help — the pod would fit the node's
  zones if every zone's ``available`` were back at its ``allocatable`` — and to
  ``FailedAndUnresolvableNodes`` otherwise (the request exceeds what any zone can ever hold, the data is
  untrusted, malformed or missing, the node is unknown, the node lacks a requested resource). The reason
  is the upstream plugin's message (``cannot align container`` ...), so kube-scheduler's aggregated
  ``FailedScheduling`` message reads like the in-tree plugin's. Until the informers have synced, filter
  answers with ``Error`` set (the scheduling attempt is retried) rather than letting every node pass.
  Note: kube-scheduler's own preemption does not consult us (no ``preemptVerb``), so it may evict pods
  that free the wrong zone; FailedNodes only means "eviction could help".
  A pod refused on every node is reported to ``on_refused`` (:class:`~numaplane.scheduler.requeue.RequeueSignal`:
  kube-scheduler is asked to retry it once an NRT change makes it fit).
* **prioritize** — our 0..100 NUMA score scaled to 0..10 (nearest, halves up); a node we reject gets
  the score upstream's Score computes for it (kube-scheduler only asks about nodes that passed), the
  arrays' score of that row (per node only for a Node object too malformed to have a row).
* **bind** — judges the real pod, never a request body: the pod comes from our informer (or is read
  from the API when unknown or recreated), its UID must be the binding's ``PodUID``, and it is bound
  only when it is one of our scheduler names' pods, the node exists, the NUMA filter of *that* pod
  passes on the node now (against the cache of this moment, reservations included), and the node
  passed this extender's last filter for the pod of that same UID. Anything else is refused in
  ``Error`` naming the pod, the node and the reason: the caller may be anyone who can reach the port
  (serve TLS with client-certificate verification, see ``enableHTTPS`` / ``tlsConfig``), and a filter
  body is whatever its sender wrote — a made-up pod with the victim's name and no requests passes
  every node, so a remembered filter alone never opens bind. The pod is reserved in
  the cache, the ``pods/binding`` subresource is created through the kube port, then PostBind (or
  Unreserve when the API refuses, whose message goes back in ``Error``). The reservation precedes the
  API call, so a filter request for the next pod arriving while the binding is in flight already sees
  it: this is how the over-reserve cache learns placements synchronously. Configure ``bindVerb``.

Run one replica: each replica has its own cache, and kube-scheduler calls one URL.

Bodies are bounded (:mod:`numaplane.limits`): at most ``MAX_EXTENDER_BODY_BYTES`` on the wire and
``MAX_EXTENDER_DECODED_BYTES`` once decompressed, read in chunks and refused (HTTP 413) as soon as a limit
is passed; at most ``MAX_EXTENDER_NODES`` nodes per request. A body over 1 MiB once inflated is decoded
in a worker process (:mod:`numaplane.scheduler.decodepool`), so decoding it never stalls the other
requests; when every worker holds a large body already the request gets HTTP 429 with ``Retry-After``,
and HTTP 503 when its worker died (a fresh one replaces it).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import structlog
from aiohttp import web

from numaplane.kube.errors import KubeError, NotFound
from numaplane.kube.port import KubePort
from numaplane.kube.resources import POD
from numaplane.limits import (
    MAX_EXTENDER_BODY_BYTES,
    MAX_EXTENDER_DECODED_BYTES,
    MAX_REMEMBERED_FILTER_NODES,
    MAX_REMEMBERED_FILTERS,
)
from numaplane.policy.dra import DRAError
from numaplane.resources.errors import ResourceError
from numaplane.resources.pod import Pod, parse_pod
from numaplane.scheduler.decodepool import LARGE_BODY_BYTES, RETRY_AFTER_SECONDS, DecodePool, Verb
from numaplane.scheduler.dra import ClaimAllocator, claims_of
from numaplane.scheduler.errors import DecodeBusy, DecodeWorkerLost, ExtenderRequestError
from numaplane.scheduler.metrics import SchedulerMetrics
from numaplane.scheduler.state import SchedulerState
from numaplane.scheduler.wire import (
    BindingArgs,
    ExtenderArgs,
    HostPriority,
    bind_result,
    decode_body,
    encode,
    filter_result,
    parse_binding_args,
    parse_extender_args,
    priority_scores,
)

__all__ = ["NOT_READY", "Extender", "normalize_prefix"]

log = structlog.get_logger("numaplane.scheduler.extender")

NOT_READY = "numaplane extender is not ready: node and NodeResourceTopology caches have not synced yet"
_JSON = "application/json"


def normalize_prefix(prefix: str) -> str:
    """``""`` or ``/a/b`` (leading slash added, trailing slash dropped)."""
    prefix = prefix.strip().rstrip("/")
    if prefix and not prefix.startswith("/"):
        prefix = "/" + prefix
    return prefix


class BodyTooLarge(ExtenderRequestError):
    """A request body over its limit (HTTP 413)."""


class BadContentEncoding(ExtenderRequestError):
    """A body that does not decode as its ``Content-Encoding`` says (HTTP 400, connection closed)."""


#: Request bodies decoded at the same time (each in a worker thread, off the event loop); the others
#: wait their turn. Decoding is bounded per body (:mod:`numaplane.scheduler.wire`), so this bounds the
#: memory all decoding together can take.
MAX_CONCURRENT_DECODES = 2


async def read_body(request: web.Request) -> bytearray:
    """The (decompressed) body, refused as soon as it passes a limit (module docstring)."""
    if request.content_length is not None and request.content_length > MAX_EXTENDER_BODY_BYTES:
        raise BodyTooLarge(f"request body larger than {MAX_EXTENDER_BODY_BYTES} bytes")
    # one growing buffer, never a list of chunks joined at the end (that holds the body twice)
    body = bytearray()
    try:
        async for chunk in request.content.iter_chunked(256 * 1024):
            if len(body) + len(chunk) > MAX_EXTENDER_DECODED_BYTES:
                raise BodyTooLarge(f"request body larger than {MAX_EXTENDER_DECODED_BYTES} bytes once decoded")
            if body:
                # A chunk already buffered (or inflated from what is buffered) is returned without a
                # pause: give the loop a turn per chunk after the first, or reading (and inflating)
                # 48 MiB holds it ~0.2 s. A body of one chunk (every bind, and a filter or prioritize of
                # names) is not held back behind the loop's other work: kube-scheduler's scheduling
                # cycle waits for filter and prioritize.
                await asyncio.sleep(0)
            body += chunk
    except web.RequestPayloadError:  # aiohttp's parser could not inflate it, and reads no more of it
        # The stream holds that error: end it, or aiohttp's drain of an unread body after the response
        # re-raises it and logs a traceback per request.
        request.content.feed_eof()
        encoding = request.headers.get("Content-Encoding", "")
        raise BadContentEncoding(f"request body is not valid {_short(encoding, 32)!r} content") from None
    return body


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


#: Replies larger than this are written in slices of this size, each drained before the next.
REPLY_SLICE_BYTES = 256 * 1024


def _json_response(doc: Any, status: int = 200) -> web.Response:
    """The encoded ``doc``. A large reply (a filter echoing 15,000 Node objects is ~47 MiB) is written in
    slices of one view of it, so no copy of it is made on the way out: aiohttp copies a ``bytes`` body
    when it clips it to its length, and the event loop's transport copies whatever the socket does not
    take at once (issue 25 item 1: peak memory at most 2 x idle + the body)."""
    body = encode(doc)
    if len(body) <= REPLY_SLICE_BYTES:
        return web.Response(status=status, body=body, content_type=_JSON)
    response = web.Response(status=status, body=_slices(memoryview(body)), content_type=_JSON)
    response.headers["Content-Length"] = str(len(body))
    return response


async def _slices(view: memoryview) -> AsyncIterator[memoryview]:
    for start in range(0, len(view), REPLY_SLICE_BYTES):
        yield view[start : start + REPLY_SLICE_BYTES]
        await asyncio.sleep(0)  # a turn for the loop per slice (the socket may take each one at once)


class Extender:
    """The extender verbs over a :class:`SchedulerState` (module docstring).

    ``ready()`` says whether the informers have synced. The verb methods (:meth:`filter`,
    :meth:`prioritize`, :meth:`bind`) take parsed arguments and return the reply documents; the HTTP
    handlers around them only decode, time and encode.
    """

    def __init__(
        self,
        state: SchedulerState,
        kube: KubePort,
        metrics: SchedulerMetrics,
        *,
        ready: Callable[[], bool],
        on_refused: Callable[[Pod], None] | None = None,
        dra: ClaimAllocator | None = None,
        decode_pool: DecodePool | None = None,
    ) -> None:
        self.state = state
        #: Decodes bodies over :data:`~numaplane.scheduler.decodepool.LARGE_BODY_BYTES` out of process
        #: (``None``: every body in process, in a thread).
        self.decode_pool = decode_pool
        self.dra = dra
        self.kube = kube
        self.metrics = metrics
        self.ready = ready
        self.on_refused = on_refused
        # pod key -> (the filtered pod's UID, nodes that passed its last filter); bounded: entries and
        # names, oldest dropped
        self._passed: OrderedDict[str, tuple[str, frozenset[str]]] = OrderedDict()
        self._passed_names = 0
        self._decoding = asyncio.Semaphore(MAX_CONCURRENT_DECODES)

    # --- verbs -------------------------------------------------------------------------------------

    def _remember(self, key: str, uid: str, passing: frozenset[str]) -> None:
        self._forget_filter(key)
        self._passed[key] = (uid, passing)
        self._passed_names += len(passing)
        while self._passed and (
            len(self._passed) > MAX_REMEMBERED_FILTERS or self._passed_names > MAX_REMEMBERED_FILTER_NODES
        ):
            _key, (_uid, dropped) = self._passed.popitem(last=False)
            self._passed_names -= len(dropped)

    def _forget_filter(self, key: str) -> None:
        old = self._passed.pop(key, None)
        if old is not None:
            self._passed_names -= len(old[1])

    def filter(self, args: ExtenderArgs) -> dict[str, Any]:
        """The ``ExtenderFilterResult`` for ``args`` (module docstring)."""
        if not self.ready():
            return filter_result(args, [], {}, {}, NOT_READY)
        pod = args.pod
        names = args.names
        answer = self.state.cycle.filter(pod, names, self.state.unusable_node, mark=True)
        reasons, preemptible = answer.reasons, answer.preemptible
        failed_at, unknown_at = answer.failed, ~answer.known
        to_unresolvable = failed_at & ~preemptible
        failed = dict(zip(answer.names[preemptible].tolist(), reasons[preemptible].tolist(), strict=True))
        unresolvable: dict[str, str] = dict(
            zip(answer.names[to_unresolvable].tolist(), reasons[to_unresolvable].tolist(), strict=True)
        )
        for name in answer.names[unknown_at].tolist():
            unresolvable[name] = "node not found"
        passing = answer.names[answer.feasible].tolist()
        if self.dra is not None and passing and claims_of(pod):
            passing = self._dra_filter(pod, passing, unresolvable)
        self._remember(pod.key, pod.uid, frozenset(passing))
        result = filter_result(args, passing, failed, unresolvable)
        if not passing and names and self.on_refused is not None:
            self.on_refused(pod)
        log.debug(
            "filter",
            pod=pod.key,
            podUID=pod.uid,
            passing=len(passing),
            failed=failed,
            unresolvable=unresolvable,
        )
        return result

    def _dra_filter(self, pod: Pod, passing: list[str], unresolvable: dict[str, str]) -> list[str]:
        """``--dra``: the passing nodes where a zone holds the pod's CPUs and memory and a free device
        of each claim (:meth:`ClaimAllocator.place` per node); claims it cannot read are left to
        kube-scheduler's DynamicResources plugin (no node is removed for them)."""
        assert self.dra is not None
        try:
            demand = self.dra.demand(pod)
        except DRAError as exc:
            log.debug("dra claims not judged", pod=pod.key, reason=str(exc))
            return passing
        views = {n: self.state.gate.get(n, pod).topology for n in passing}
        kept: list[str] = []
        for name in passing:
            placement, why = self.dra.place(pod, demand, [name], views)
            if placement is None:
                unresolvable[name] = why.get(name, "no free devices match the pod's claims")
            else:
                kept.append(name)
        return kept

    def prioritize(self, args: ExtenderArgs) -> list[HostPriority] | None:
        """The ``HostPriorityList`` for ``args``; ``None`` when not ready (the handler answers 503)."""
        if not self.ready():
            return None
        names = args.names
        scores = self.state.cycle.prioritize(args.pod, names, self.state.nodes)
        if log.is_enabled_for(logging.DEBUG):  # the {node: score} map of every candidate is built only to be logged
            log.debug("prioritize", pod=args.pod.key, scores=dict(zip(names, scores.tolist(), strict=True)))
        return priority_scores(names, scores)

    async def _pod_for(self, args: BindingArgs) -> Pod:
        pod = self.state.pods.get(args.key)
        if pod is not None and (not args.pod_uid or pod.uid == args.pod_uid):
            return pod
        doc = await self.kube.get(POD, args.pod_name, namespace=args.pod_namespace)
        try:
            return parse_pod(doc)
        except ResourceError as exc:
            raise ExtenderRequestError(f"pod {args.key} cannot be read: {exc}") from None

    async def bind(self, args: BindingArgs) -> dict[str, Any]:
        """Reserve, create ``pods/binding``, then PostBind or Unreserve; the ``ExtenderBindingResult``."""
        try:
            pod = await self._pod_for(args)
        except NotFound:
            self.metrics.binds.labels(result="error").inc()
            return bind_result(f"pod {args.key} not found")
        except KubeError as exc:
            self.metrics.binds.labels(result="error").inc()
            return bind_result(f"reading pod {args.key}: {exc}")
        if args.pod_uid and pod.uid != args.pod_uid:
            self.metrics.binds.labels(result="error").inc()
            return bind_result(f"pod {args.key} has UID {pod.uid}, not {args.pod_uid}")
        refusal = self._refusal(pod, args.node)
        if refusal:
            self.metrics.binds.labels(result="refused").inc()
            log.warning("bind refused", pod=args.key, podUID=args.pod_uid, node=args.node, reason=refusal)
            return bind_result(refusal)
        assumed = self.state.assume(pod, args.node)
        try:
            await self.kube.bind(args.pod_name, args.node, namespace=args.pod_namespace, pod_uid=args.pod_uid or None)
        except KubeError as exc:
            if assumed:  # a repeated request for a pod already bound must not undo its reservation
                self.state.forget(pod, args.node)
            self.metrics.binds.labels(result="error").inc()
            log.warning("bind failed", pod=args.key, podUID=args.pod_uid, node=args.node, error=str(exc))
            return bind_result(str(exc))
        self.state.bound(pod, args.node)
        self._forget_filter(pod.key)
        self.metrics.binds.labels(result="success").inc()
        log.info("bound", pod=args.key, podUID=pod.uid, node=args.node, flow="bind")
        return bind_result()

    def _refusal(self, pod: Pod, node: str) -> str:
        """Why binding ``pod`` to ``node`` is not ours to do ("" when it is)."""
        if not self.state.is_ours(pod):
            return f"pod {pod.key} has schedulerName {pod.scheduler_name!r}, not one this extender serves"
        if node not in self.state.nodes:
            return f"node {node!r} not found"
        unfit = self._unfit(pod, node)
        if unfit:
            return f"pod {pod.key} does not fit node {node!r}: {unfit}"
        filtered_uid, passed = self._passed.get(pod.key, ("", frozenset()))
        if node not in passed:
            return f"node {node!r} did not pass this extender's filter for pod {pod.key}"
        if filtered_uid != pod.uid:
            return (
                f"this extender's last filter for pod {pod.key} was for UID {filtered_uid or '(none)'!r}, "
                f"not the pod's UID {pod.uid!r}"
            )
        return ""

    def _unfit(self, pod: Pod, node: str) -> str:
        """The NUMA filter's reason for rejecting the real ``pod`` on ``node`` now ("" when it fits).

        No cache feedback (``mark=False``): a bind-time check must not change what the next filter sees.
        """
        answer = self.state.cycle.filter(pod, [node], self.state.unusable_node, mark=False, preemption=False)
        return "" if bool(answer.feasible[0]) else str(answer.reasons[0])

    # --- HTTP --------------------------------------------------------------------------------------

    def add_routes(self, prefix: str = "") -> Callable[[web.Application], None]:
        """A route adder for :class:`~numaplane.observability.http.ProbeServer` serving the three verbs."""
        base = normalize_prefix(prefix)

        def adder(app: web.Application) -> None:
            app.router.add_post(f"{base}/filter", self._wrap("filter", "extender", self._filter))
            app.router.add_post(f"{base}/prioritize", self._wrap("prioritize", "extender", self._prioritize))
            app.router.add_post(f"{base}/bind", self._wrap("bind", "binding", self._bind))

        return adder

    async def _decode_request(self, kind: Verb, body: bytearray) -> Any:
        """The typed arguments of ``body``: a large body in a worker process of :attr:`decode_pool` (it
        never holds this process's GIL), a middle-sized one in a thread (a few ms; module docstring of
        :mod:`numaplane.scheduler.decodepool`), a small one (at most :data:`INLINE_DECODE_BYTES`: every
        bind, and a filter or prioritize of names — kube-scheduler's ``nodeCacheCapable: true`` — for a few
        hundred nodes) right here: tens of microseconds, less than the hop to a thread and back."""
        if self.decode_pool is not None and len(body) > LARGE_BODY_BYTES:
            return await self.decode_pool.decode(kind, body)
        if len(body) <= INLINE_DECODE_BYTES:
            return _decode(_PARSERS[kind], body)
        async with self._decoding:  # decoded in a worker thread: the loop serves other requests
            return await asyncio.to_thread(_decode, _PARSERS[kind], body)

    def _wrap(
        self, verb: str, kind: Verb, handler: Callable[[Any], Awaitable[web.Response]]
    ) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handle(request: web.Request) -> web.Response:
            started = time.perf_counter()
            try:
                body = await read_body(request)
                args = await self._decode_request(kind, body)
                del body
                response = await handler(args)
            except DecodeBusy as exc:
                log.warning("extender request refused: decode workers busy", verb=verb, reason=exc.reason)
                response = _json_response({"Error": exc.reason}, 429)
                response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
            except DecodeWorkerLost as exc:
                log.warning("extender request failed: decode worker lost", verb=verb, reason=exc.reason)
                response = _json_response({"Error": exc.reason}, 503)
            except ExtenderRequestError as exc:
                log.warning("bad extender request", verb=verb, reason=exc.reason)
                response = _json_response({"Error": exc.reason}, 413 if isinstance(exc, BodyTooLarge) else 400)
                if isinstance(exc, BadContentEncoding | BodyTooLarge):
                    response.force_close()  # the rest of the body is unread: the connection cannot be reused
            except Exception as exc:
                log.exception("extender request failed", verb=verb)
                response = _json_response({"Error": f"internal error: {type(exc).__name__}: {exc}"}, 500)
            self.metrics.extender_seconds.labels(verb=verb).observe(time.perf_counter() - started)
            self.metrics.extender_requests.labels(verb=verb, code=str(response.status)).inc()
            return response

        return handle

    async def _filter(self, args: ExtenderArgs) -> web.Response:
        return _json_response(self.filter(args))

    async def _prioritize(self, args: ExtenderArgs) -> web.Response:
        result = self.prioritize(args)
        if result is None:
            return _json_response({"Error": NOT_READY}, 503)
        return _json_response(result)

    async def _bind(self, args: BindingArgs) -> web.Response:
        return _json_response(await self.bind(args))


#: Bodies up to this size (once inflated, bytes) are decoded on the event loop (:meth:`Extender._decode_request`).
INLINE_DECODE_BYTES = 32 * 1024

_PARSERS: dict[str, Callable[[Any], Any]] = {"extender": parse_extender_args, "binding": parse_binding_args}


def _decode(parse: Callable[[Any], Any], body: bytes | bytearray) -> Any:
    """``parse`` of the decoded ``body`` (pure; runs in a worker thread)."""
    return parse(decode_body(body))
