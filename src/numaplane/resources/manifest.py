"""Pods from a user's manifest, as the API server would store them: defaulting, then validation.

A Pod read from a user's file (``admit``, ``explain``, simulator workloads) goes through
:func:`pod_from_manifest`: the API server's defaulting first (:func:`apply_api_defaults`: a
container's missing request for a resource is its limit, ``SetDefaults_Pod``), then what the API
server would refuse is refused: a field the Pod schema of v1.36 does not declare or a value of the
wrong type (:mod:`numaplane.resources.podschema`, as ``kubectl --validate=strict``; ``validation``
relaxes it), another ``kind``, no containers, a request above its limit
(``ValidateResourceRequirements``). Pods read from the API server are already defaulted and valid.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from numaplane.resources.errors import PodSpecError
from numaplane.resources.pod import Pod, parse_pod
from numaplane.resources.podschema import Validation, pod_schema_problems

__all__ = ["apply_api_defaults", "pod_from_manifest"]


def apply_api_defaults(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of Pod JSON with the API server's resource defaulting applied (the input is not changed).

    ``SetDefaults_Pod``: for every init and app container, each resource that has a limit but no
    request gets the limit as its request (so ``limits: {cpu: 2, memory: 1Gi}`` alone is Guaranteed).
    Anything malformed is left as it is for :func:`parse_pod` to report.
    """
    out = dict(doc)
    spec = doc.get("spec")
    if not isinstance(spec, Mapping):
        return out
    new_spec = dict(spec)
    for key in ("initContainers", "containers"):
        containers = spec.get(key)
        if not isinstance(containers, list):
            continue
        new_spec[key] = [_default_container(c) for c in containers]
    out["spec"] = new_spec
    return out


def _default_container(container: Any) -> Any:
    if not isinstance(container, Mapping):
        return container
    resources = container.get("resources")
    if not isinstance(resources, Mapping):
        return container
    limits = resources.get("limits")
    requests = resources.get("requests") or {}
    if not isinstance(limits, Mapping) or not limits or not isinstance(requests, Mapping):
        return container
    merged = dict(requests)
    for name, value in limits.items():
        merged.setdefault(name, value)
    return {**container, "resources": {**resources, "requests": merged}}


def pod_from_manifest(doc: Any, *, validation: Validation = "strict", warn: Callable[[str], None] | None = None) -> Pod:
    """A Pod from a user's manifest, as the API server would store it (see the module docstring).

    Raise :class:`PodSpecError` naming the field for another kind, a field the Pod schema does not
    declare or a value of the wrong type (``validation="strict"``, the default; ``"warn"`` passes
    each such problem, as one line, to ``warn`` and goes on; ``"ignore"`` does not check), no
    containers, a request above its limit, or anything :func:`parse_pod` refuses."""
    if not isinstance(doc, Mapping):
        raise PodSpecError("$", "a pod must be a JSON object")
    kind = doc.get("kind")
    if kind is not None and kind != "Pod":
        raise PodSpecError("kind", f"expected a Pod, got {kind!r}")
    if validation != "ignore":
        problems = pod_schema_problems(doc)
        if problems and validation == "strict":
            first, rest = problems[0], problems[1:]
            more = f"; also {'; '.join(str(p) for p in rest)}" if rest else ""
            raise PodSpecError(first.path, f"{first.reason} (Pod schema of Kubernetes v1.36){more}")
        for problem in problems:
            if warn is not None:
                warn(f"invalid pod at {problem} (ignored: --validate=warn)")
    parse_pod(doc)  # errors name the field as the user wrote it (before defaulting copies a limit)
    pod = parse_pod(apply_api_defaults(doc))
    if not pod.containers:
        raise PodSpecError("spec.containers", "a pod needs at least one container")
    for prefix, containers in (("spec.initContainers", pod.init_containers), ("spec.containers", pod.containers)):
        for i, c in enumerate(containers):
            for name, request in c.requests.items():
                limit = c.limits.get(name)
                if limit is not None and request.amount > limit.amount:
                    raise PodSpecError(
                        f"{prefix}[{i}].resources.requests.{name}",
                        f"{request} must be less than or equal to the {name} limit {limit}",
                    )
    return pod
