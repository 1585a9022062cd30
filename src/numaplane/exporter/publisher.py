"""Writes the node's NodeResourceTopology object — only when its content changed.

Content, compared semantically (never by ``resourceVersion``): zones (quantities by value, so
``"1Gi"`` equals ``"1073741824"``), top-level attributes, ``topologyPolicies``, our label, our
fingerprint annotation and the owner reference to the Node. The trigger annotation
``k8stopoawareschedwg/rte-update`` (``periodic`` / ``reactive``, as RTE) is written with every
change but is not content, so a periodic scan that finds nothing new writes nothing.

Per :meth:`Publisher.publish`:

1. every body is validated against our CRD's schema (:func:`numaplane.nrt.crd.validation_schema`)
   right before it is sent; a failure is :class:`~numaplane.exporter.errors.InvalidObjectError` and
   nothing is sent (an object already on the server was valid when we wrote it, so skipping a write
   never skips a check);
2. if the mirror of our object is live (see :mod:`numaplane.exporter.mirror`) and shows the same
   content: done, no API call (``unchanged``); if it is live and differs, its copy is used as the
   current object for the first attempt (saving a GET: the write is conditional on its version);
3. otherwise read the object (GET) — on an absent object create it (``create``), on a foreign one
   raise :class:`~numaplane.exporter.errors.ForeignObjectError`, on the same content stop
   (``unchanged``), else replace it conditionally on its ``resourceVersion`` (``update``), keeping
   other managers' labels, annotations, finalizers and owner references;
4. a 409 (stale version, or created meanwhile), a 410, or a 404 on replace (deleted meanwhile)
   restarts at 3, up to ``max_attempts`` times; any other API error is raised at once as
   :class:`~numaplane.exporter.errors.ApiWriteError` (the refresh loop backs off and retries, so the
   publisher never hammers a failing server).

Heartbeat (``heartbeat_seconds``, ``None``: off): every write carries ``numaplane.io/heartbeat``
(the wall-clock time of the write) and ``numaplane.io/stale-after-seconds`` (:attr:`Publisher.stale_after_seconds`,
three heartbeats), and a publish at least ``heartbeat_seconds`` after this publisher's last write
rewrites the object even when its content is unchanged. A scheduler treats an object not rewritten
within its bound as stale (:mod:`numaplane.scheduler.staleness`): an exporter that stops publishing
is visible, and nothing trusts its last object forever. Only the two annotations differ between
heartbeat writes; they are not content (the mirror's echo of one does not trigger another).

Ownership: an object is ours when it carries ``app.kubernetes.io/managed-by: numaplane-exporter``.
One with another ``managed-by`` value is never touched (another exporter owns it: two writers
fighting over one object is a known upstream failure). One without the label (left by the upstream
exporter, or written by hand) is taken over only with ``adopt=True``. An object of ours that does
not parse as a NodeResourceTopology is reported (:class:`~numaplane.exporter.errors.InvalidServerObject`
through ``on_error``) and repaired by the write.

Owner reference: ``{apiVersion: v1, kind: Node, name, uid}``, replacing any previous Node
reference, so the object is garbage-collected with its Node. The Node's uid is read before every
create (a recreated Node has a new uid) and otherwise cached; when it cannot be read the object is
written without the reference and ``node_lookup`` is reported (looked up again at most every
``node_retry_seconds``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import jsonschema  # type: ignore[import-untyped, unused-ignore]
import structlog

from numaplane.exporter.errors import (
    ApiWriteError,
    ExporterError,
    ForeignObjectError,
    InvalidObjectError,
    InvalidServerObject,
)
from numaplane.exporter.scan import MANAGED_BY, MANAGED_BY_LABEL
from numaplane.kube.clock import Clock, SystemClock, format_micro_time
from numaplane.kube.errors import AlreadyExists, Conflict, Gone, KubeError, NotFound
from numaplane.kube.port import JsonObj, KubePort
from numaplane.kube.resources import NODE, NODE_RESOURCE_TOPOLOGY
from numaplane.nrt import fingerprint as fp
from numaplane.nrt.crd import validation_schema
from numaplane.nrt.errors import NRTFormatError
from numaplane.nrt.model import NodeResourceTopology, Zone
from numaplane.nrt.parse import parse_strict

__all__ = ["FIELD_MANAGER", "TRIGGER_ANNOTATION", "Outcome", "PublishResult", "Publisher", "View", "content_key"]

TRIGGER_ANNOTATION: Final = "k8stopoawareschedwg/rte-update"
#: The same names as :mod:`numaplane.scheduler.staleness` (components do not import each other; a test checks).
HEARTBEAT_ANNOTATION: Final = "numaplane.io/heartbeat"
STALE_AFTER_ANNOTATION: Final = "numaplane.io/stale-after-seconds"
#: The staleness bound is this many heartbeats (a missed or slow write is not yet staleness).
HEARTBEATS_PER_BOUND: Final = 3
FIELD_MANAGER: Final = "numaplane-exporter"

#: ``() → (live, object or None)``: the mirror's view of our object (``live`` per the mirror's invariant).
View = Callable[[], tuple[bool, JsonObj | None]]


class Outcome(enum.StrEnum):
    CREATED = "create"
    UPDATED = "update"
    UNCHANGED = "unchanged"


@dataclass(frozen=True, slots=True)
class PublishResult:
    """What :meth:`Publisher.publish` did; ``object`` is the server's copy (``None`` if not read)."""

    outcome: Outcome
    object: JsonObj | None
    api_calls: int


def _zone_key(zone: Zone) -> tuple[Any, ...]:
    return (
        zone.name,
        zone.type,
        zone.parent,
        tuple((c.name, c.value) for c in zone.costs),
        tuple((a.name, a.value) for a in zone.attributes),
        tuple((r.name, r.capacity.amount, r.allocatable.amount, r.available.amount) for r in zone.resources),
    )


def content_key(nrt: NodeResourceTopology) -> tuple[Any, ...]:
    """The object's published content without metadata, quantities compared by value."""
    return (
        tuple(_zone_key(z) for z in nrt.zones),
        tuple((a.name, a.value) for a in nrt.attributes),
        tuple(nrt.topology_policies),
    )


def _node_refs(meta: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [
        o
        for o in meta.get("ownerReferences") or ()
        if isinstance(o, Mapping) and o.get("kind") == "Node" and o.get("apiVersion") == "v1"
    ]


class Publisher:
    """Publishes one node's object through a :class:`~numaplane.kube.port.KubePort` (module docstring)."""

    def __init__(
        self,
        kube: KubePort,
        node_name: str,
        *,
        owner_reference: bool = True,
        adopt: bool = False,
        view: View | None = None,
        on_error: Callable[[ExporterError], None] | None = None,
        max_attempts: int = 4,
        node_retry_seconds: float = 30.0,
        heartbeat_seconds: float | None = None,
        clock: Clock | None = None,
    ) -> None:
        if heartbeat_seconds is not None and not heartbeat_seconds > 0:
            raise ValueError(f"heartbeat_seconds must be positive, not {heartbeat_seconds!r}")
        self.heartbeat_seconds = heartbeat_seconds
        #: Wall time of the heartbeat annotation; monotonic time of the heartbeat and Node-read intervals.
        self.clock: Clock = clock or SystemClock()
        self._last_write_at: float | None = None  # clock.monotonic() of this publisher's last write
        self.kube = kube
        self.node_name = node_name
        self.owner_reference = owner_reference
        self.adopt = adopt
        self.max_attempts = max_attempts
        self.node_retry_seconds = node_retry_seconds
        self._view = view
        self._on_error = on_error or (lambda error: None)
        self._validator = jsonschema.Draft202012Validator(validation_schema("v1alpha2"))
        self._node_uid: str | None = None
        self._node_checked_at: float | None = None
        self.desired: NodeResourceTopology | None = None
        self.last_written: JsonObj | None = None
        self._log = structlog.get_logger("numaplane.exporter").bind(node=node_name)

    @property
    def stale_after_seconds(self) -> int | None:
        """The bound written on every object (whole seconds, at least 1), ``None`` without a heartbeat."""
        if self.heartbeat_seconds is None:
            return None
        return max(1, int(-(-self.heartbeat_seconds * HEARTBEATS_PER_BOUND // 1)))

    def heartbeat_due(self) -> bool:
        """Whether the next publish must write even unchanged content (module docstring)."""
        if self.heartbeat_seconds is None:
            return False
        return self._last_write_at is None or self.clock.monotonic() - self._last_write_at >= self.heartbeat_seconds

    # ------------------------------------------------------------------ content

    def matches(self, obj: Mapping[str, Any] | None) -> bool:
        """Whether ``obj`` (a server object) has the content of the last desired object."""
        if self.desired is None or obj is None:
            return False
        return self._same(obj, self.desired)

    def _same(self, obj: Mapping[str, Any], desired: NodeResourceTopology) -> bool:
        try:
            current = parse_strict(obj)
        except NRTFormatError:
            return False
        if content_key(current) != content_key(desired):
            return False
        labels, notes = current.metadata.labels, current.metadata.annotations
        if any(labels.get(k) != v for k, v in desired.metadata.labels.items()):
            return False
        if any(notes.get(k) != v for k, v in desired.metadata.annotations.items()):
            return False
        if fp.ANNOTATION not in desired.metadata.annotations and fp.ANNOTATION in notes:
            return False
        if self.owner_reference and self._node_uid is not None:
            refs = _node_refs(obj.get("metadata") or {})
            if [(r.get("name"), r.get("uid")) for r in refs] != [(self.node_name, self._node_uid)]:
                return False
        return True

    def validate(self, body: Mapping[str, Any]) -> None:
        """Raise :class:`InvalidObjectError` if ``body`` fails the CRD schema (first error named)."""
        error = jsonschema.exceptions.best_match(self._validator.iter_errors(body))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(root)"
            raise InvalidObjectError(f"computed object fails the CRD schema at {where}: {error.message}")

    # ------------------------------------------------------------------ writing

    async def publish(self, nrt: NodeResourceTopology, *, update_kind: str = "periodic") -> PublishResult:
        """Make the server hold ``nrt``'s content (see the module docstring for the steps)."""
        self.desired = nrt
        calls = 0
        beat = self.heartbeat_due()
        # a live mirror's copy stands in for the first read: the write is conditional on its version anyway
        prefetched: tuple[JsonObj | None] | None = None
        if self._view is not None:
            live, seen = self._view()
            if live and seen is not None and not beat and self._same(seen, nrt):
                return PublishResult(Outcome.UNCHANGED, seen, 0)
            if live:
                prefetched = (seen,)
        last_error: KubeError | None = None
        for _attempt in range(self.max_attempts):
            current: JsonObj | None
            if prefetched is not None:
                (current,), prefetched = prefetched, None
            else:
                try:
                    calls += 1
                    current = await self.kube.get(NODE_RESOURCE_TOPOLOGY, self.node_name)
                except NotFound:
                    current = None
                except (Conflict, Gone) as error:
                    last_error = error
                    continue
                except KubeError as error:
                    raise ApiWriteError(f"reading NodeResourceTopology {self.node_name}: {error}", error) from error
            try:
                if current is None:
                    calls += 1 if await self._refresh_node_uid(force=True) else 0
                    body = self._body(nrt, None, update_kind)
                    self.validate(body)
                    calls += 1
                    written = await self.kube.create(NODE_RESOURCE_TOPOLOGY, body, field_manager=FIELD_MANAGER)
                    self.last_written = written
                    self._last_write_at = self.clock.monotonic()
                    return PublishResult(Outcome.CREATED, written, calls)
                self._check_ownership(current)
                if self._node_uid is None and self.owner_reference:
                    calls += 1 if await self._refresh_node_uid(force=False) else 0
                if not beat and self._same(current, nrt):
                    return PublishResult(Outcome.UNCHANGED, current, calls)
                body = self._body(nrt, current, update_kind)
                self.validate(body)
                calls += 1
                written = await self.kube.replace(NODE_RESOURCE_TOPOLOGY, body, field_manager=FIELD_MANAGER)
                self.last_written = written
                self._last_write_at = self.clock.monotonic()
                return PublishResult(Outcome.UPDATED, written, calls)
            except (AlreadyExists, Conflict, Gone, NotFound) as error:
                last_error = error
                self._log.info("publish_retry", reason=type(error).__name__, error=str(error))
                continue
            except KubeError as error:
                raise ApiWriteError(f"writing NodeResourceTopology {self.node_name}: {error}", error) from error
        assert last_error is not None
        raise ApiWriteError(
            f"writing NodeResourceTopology {self.node_name}: gave up after {self.max_attempts} attempts: {last_error}",
            last_error,
        )

    def _check_ownership(self, current: Mapping[str, Any]) -> None:
        meta = current.get("metadata") or {}
        labels = meta.get("labels") or {}
        manager = labels.get(MANAGED_BY_LABEL) if isinstance(labels, Mapping) else None
        if manager != MANAGED_BY and (manager is not None or not self.adopt):
            who = f"managed by {manager!r}" if manager is not None else f"not labelled {MANAGED_BY_LABEL}={MANAGED_BY}"
            hint = "" if manager is not None else " (start with --adopt to take it over)"
            raise ForeignObjectError(f"NodeResourceTopology {self.node_name} is {who}{hint}; not overwriting")
        try:
            parse_strict(current)
        except NRTFormatError as error:
            self._on_error(InvalidServerObject(f"NodeResourceTopology {self.node_name} on the server: {error}"))

    def _body(self, nrt: NodeResourceTopology, current: Mapping[str, Any] | None, update_kind: str) -> JsonObj:
        body = nrt.to_dict()
        ours = body["metadata"]
        meta: JsonObj = {}
        if current is not None:
            meta = {k: v for k, v in (current.get("metadata") or {}).items() if k != "managedFields"}
        labels = {**(meta.get("labels") or {}), **(ours.get("labels") or {})}
        notes = {**(meta.get("annotations") or {}), **(ours.get("annotations") or {})}
        if fp.ANNOTATION not in (ours.get("annotations") or {}):
            notes.pop(fp.ANNOTATION, None)
        notes[TRIGGER_ANNOTATION] = update_kind
        bound = self.stale_after_seconds
        if bound is not None:
            # a new value at every write: never a no-op update
            notes[HEARTBEAT_ANNOTATION] = format_micro_time(self.clock.now())
            notes[STALE_AFTER_ANNOTATION] = str(bound)
        else:
            notes.pop(HEARTBEAT_ANNOTATION, None)
            notes.pop(STALE_AFTER_ANNOTATION, None)
        owners = [
            o
            for o in meta.get("ownerReferences") or ()
            if not (o.get("kind") == "Node" and o.get("apiVersion") == "v1")
        ]
        if self.owner_reference and self._node_uid is not None:
            owners.append({"apiVersion": "v1", "kind": "Node", "name": self.node_name, "uid": self._node_uid})
        meta.update(name=self.node_name, labels=labels, annotations=notes)
        if owners:
            meta["ownerReferences"] = owners
        else:
            meta.pop("ownerReferences", None)
        body["metadata"] = meta
        return body

    async def _refresh_node_uid(self, *, force: bool) -> bool:
        """Read the Node's uid (see the module docstring); True if an API call was made."""
        if not self.owner_reference:
            return False
        now = self.clock.monotonic()
        if not force and self._node_checked_at is not None and now - self._node_checked_at < self.node_retry_seconds:
            return False
        self._node_checked_at = now
        try:
            node = await self.kube.get(NODE, self.node_name)
        except KubeError as error:
            self._on_error(
                ExporterError(f"cannot read Node {self.node_name} for the owner reference: {error}", kind="node_lookup")
            )
            return True
        uid = (node.get("metadata") or {}).get("uid")
        self._node_uid = str(uid) if uid else None
        return True
