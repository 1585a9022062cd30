"""Apply a rendered desired state with server-side apply, and prune what is no longer wanted.

* One field manager (:data:`FIELD_MANAGER`), ``force=True``: the operator owns what it renders.
* Writes only what changed: each applied object carries :data:`APPLIED_HASH` (SHA-256 of its
  canonical JSON as rendered). An object is re-applied when it is missing, when its hash differs
  (our rendering changed, including fields we stopped setting, which SSA then removes), or when a
  rendered field's live value differs (someone edited a field we own). So a second reconcile of an
  unchanged state writes nothing.
* Shared objects (``create_only``, e.g. the NodeResourceTopology CRD, which the upstream NUMA Resources
  Operator, NFD or an admin may own too) are created when missing and otherwise left alone: applying
  them with ``force`` would take their fields from the other owner at every reconcile, and both
  controllers would fight over the object.
* Pruning deletes objects carrying our ``managed-by`` label and the owner's label that the current
  rendering does not contain, kind by kind; the namespace and the NRT CRD never carry these labels.
* API errors surface as :class:`~numaplane.kube.errors.KubeError`; the controller retries with backoff.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from numaplane.kube.errors import NotFound
from numaplane.kube.port import KubePort
from numaplane.kube.resources import (
    CLUSTER_ROLE,
    CLUSTER_ROLE_BINDING,
    CONFIG_MAP,
    CRD,
    DAEMON_SET,
    DEPLOYMENT,
    NAMESPACE,
    NETWORK_POLICY,
    ROLE,
    ROLE_BINDING,
    SERVICE,
    SERVICE_ACCOUNT,
    Resource,
)
from numaplane.operator.api.meta import GROUP
from numaplane.operator.render_common import LABEL_MANAGED_BY, LABEL_OWNER, MANAGED_BY

__all__ = ["APPLIED_HASH", "FIELD_MANAGER", "PRUNABLE", "Applier", "SyncResult", "needs_apply", "object_id"]

FIELD_MANAGER = "numaplane-operator"
APPLIED_HASH = f"{GROUP}/applied-hash"
KIND_RESOURCES: dict[str, Resource] = {
    r.kind: r
    for r in (
        NAMESPACE,
        CRD,
        SERVICE_ACCOUNT,
        CLUSTER_ROLE,
        CLUSTER_ROLE_BINDING,
        ROLE,
        ROLE_BINDING,
        CONFIG_MAP,
        SERVICE,
        NETWORK_POLICY,
        DAEMON_SET,
        DEPLOYMENT,
    )
}
#: Kinds the operator prunes (namespaced ones in the install and node namespaces only), in deletion order.
PRUNABLE: tuple[Resource, ...] = (
    DAEMON_SET,
    DEPLOYMENT,
    CONFIG_MAP,
    SERVICE,
    NETWORK_POLICY,
    ROLE_BINDING,
    ROLE,
    CLUSTER_ROLE_BINDING,
    CLUSTER_ROLE,
    SERVICE_ACCOUNT,
)

ObjectId = tuple[str, str, str]  # kind, namespace ("" if cluster-scoped), name


def object_id(obj: Mapping[str, Any]) -> ObjectId:
    md = obj.get("metadata") or {}
    return str(obj.get("kind", "")), str(md.get("namespace") or ""), str(md.get("name", ""))


def content_hash(obj: Mapping[str, Any]) -> str:
    canonical = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def with_hash(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``obj`` annotated with the hash of ``obj`` itself."""
    out = json.loads(json.dumps(obj))
    out["metadata"].setdefault("annotations", {})[APPLIED_HASH] = content_hash(obj)
    return dict(out)


def is_subset(want: Any, have: Any) -> bool:
    """Every field of ``want`` has the same value in ``have`` (extra fields in ``have`` are fine)."""
    if isinstance(want, Mapping):
        return isinstance(have, Mapping) and all(k in have and is_subset(v, have[k]) for k, v in want.items())
    if isinstance(want, list):
        return (
            isinstance(have, list)
            and len(want) == len(have)
            and all(is_subset(w, h) for w, h in zip(want, have, strict=True))
        )
    return bool(want == have)


def needs_apply(want: Mapping[str, Any], live: Mapping[str, Any] | None) -> bool:
    """Whether applying ``want`` (already carrying its hash) would change ``live``."""
    if live is None:
        return True
    want_hash = want["metadata"]["annotations"][APPLIED_HASH]
    live_hash = ((live.get("metadata") or {}).get("annotations") or {}).get(APPLIED_HASH)
    return want_hash != live_hash or not is_subset({k: v for k, v in want.items() if k != "status"}, live)


@dataclass
class SyncResult:
    """What one sync wrote: applied and pruned object ids, and the live objects after it."""

    applied: list[ObjectId] = field(default_factory=list)
    pruned: list[ObjectId] = field(default_factory=list)
    live: dict[ObjectId, dict[str, Any]] = field(default_factory=dict)


class Applier:
    """Brings the cluster to a desired object list through a :class:`KubePort`."""

    def __init__(self, kube: KubePort, namespaces: str | Sequence[str]) -> None:
        """``namespaces``: where the operator writes (and prunes) namespaced objects."""
        self.kube = kube
        self.namespaces: tuple[str, ...] = (namespaces,) if isinstance(namespaces, str) else tuple(namespaces)

    async def get(self, res: Resource, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        md = obj.get("metadata") or {}
        try:
            return await self.kube.get(res, str(md["name"]), namespace=md.get("namespace") if res.namespaced else None)
        except NotFound:
            return None

    async def sync(
        self,
        desired: Sequence[Mapping[str, Any]],
        *,
        owner_label: str | None,
        keep: Iterable[ObjectId] = (),
        create_only: Iterable[ObjectId] = (),
    ) -> SyncResult:
        """Apply ``desired`` (in order), then prune owned objects neither desired nor in ``keep``.

        Objects in ``create_only`` are applied only when missing (see the module docstring).
        """
        result = SyncResult()
        shared = set(create_only)
        for obj in desired:
            res = KIND_RESOURCES[str(obj["kind"])]
            want = with_hash(obj)
            live = await self.get(res, obj)
            if live is None if object_id(obj) in shared else needs_apply(want, live):
                live = await self.kube.apply(res, want, field_manager=FIELD_MANAGER, force=True)
                result.applied.append(object_id(obj))
            if live is not None:
                result.live[object_id(obj)] = live
        if owner_label is not None:
            wanted = {object_id(o) for o in desired} | set(keep)
            result.pruned = await self.prune(owner_label, wanted)
        return result

    async def prune(self, owner_label: str, wanted: set[ObjectId]) -> list[ObjectId]:
        """Delete objects labelled as ours and owned by ``owner_label`` that are not ``wanted``."""
        selector = f"{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_OWNER}={owner_label}"
        pruned: list[ObjectId] = []
        for res in PRUNABLE:
            for namespace in self.namespaces if res.namespaced else (None,):
                listing = await self.kube.list(res, namespace=namespace, label_selector=selector)
                for obj in listing.items:
                    oid = (res.kind, *object_id(obj)[1:])
                    if oid in wanted:
                        continue
                    try:
                        await self.kube.delete(res, oid[2], namespace=namespace)
                    except NotFound:
                        continue
                    pruned.append(oid)
        return pruned
