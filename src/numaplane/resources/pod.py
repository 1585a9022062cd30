"""Pods as the resource managers and the scheduler see them: requests, limits, QoS, init rules.

:func:`parse_pod` turns core/v1 Pod JSON into frozen values; malformed input raises
:class:`PodSpecError` naming the field. Quantities are exact (:class:`Quantity`).

Rules implemented (upstream references in parentheses):

* QoS class (``pkg/apis/core/v1/helper/qos.GetPodQOS``): ``status.qosClass`` wins when set; otherwise
  only ``cpu`` and ``memory`` count, zero quantities are ignored, requests and limits are summed over
  init and app containers; no requests and no limits → BestEffort; Guaranteed when every container
  has non-zero cpu and memory limits and the summed requests equal the summed limits for the same
  set of resources; otherwise Burstable. Pod-level ``spec.resources`` (KEP-2837), when present,
  replaces the container sums.
* Effective pod requests (``component-helpers/resource.PodRequests``): the larger of (sum of app
  containers + restartable sidecars) and, for each init container in order, its request plus the
  sidecars started before it; plus ``spec.overhead``.
* Quantities in requests, limits (init and app containers), ``spec.overhead`` and pod-level
  ``spec.resources`` must be >= 0 (``ValidateResourceRequirements`` / ``ValidateNonnegativeQuantity``:
  the API server refuses such a pod, so it never exists); :func:`parse_pod` raises
  :class:`PodSpecError` naming the quantity, e.g. ``spec.containers[1].resources.requests.cpu``.
  Pods built directly from :class:`Pod` / :class:`Container` are not checked.
* A Pod read from a user's file goes through :func:`~numaplane.resources.manifest.pod_from_manifest`
  (the API server's defaulting and validation first).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from fractions import Fraction
from functools import cached_property
from typing import Any, Literal

from numaplane.resources.errors import PodSpecError, QuantityError
from numaplane.resources.quantity import Quantity, parse_quantity

__all__ = [
    "Container",
    "Pod",
    "QOSClass",
    "ResourceList",
    "add_resources",
    "max_resources",
    "parse_pod",
    "parse_resource_list",
    "parse_shared_resource_list",
]

QOSClass = Literal["Guaranteed", "Burstable", "BestEffort"]
ResourceList = Mapping[str, Quantity]
_QOS_RESOURCES = ("cpu", "memory")


@dataclass(frozen=True, slots=True)
class Container:
    """One container of a pod. ``init`` marks an init container, ``sidecar`` a restartable one.

    ``claims``: the DRA claims it uses (``resources.claims``) as ``(pod claim name, request name)``
    pairs; the request is ``""`` when the container uses every request of the claim."""

    name: str
    requests: ResourceList = field(default_factory=dict)
    limits: ResourceList = field(default_factory=dict)
    init: bool = False
    restart_policy: str | None = None
    claims: tuple[tuple[str, str], ...] = ()

    @property
    def sidecar(self) -> bool:
        """A restartable init container (``restartPolicy: Always``), i.e. a native sidecar."""
        return self.init and self.restart_policy == "Always"

    def request(self, resource: str) -> Quantity | None:
        return self.requests.get(resource)


@dataclass(frozen=True)
class Pod:
    """A pod's identity, scheduling fields and containers. ``raw`` keeps the source document.

    Immutable; derived values (QoS class, effective requests) are computed on first use and kept in
    the instance ``__dict__`` (not fields: equality, hashing and :func:`dataclasses.replace` ignore
    them, and a replaced pod computes its own)."""

    uid: str
    name: str
    namespace: str = "default"
    init_containers: tuple[Container, ...] = ()
    containers: tuple[Container, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    overhead: ResourceList = field(default_factory=dict)
    pod_requests_spec: ResourceList | None = None
    pod_limits_spec: ResourceList | None = None
    status_qos_class: str | None = None
    node_name: str = ""
    scheduler_name: str = "default-scheduler"
    phase: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    def with_changes(self, **changes: Any) -> Pod:
        """``dataclasses.replace(self, **changes)``, faster, keeping the derived values (QoS class,
        effective requests) when no field they depend on changes (e.g. node name, phase, scheduler)."""
        unknown = changes.keys() - _FIELDS
        if unknown:
            raise TypeError(f"Pod has no field(s) {sorted(unknown)}")
        new = object.__new__(Pod)
        state = dict(self.__dict__)
        if not changes.keys().isdisjoint(_RESOURCE_FIELDS):
            for derived in _DERIVED:
                state.pop(derived, None)
        state.update(changes)
        new.__dict__.update(state)
        return new

    def all_containers(self) -> tuple[Container, ...]:
        """Init containers first (in order), then app containers: the kubelet's admission order."""
        return self.init_containers + self.containers

    def container(self, name: str) -> Container | None:
        for c in self.all_containers():
            if c.name == name:
                return c
        return None

    @cached_property
    def qos_class(self) -> QOSClass:
        """The QoS class (computed once per pod: a pod's fields never change)."""
        if self.status_qos_class in ("Guaranteed", "Burstable", "BestEffort"):
            return self.status_qos_class  # type: ignore[return-value]
        return compute_qos(self)

    def effective_requests(self, *, include_overhead: bool = True) -> dict[str, Quantity]:
        """Pod-level requests as the scheduler and kubelet account them (see module docstring).

        Computed once per pod and flag (a pod's fields never change); every call returns a new dict.
        """
        memo: dict[bool, dict[str, Quantity]] = self.__dict__.setdefault("_requests_memo", {})
        reqs = memo.get(include_overhead)
        if reqs is None:
            reqs = memo[include_overhead] = self._effective_requests(include_overhead)
        return dict(reqs)

    def _effective_requests(self, include_overhead: bool) -> dict[str, Quantity]:
        if self.pod_requests_spec is not None:
            reqs = dict(self.pod_requests_spec)
        else:
            reqs = {}
            for c in self.containers:
                reqs = add_resources(reqs, c.requests)
            sidecars: dict[str, Quantity] = {}
            init_max: dict[str, Quantity] = {}
            for c in self.init_containers:
                if c.sidecar:
                    reqs = add_resources(reqs, c.requests)
                    sidecars = add_resources(sidecars, c.requests)
                    step = sidecars
                else:
                    step = add_resources(c.requests, sidecars)
                init_max = max_resources(init_max, step)
            reqs = max_resources(reqs, init_max)
        if include_overhead and self.overhead:
            reqs = add_resources(reqs, self.overhead)
        return reqs


_FIELDS = frozenset(f.name for f in fields(Pod))
# the fields the derived values read, and where those values are kept
_RESOURCE_FIELDS = frozenset(
    {"init_containers", "containers", "overhead", "pod_requests_spec", "pod_limits_spec", "status_qos_class"}
)
_DERIVED = ("qos_class", "_requests_memo")


def compute_qos(pod: Pod) -> QOSClass:
    """``GetPodQOS`` from the spec (ignores ``status.qosClass``)."""
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    if pod.pod_requests_spec is not None or pod.pod_limits_spec is not None:
        sources: Iterable[tuple[ResourceList, ResourceList]] = [
            (pod.pod_requests_spec or {}, pod.pod_limits_spec or {})
        ]
    else:
        sources = [(c.requests, c.limits) for c in pod.all_containers()]
    for reqs, lims in sources:
        for name in _QOS_RESOURCES:
            q = reqs.get(name)
            if q is not None and q.amount:
                total = requests.get(name)  # sums start at the first amount: no Fraction(0) + ...
                requests[name] = q.amount if total is None else total + q.amount
        found = 0
        for name in _QOS_RESOURCES:
            q = lims.get(name)
            if q is not None and q.amount:
                found += 1
                total = limits.get(name)
                limits[name] = q.amount if total is None else total + q.amount
        if found != len(_QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed:
        for name, amount in requests.items():
            if limits.get(name) != amount:
                guaranteed = False
                break
    if guaranteed and len(requests) == len(limits):
        return "Guaranteed"
    return "Burstable"


def add_resources(a: ResourceList, b: ResourceList) -> dict[str, Quantity]:
    out = dict(a)
    for name, q in b.items():
        out[name] = out[name] + q if name in out else q
    return out


def max_resources(a: ResourceList, b: ResourceList) -> dict[str, Quantity]:
    out = dict(a)
    for name, q in b.items():
        if name not in out or out[name].amount < q.amount:
            out[name] = q
    return out


def parse_resource_list(doc: Any, path: str) -> dict[str, Quantity]:
    """A ``{name: quantity}`` map; raise :class:`PodSpecError` naming the bad entry."""
    if doc is None:
        return {}
    if not isinstance(doc, Mapping):
        raise PodSpecError(path, "expected a map of resource name to quantity")
    out: dict[str, Quantity] = {}
    for name, value in doc.items():
        if not isinstance(name, str) or not name:
            raise PodSpecError(path, f"invalid resource name {name!r}")
        try:
            out[name] = parse_quantity(value)
        except QuantityError as exc:
            raise PodSpecError(f"{path}.{name}", str(exc)) from exc
    return out


# Parsed resource lists of equal content held once (issue 30: memory): the Nodes of one machine type
# list equal allocatable maps, and each Node's is parsed twice (the NUMA filter's NodeInfo and the basic
# predicates' BasicNode). Keyed by the items (strings); the parsed maps are never modified (callers
# hold them as read-only Mappings). Bounded: cleared when full.
_PARSED_LISTS: dict[tuple[tuple[str, str], ...], Mapping[str, Quantity]] = {}
_PARSED_LISTS_LIMIT = 1 << 12


def parse_shared_resource_list(doc: Any) -> Mapping[str, Quantity] | None:
    """:func:`parse_resource_list` of a map of non-empty names to quantity strings, the same object for
    equal maps; ``None`` when ``doc`` is anything else or a quantity does not parse (the caller then
    parses it its own way, which reports the problem)."""
    if type(doc) is not dict:
        return None
    key = tuple(doc.items())
    if not all(type(name) is str and name and type(value) is str for name, value in key):
        return None
    known = _PARSED_LISTS.get(key)
    if known is not None:
        return known
    try:
        parsed = {name: parse_quantity(value) for name, value in key}
    except QuantityError:
        return None
    if len(_PARSED_LISTS) >= _PARSED_LISTS_LIMIT:
        _PARSED_LISTS.clear()
    _PARSED_LISTS[key] = parsed
    return parsed


def _pod_resource_list(doc: Any, path: str) -> dict[str, Quantity]:
    """:func:`parse_resource_list` for a pod's own quantities, which the API server requires to be >= 0."""
    out = parse_resource_list(doc, path)
    for name, q in out.items():
        if q.amount < 0:
            raise PodSpecError(f"{path}.{name}", f"quantity {doc[name]!r} must be greater than or equal to 0")
    return out


def _parse_container(doc: Any, path: str, init: bool) -> Container:
    if not isinstance(doc, Mapping):
        raise PodSpecError(path, "a container must be an object")
    name = doc.get("name")
    if not isinstance(name, str) or not name:
        raise PodSpecError(f"{path}.name", "missing or not a string")
    resources = doc.get("resources") or {}
    if not isinstance(resources, Mapping):
        raise PodSpecError(f"{path}.resources", "not an object")
    restart = doc.get("restartPolicy")
    if restart is not None and not isinstance(restart, str):
        raise PodSpecError(f"{path}.restartPolicy", "not a string")
    return Container(
        name=name,
        requests=_pod_resource_list(resources.get("requests"), f"{path}.resources.requests"),
        limits=_pod_resource_list(resources.get("limits"), f"{path}.resources.limits"),
        init=init,
        restart_policy=restart,
        claims=_container_claims(resources.get("claims"), f"{path}.resources.claims"),
    )


def _container_claims(doc: Any, path: str) -> tuple[tuple[str, str], ...]:
    """``resources.claims`` as ``(name, request)`` pairs (request ``""``: the whole claim)."""
    if doc is None:
        return ()
    if not isinstance(doc, list):
        raise PodSpecError(path, "not a list")
    out: list[tuple[str, str]] = []
    for i, item in enumerate(doc):
        if not isinstance(item, Mapping):
            raise PodSpecError(f"{path}[{i}]", "not an object")
        name, request = item.get("name"), item.get("request") or ""
        if not isinstance(name, str) or not name:
            raise PodSpecError(f"{path}[{i}].name", "missing or not a string")
        if not isinstance(request, str):
            raise PodSpecError(f"{path}[{i}].request", "not a string")
        out.append((name, request))
    return tuple(out)


def _str_map(doc: Any, path: str) -> dict[str, str]:
    if doc is None:
        return {}
    if not isinstance(doc, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in doc.items()):
        raise PodSpecError(path, "expected a map of strings")
    return dict(doc)


def _opt_str(value: Any, path: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise PodSpecError(path, "not a string")
    return value


def parse_pod(doc: Any) -> Pod:
    """Parse core/v1 Pod JSON. ``metadata.uid`` defaults to ``namespace/name`` when absent."""
    if not isinstance(doc, Mapping):
        raise PodSpecError("$", "a pod must be a JSON object")
    meta = doc.get("metadata") or {}
    spec = doc.get("spec") or {}
    status = doc.get("status") or {}
    if not isinstance(meta, Mapping) or not isinstance(spec, Mapping) or not isinstance(status, Mapping):
        raise PodSpecError("$", "metadata, spec and status must be objects")
    name = meta.get("name", "")
    namespace = meta.get("namespace") or "default"
    if not isinstance(name, str) or not isinstance(namespace, str):
        raise PodSpecError("metadata", "name and namespace must be strings")
    uid = meta.get("uid") or f"{namespace}/{name}"
    if not isinstance(uid, str):
        raise PodSpecError("metadata.uid", "not a string")
    inits = spec.get("initContainers") or []
    apps = spec.get("containers") or []
    if not isinstance(inits, list) or not isinstance(apps, list):
        raise PodSpecError("spec", "containers and initContainers must be lists")
    pod_resources = spec.get("resources")
    pod_reqs = pod_lims = None
    if pod_resources is not None:
        if not isinstance(pod_resources, Mapping):
            raise PodSpecError("spec.resources", "not an object")
        pod_reqs = _pod_resource_list(pod_resources.get("requests"), "spec.resources.requests") or None
        pod_lims = _pod_resource_list(pod_resources.get("limits"), "spec.resources.limits") or None
    qos = status.get("qosClass")
    return Pod(
        uid=uid,
        name=name,
        namespace=namespace,
        init_containers=tuple(_parse_container(c, f"spec.initContainers[{i}]", True) for i, c in enumerate(inits)),
        containers=tuple(_parse_container(c, f"spec.containers[{i}]", False) for i, c in enumerate(apps)),
        labels=_str_map(meta.get("labels"), "metadata.labels"),
        annotations=_str_map(meta.get("annotations"), "metadata.annotations"),
        overhead=_pod_resource_list(spec.get("overhead"), "spec.overhead"),
        pod_requests_spec=pod_reqs,
        pod_limits_spec=pod_lims,
        status_qos_class=qos if isinstance(qos, str) else None,
        node_name=_opt_str(spec.get("nodeName"), "spec.nodeName") or "",
        scheduler_name=_opt_str(spec.get("schedulerName"), "spec.schedulerName") or "default-scheduler",
        phase=_opt_str(status.get("phase"), "status.phase") or "",
        raw=doc,
    )
