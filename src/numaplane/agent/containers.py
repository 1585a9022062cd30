"""What the agent knows about a container: derived from NRI's view, or from the Pod when it is known.

NRI passes the runtime's view, not the Pod spec (``wire/nri.md``, "What the agent can know"). From a
``PodSandbox`` and a ``Container`` the agent derives, the way the kubelet encodes them:

* **QoS class** from the pod's cgroup parent: ``…/kubepods/besteffort/…`` / ``…/kubepods/burstable/…``
  (systemd driver: ``kubepods-besteffort.slice`` / ``kubepods-burstable.slice``); directly under
  ``kubepods`` is Guaranteed. A parent without a ``kubepods`` segment (a runtime driven by something
  other than the kubelet, e.g. tests) falls back to the resources: no shares above the minimum and no
  limits → BestEffort; a CPU limit (quota) equal to the request and a memory limit → Guaranteed; else
  Burstable;
* **CPU request** in millicores from ``cpu.shares`` (the kubelet writes ``milli × 1024 / 1000``, at
  least 2; the inverse ``ceil(shares × 1000 / 1024)`` is exact for every request above 2m; 2 shares, the floor every BestEffort container gets, reads as no request);
  **CPU limit** from ``quota × 1000 / period`` (absent or ``-1``: none — the kubelet drops the quota of
  containers with exclusive CPUs, so a Guaranteed container's limit is its request);
* **memory limit** in bytes from ``memory.limit``; Guaranteed containers request what they limit;
* **hugepages** from ``hugepage_limits`` (page size ``2MB`` → resource ``hugepages-2Mi``), zero limits skipped;
* **extended resources** never: NRI does not carry them, and they are granted only from the pod
  spec (below). **Annotations never grant**: the pod annotation ``resources.numaplane.io/<container
  name>`` (a JSON object ``{"<resource>": <quantity>}``, the way nri-plugins' resource annotator passes
  requests) is written by whoever creates the pod, so it is only a *claim* checked against the spec
  (:func:`check_claims`): every resource it names must be requested by the container's spec in the same
  amount, else the container is refused (``ResourceNotRequested``); without the spec (no
  ``--watch-pods``, or the informer has not seen the pod yet) a claim cannot be checked and the
  container is refused (``UnverifiedResources``, which a later retry can pass once the Pod is known).
  A claim of ``cpu``, ``memory`` or hugepages is malformed (``InvalidContainer``): those amounts come from
  the cgroup values the kubelet wrote from the spec.

With the node's Pod from the Kubernetes API (``pod`` argument: the agent may watch its own node's pods
read-only) the container's exact requests and limits, extended resources and the pod's QoS class
come from the spec instead. (A known pod that needs the resource manager is not admitted through this
module at all: the state machine admits it as a whole, see ``wholepod.py``.)

**One container at a time** — the fallback when the Pod is not known (no API access, or the informer
has not seen the pod yet at its first container): each container becomes a single-container pod
keyed ``<pod uid>/<container name>`` (:func:`manager_key`), carrying the real pod's name, namespace,
annotations (per-pod preferences) and QoS class, admitted when it is created, kept across the
container's restarts (a stopped container keeps it) and released when the container is removed or
its sandbox stops (the kubelet's rule, ``state.py``). What this cannot do, exactly:

* the pod is never judged as a whole: each container is admitted when it is created, so a pod whose
  app container cannot be aligned is refused only at that container, after its init containers ran
  (the kubelet refuses the pod before anything runs);
* CRI and NRI do not say which containers are init containers or sidecars, nor their order: a
  stopped init container keeps its exclusive CPUs (pinned memory, devices) like any stopped
  container, until the first creation of another container name in its sandbox releases them (the
  kubelet creates that container only once the init containers before it completed); the next
  container is then allocated afresh, not from a reuse set: it may get other CPUs than the kubelet's
  reuse would give whenever the allocation order differs. A container of the pod that stopped
  before the first creation of a later one (a crash inside the kubelet's first start of the pod) is
  taken for a completed one and allocated afresh at its restart;
* the topology manager's ``pod`` scope sees one container at a time: containers of one pod may be
  aligned to different NUMA nodes, and a pod is not refused as a whole;
* NRI carries no pod-level ``spec.resources`` (KEP-2837): such a pod's containers are judged by their
  own cgroup values (the kubelet's static policies leave these pods shared);
* extended resources (devices, vendor resources) are never granted: only the pod spec grants them.

If the Pod becomes known later, the pod's next container gets whole-pod admission when every
container admitted alone so far is a completed regular init container (those are released first);
otherwise the pod stays one container at a time.

Pure: no I/O; inputs are the agent's plain NRI values (``nri/events.py``, translated from protobuf by
``nri/translate.py``) or pure values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from typing import Any

from numaplane import boundedjson
from numaplane.agent.errors import AdmissionRejected
from numaplane.limits import MAX_ANNOTATION_BYTES
from numaplane.nri.events import ContainerState, RuntimeContainer, Sandbox
from numaplane.policy.preferences import PREFIX as PREFERENCE_PREFIX
from numaplane.resources.errors import PodSpecError, QuantityError
from numaplane.resources.pod import Container, Pod, QOSClass, parse_pod
from numaplane.resources.quantity import parse_quantity
from numaplane.topology.cpuset import CPUSet

__all__ = [
    "EXTRA_RESOURCES_ANNOTATION_PREFIX",
    "ContainerInfo",
    "check_claims",
    "cpu_limit_milli",
    "cpu_request_milli",
    "derive",
    "hugepage_resource",
    "manager_key",
    "qos_from_cgroup_parent",
]

EXTRA_RESOURCES_ANNOTATION_PREFIX = "resources.numaplane.io/"
MIN_SHARES = 2
_PAGE_SIZE_RE = re.compile(r"([0-9]+)([KMGTP])B\Z")


def manager_key(pod_uid: str, container_name: str) -> str:
    """The resource manager's pod uid for one container (unique per pod and container name)."""
    return f"{pod_uid}/{container_name}"


def qos_from_cgroup_parent(cgroup_parent: str) -> QOSClass | None:
    """The QoS class the kubelet encodes in a pod's cgroup parent; ``None`` when not under ``kubepods``.

    cgroupfs driver: ``/kubepods/pod<uid>``, ``/kubepods/burstable/pod<uid>``,
    ``/kubepods/besteffort/pod<uid>``; systemd driver: ``kubepods-pod<uid>.slice``,
    ``kubepods-burstable-pod<uid>.slice``, ``kubepods-besteffort-pod<uid>.slice`` (alone or as a path).
    """
    parts = [p for p in cgroup_parent.replace("\\", "/").split("/") if p]
    for part in parts:
        if part.startswith("kubepods-besteffort"):
            return "BestEffort"
        if part.startswith("kubepods-burstable"):
            return "Burstable"
    for i, part in enumerate(parts):
        if part in {"kubepods", "kubepods.slice"}:
            nxt = parts[i + 1] if i + 1 < len(parts) else ""
            if nxt == "besteffort":
                return "BestEffort"
            if nxt == "burstable":
                return "Burstable"
            return "Guaranteed"
        if part.startswith("kubepods-pod"):
            return "Guaranteed"
    return None


def cpu_request_milli(shares: int | None) -> int:
    """Millicores from ``cpu.shares`` (0 when unset or at the kubelet's minimum of 2 shares)."""
    if shares is None or shares <= MIN_SHARES:
        return 0
    return -(-shares * 1000 // 1024)


def cpu_limit_milli(quota: int | None, period: int | None) -> int | None:
    """Millicores from the CFS quota and period (µs); ``None`` when unlimited or unset."""
    if quota is None or quota <= 0 or not period:
        return None
    return -(-quota * 1000 // period)


def hugepage_resource(page_size: str) -> str | None:
    """``2MB`` → ``hugepages-2Mi`` (the runtime's page size spelling to the Kubernetes resource name)."""
    match = _PAGE_SIZE_RE.match(page_size.strip())
    if match is None:
        return None
    return f"hugepages-{match.group(1)}{match.group(2)}i"


@dataclass(frozen=True)
class ContainerInfo:
    """One container as the agent admits it.

    :attr:`pod` is the single-container pod handed to the resource manager (uid = :attr:`key`), built
    from ``pod_doc`` on first use (containers that skip the manager never pay for it); ``preferences``
    are the pod's ``numaplane.io/`` annotations. ``cpus`` / ``mems`` are the cpusets the runtime reports
    (what the kubelet asked for at creation, or what the container has now in Synchronize); empty
    when unset. ``source`` is ``nri`` or ``api``.
    """

    container_id: str
    sandbox_id: str
    pod_uid: str
    pod_name: str
    namespace: str
    name: str
    qos: QOSClass
    pod_doc: Mapping[str, Any]
    preferences: Mapping[str, str] = field(default_factory=dict)
    cpus: str = ""
    mems: str = ""
    state: ContainerState = ContainerState.UNKNOWN
    source: str = "nri"
    extra_resources: Mapping[str, int] = field(default_factory=dict)

    @cached_property
    def pod(self) -> Pod:
        """The manager's pod; raises :class:`AdmissionRejected` (``InvalidContainer``) if malformed."""
        try:
            return parse_pod(self.pod_doc)
        except PodSpecError as exc:
            raise AdmissionRejected("InvalidContainer", str(exc)) from None

    @property
    def key(self) -> str:
        return manager_key(self.pod_uid, self.name)

    @property
    def needs_manager(self) -> bool:
        """Whether admission can give it anything beyond the shared pool.

        Only Guaranteed containers get exclusive CPUs or pinned memory (kubelet static policies);
        devices and vendor resources are extended resources. Everything else runs in the shared pool
        and skips the resource manager (same outcome, a fraction of the cost).
        """
        return self.qos == "Guaranteed" or bool(self.extra_resources)

    @property
    def live(self) -> bool:
        return self.state.live


def _extra_resources(annotations: Mapping[str, str], container: str) -> dict[str, str]:
    raw = annotations.get(EXTRA_RESOURCES_ANNOTATION_PREFIX + container)
    if raw is None:
        return {}
    where = f"annotation {EXTRA_RESOURCES_ANNOTATION_PREFIX}{container}"
    try:
        doc = boundedjson.loads(raw, max_bytes=MAX_ANNOTATION_BYTES)
    except boundedjson.JSONInputError as exc:
        raise AdmissionRejected("InvalidContainer", f"{where}: {exc}") from None
    if not isinstance(doc, Mapping):
        raise AdmissionRejected("InvalidContainer", f"{where} must be a JSON object of resource quantities")
    out: dict[str, str] = {}
    for name, value in doc.items():
        if not isinstance(name, str) or not name or len(name) > 253:
            raise AdmissionRejected("InvalidContainer", f"{where}: resource names must be 1-253 characters")
        if name in ("cpu", "memory") or name.startswith("hugepages-"):
            raise AdmissionRejected("InvalidContainer", f"{where}: {name} comes from the runtime, not the annotation")
        try:
            out[name] = str(parse_quantity(value))
        except QuantityError as exc:
            raise AdmissionRejected("InvalidContainer", f"{where}.{name}: {exc}") from None
    return out


def _from_runtime(
    sandbox: Sandbox, container: RuntimeContainer
) -> tuple[QOSClass, dict[str, str], dict[str, str], dict[str, str]]:
    """QoS, requests, limits (quantity strings) and extended resources from the runtime's view."""
    res = container.resources
    shares, quota, period, memory = res.cpu_shares, res.cpu_quota, res.cpu_period, res.memory_limit
    if memory is not None and memory <= 0:
        memory = None
    request = cpu_request_milli(shares)
    limit = cpu_limit_milli(quota, period)
    hugepages: dict[str, str] = {}
    for page_size, limit_bytes in res.hugepage_limits:
        resource = hugepage_resource(page_size)
        if resource is not None and limit_bytes > 0:
            hugepages[resource] = str(limit_bytes)
    qos = qos_from_cgroup_parent(sandbox.cgroup_parent)
    if qos is None:
        if request == 0 and limit is None and memory is None and not hugepages:
            qos = "BestEffort"
        elif request > 0 and memory is not None and (limit is None or limit == request):
            # a kubelet-encoded Guaranteed container: quota = request, or dropped for exclusive CPUs
            qos = "Guaranteed" if limit is not None or request % 1000 == 0 else "Burstable"
        else:
            qos = "Burstable"
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    if qos == "Guaranteed":
        cpu = limit if limit is not None else request
        if cpu:
            requests["cpu"] = limits["cpu"] = f"{cpu}m"
        if memory is not None:
            requests["memory"] = limits["memory"] = str(memory)
    else:
        if request:
            requests["cpu"] = f"{request}m"
        if limit is not None:
            limits["cpu"] = f"{limit}m"
        if memory is not None:
            limits["memory"] = str(memory)
    for name, amount in hugepages.items():
        requests[name] = limits[name] = amount
    return qos, requests, limits, {}


def check_claims(annotations: Mapping[str, str], container: str, spec: Pod | None, *, pod: str = "") -> None:
    """Refuse a ``resources.numaplane.io/<container>`` annotation the pod spec does not back.

    Annotations never grant resources (see the module docstring): every resource the annotation
    names must be requested by the container ``container`` of ``spec`` in the same amount. Raises
    :class:`AdmissionRejected`: ``InvalidContainer`` (a malformed annotation), ``ResourceNotRequested``
    (the spec does not request it, or another amount), ``UnverifiedResources`` (``spec`` is ``None``:
    the agent does not know the Pod, so the claim cannot be checked). No annotation: nothing to check.
    ``pod`` (``namespace/name``) names the pod in the rejection.
    """
    claimed = _extra_resources(annotations, container)
    at = {"pod": pod, "container": container} if pod else {}
    if not claimed:
        return
    where = f"annotation {EXTRA_RESOURCES_ANNOTATION_PREFIX}{container}"
    names = ", ".join(f"{k}={v}" for k, v in sorted(claimed.items()))
    if spec is None:
        raise AdmissionRejected(
            "UnverifiedResources",
            f"{where} claims {names}, but the agent does not know the pod spec (no --watch-pods, or the Pod "
            "is not in its informer yet): annotations never grant resources, only the pod spec does",
            **at,
        )
    found = _defaulted(spec).container(container)
    requests = found.requests if found is not None else {}
    for name, amount in sorted(claimed.items()):
        asked = requests.get(name)
        if asked is None or asked.value() != parse_quantity(amount).value():
            has = "does not request it" if asked is None else f"requests {asked}"
            raise AdmissionRejected(
                "ResourceNotRequested",
                f"{where} claims {name}={amount}, but the pod spec of container {container!r} {has}: "
                "annotations never grant resources, only the pod spec does",
                **at,
            )


def _defaulted(pod: Pod) -> Pod:
    """The pod with requests defaulted to limits, as the API server stores it (objects built elsewhere may lack them)."""

    def fill(c: Container) -> Container:
        missing = {k: v for k, v in c.limits.items() if k not in c.requests}
        return replace(c, requests={**c.requests, **missing}) if missing else c

    return replace(
        pod,
        init_containers=tuple(fill(c) for c in pod.init_containers),
        containers=tuple(fill(c) for c in pod.containers),
    )


def _from_api(pod: Pod, name: str) -> tuple[QOSClass, dict[str, str], dict[str, str], dict[str, str]] | None:
    pod = _defaulted(pod)
    spec: Container | None = pod.container(name)
    if spec is None:
        return None
    requests = {k: str(v) for k, v in spec.requests.items()}
    limits = {k: str(v) for k, v in spec.limits.items()}
    extra = {
        k: v
        for k, v in requests.items()
        if k not in ("cpu", "memory", "ephemeral-storage", "storage") and not k.startswith("hugepages-")
    }
    return pod.qos_class, requests, limits, extra


def derive(sandbox: Sandbox, container: RuntimeContainer, api_pod: Pod | None = None) -> ContainerInfo:
    """The :class:`ContainerInfo` of ``container``; ``api_pod`` (the Pod from the API, if known) wins.

    Raises :class:`AdmissionRejected` for input the agent cannot admit: ``InvalidContainer`` (a
    malformed resources annotation), ``ResourceNotRequested`` / ``UnverifiedResources`` (a resources
    annotation the pod spec does not back, :func:`check_claims`).
    """
    at = f"{sandbox.namespace or (api_pod.namespace if api_pod is not None else 'default')}/{sandbox.name}"
    check_claims(sandbox.annotations, container.name, api_pod, pod=at)
    if api_pod is not None:
        check_claims(api_pod.annotations, container.name, api_pod, pod=at)
    derived = _from_api(api_pod, container.name) if api_pod is not None else None
    source = "api"
    if derived is None:
        derived = _from_runtime(sandbox, container)
        source = "nri"
    qos, requests, limits, extra = derived
    pod_uid = sandbox.uid or (api_pod.uid if api_pod is not None else "") or sandbox.id
    key = manager_key(pod_uid, container.name)
    annotations = api_pod.annotations if api_pod is not None else sandbox.annotations
    preferences = {k: v for k, v in annotations.items() if k.startswith(PREFERENCE_PREFIX)}
    name = sandbox.name or (api_pod.name if api_pod is not None else "")
    namespace = sandbox.namespace or (api_pod.namespace if api_pod is not None else "default")
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"uid": key, "name": name, "namespace": namespace, "annotations": preferences},
        "spec": {"containers": [{"name": container.name, "resources": {"requests": requests, "limits": limits}}]},
        "status": {"qosClass": qos},
    }
    extra_amounts = {k: parse_quantity(v).value() for k, v in extra.items()}
    res = container.resources
    return ContainerInfo(
        container_id=container.id,
        sandbox_id=container.pod_sandbox_id or sandbox.id,
        pod_uid=pod_uid,
        pod_name=name,
        namespace=namespace,
        name=container.name,
        qos=qos,
        pod_doc=doc,
        preferences=preferences,
        cpus=res.cpus,
        mems=res.mems,
        state=container.state,
        source=source,
        extra_resources=extra_amounts,
    )


@lru_cache(maxsize=4096)
def parse_cpuset(text: str) -> CPUSet | None:
    """A cpuset string from the runtime, or ``None`` when empty or malformed (memoised)."""
    if not text.strip():
        return None
    try:
        return CPUSet.parse(text.strip())
    except ValueError:
        return None
