"""Workloads for the simulator: a documented trace format and a seeded generator.

Trace format (YAML or JSON)::

    apiVersion: numaplane.io/v1
    kind: Workload
    pods:
      - name: db                 # name prefix; replicas are named db-0, db-1, ...
        count: 4                 # replicas (default 1)
        arrival: 0               # seconds from the start of the run (default 0)
        interval: 5              # seconds between replicas' arrivals (default 0)
        duration: 600            # seconds each replica runs; omit for "until the end"
        namespace: default
        labels: {app: db}
        annotations: {numaplane.io/cpu-strategy: packed}
        spec:                    # a core/v1 PodSpec (containers, initContainers, overhead...)
          containers:
            - name: main
              resources:
                requests: {cpu: "4", memory: 8Gi}
                limits: {cpu: "4", memory: 8Gi}

An invalid entry raises :class:`WorkloadError` naming the file, the entry and the field; an unknown
field is an error too (as ``kubectl --validate=strict``: a misspelt ``durration`` must not run pods
forever). Times are seconds (floats). Each pod is defaulted and checked as the API server would
(:func:`~numaplane.resources.manifest.pod_from_manifest`): a request missing for a resource is its limit.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from numaplane.limits import MAX_WORKLOAD_PODS
from numaplane.placement.model.effective import effective_placement
from numaplane.resources.errors import PodSpecError
from numaplane.resources.manifest import pod_from_manifest
from numaplane.resources.pod import Pod, parse_pod
from numaplane.resources.podschema import Validation
from numaplane.sim.errors import WorkloadError

__all__ = ["PodArrival", "WorkloadMix", "generate_workload", "parse_workload"]


@dataclass(frozen=True)
class PodArrival:
    """One pod entering the cluster at ``arrival_s``, leaving ``duration_s`` after it starts (None: never)."""

    arrival_s: float
    duration_s: float | None
    pod: Pod
    group: str


def parse_workload(
    doc: Any,
    source: str = "<workload>",
    *,
    validation: Validation = "strict",
    warn: Callable[[str], None] | None = None,
) -> list[PodArrival]:
    """Validate and expand a workload document into arrivals sorted by time (stable).

    Each entry's ``spec`` is checked against the Pod schema of v1.36 once (``validation``, as
    :func:`~numaplane.resources.manifest.pod_from_manifest`; ``warn`` receives the problems of ``"warn"``)."""
    if not isinstance(doc, Mapping):
        raise WorkloadError(source, None, "", "a workload must be a mapping with a 'pods' list")
    for key in doc:
        if key not in _DOCUMENT_FIELDS:
            raise WorkloadError(source, None, str(key), f"unknown field (known: {', '.join(_DOCUMENT_FIELDS)})")
    if doc.get("kind", "Workload") != "Workload":
        raise WorkloadError(source, None, "kind", f"expected 'Workload', got {doc.get('kind')!r}")
    entries = doc.get("pods")
    if not isinstance(entries, list) or not entries:
        raise WorkloadError(source, None, "pods", "missing or empty list")
    arrivals: list[PodArrival] = []
    for i, entry in enumerate(entries):
        arrivals.extend(_expand_entry(entry, i, source, validation, warn))
        if len(arrivals) > MAX_WORKLOAD_PODS:
            raise WorkloadError(source, i, "count", f"the workload asks for more than {MAX_WORKLOAD_PODS} pods")
    arrivals.sort(key=lambda a: a.arrival_s)
    return arrivals


_DOCUMENT_FIELDS = ("apiVersion", "kind", "metadata", "pods")
_ENTRY_FIELDS = ("name", "count", "arrival", "interval", "duration", "namespace", "labels", "annotations", "spec")


def _show(value: Any) -> str:
    """A short repr for an error message (huge integers cannot even be converted to text)."""
    if isinstance(value, int) and value.bit_length() > 64:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 60 else text[:60] + "..."


def _number(entry: Mapping[str, Any], key: str, source: str, i: int, default: float | None) -> float | None:
    value = entry.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise WorkloadError(source, i, key, f"expected a non-negative number of seconds, got {_show(value)}")
    return float(value)


def _prefixed(warn: Callable[[str], None], prefix: str) -> Callable[[str], None]:
    return lambda message: warn(f"{prefix}: {message}")


def _expand_entry(
    entry: Any, i: int, source: str, validation: Validation = "strict", warn: Callable[[str], None] | None = None
) -> list[PodArrival]:
    if not isinstance(entry, Mapping):
        raise WorkloadError(source, i, "", "an entry must be a mapping")
    for key in entry:
        if key not in _ENTRY_FIELDS:
            raise WorkloadError(source, i, str(key), f"unknown field (known: {', '.join(_ENTRY_FIELDS)})")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise WorkloadError(source, i, "name", "missing or not a string")
    count = entry.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise WorkloadError(source, i, "count", f"expected a positive integer, got {_show(count)}")
    if count > MAX_WORKLOAD_PODS:
        raise WorkloadError(source, i, "count", f"at most {MAX_WORKLOAD_PODS} pods, got {_show(count)}")
    arrival = _number(entry, "arrival", source, i, 0.0) or 0.0
    interval = _number(entry, "interval", source, i, 0.0) or 0.0
    duration = _number(entry, "duration", source, i, None)
    spec = entry.get("spec")
    if not isinstance(spec, Mapping):
        raise WorkloadError(source, i, "spec", "missing or not a PodSpec mapping")
    namespace = entry.get("namespace", "default")
    labels = entry.get("labels") or {}
    annotations = entry.get("annotations") or {}
    out = []
    for k in range(count):
        pod_name = f"{name}-{k}" if count > 1 else name
        doc = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": pod_name,
                "namespace": namespace,
                "uid": f"{namespace}/{pod_name}",
                "labels": labels,
                "annotations": annotations,
            },
            "spec": spec,
        }
        try:
            # the entry's pods differ only in name and uid: the schema is checked on the first
            pod = pod_from_manifest(
                doc,
                validation=validation if k == 0 else "ignore",
                warn=None if warn is None else _prefixed(warn, f"{source}: pods[{i}] ({name})"),
            )
        except PodSpecError as exc:
            raise WorkloadError(source, i, exc.path, exc.reason) from exc
        out.append(PodArrival(arrival + k * interval, duration, pod, name))
    return out


@dataclass(frozen=True)
class WorkloadMix:
    """Parameters of the generated workload. Rates are pods per second; durations are seconds."""

    pods: int = 600
    arrival_rate_per_s: float = 2.0
    mean_duration_s: float = 900.0
    guaranteed_share: float = 0.6
    burstable_share: float = 0.3
    guaranteed_cpus: Sequence[int] = (2, 4, 4, 8, 8, 12, 16)
    hugepages_share: float = 0.15
    device_share: float = 0.15
    device_resources: Sequence[str] = ()


def _container(name: str, requests: dict[str, str], limits: dict[str, str] | None = None) -> dict[str, Any]:
    res: dict[str, Any] = {"requests": requests}
    if limits is not None:
        res["limits"] = limits
    return {"name": name, "resources": res}


def generate_workload(seed: int, mix: WorkloadMix = WorkloadMix()) -> list[PodArrival]:
    """A deterministic (for ``seed``) mix of Guaranteed, Burstable and BestEffort pods.

    Guaranteed pods ask for whole CPUs with memory sized 2–4 GiB per CPU; some also ask for 1Gi
    hugepages or one device of ``mix.device_resources``. Arrivals are a Poisson process;
    durations are exponential around ``mix.mean_duration_s``.
    """
    rng = random.Random(seed)
    t = 0.0
    arrivals: list[PodArrival] = []
    parsed: dict[tuple[object, ...], Pod] = {}  # one parsed pod per container shape (see below)
    for i in range(mix.pods):
        t += rng.expovariate(mix.arrival_rate_per_s)
        roll = rng.random()
        shape: tuple[object, ...]
        if roll < mix.guaranteed_share:
            cpus = rng.choice(list(mix.guaranteed_cpus))
            mem_gi = cpus * rng.choice((2, 3, 4))
            res = {"cpu": str(cpus), "memory": f"{mem_gi}Gi"}
            group = f"gu-{cpus}cpu"
            if rng.random() < mix.hugepages_share:
                res["hugepages-1Gi"] = f"{rng.choice((1, 2, 4))}Gi"
                group += "-hp"
            if mix.device_resources and rng.random() < mix.device_share:
                dev = rng.choice(list(mix.device_resources))
                res[dev] = "1"
                group += "-dev"
            containers = [_container("main", dict(res), dict(res))]
            shape = ("gu", *res.items())
        elif roll < mix.guaranteed_share + mix.burstable_share:
            milli = rng.choice((250, 500, 1000, 1500, 2000))
            memory = f"{rng.choice((1, 2, 4))}Gi"
            containers = [_container("main", {"cpu": f"{milli}m", "memory": memory})]
            group = "burstable"
            shape = ("burstable", milli, memory)
        else:
            containers = [{"name": "main"}]
            group = "besteffort"
            shape = ("besteffort",)
        name = f"{group}-{i}"
        doc = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"default/{name}"},
            "spec": {"containers": containers},
        }
        duration = rng.expovariate(1.0 / mix.mean_duration_s) if mix.mean_duration_s > 0 else None
        # Pods of one shape differ only in name, uid and source document: parse the shape once and
        # copy it (parse_pod(doc) gives an equal pod; the tests check it), with the values derived
        # from its resource fields (``_derived_known``), which the copies keep (``Pod.with_changes``).
        template = parsed.get(shape)
        if template is None:
            pod = parsed[shape] = _derived_known(parse_pod(doc))
        else:
            pod = template.with_changes(name=name, uid=f"default/{name}", raw=doc)
        arrivals.append(PodArrival(t, duration, pod, group))
    return arrivals


def _derived_known(pod: Pod) -> Pod:
    """``pod`` with the values every scheduler and node derive from its resource fields computed
    (kept in the pod: QoS class, effective requests, allocation request, effective placement), so
    that the copies made of it by ``Pod.with_changes`` carry them instead of each computing its own."""
    pod.effective_requests()
    effective_placement(pod)  # reads the allocation request and the QoS class
    return pod
