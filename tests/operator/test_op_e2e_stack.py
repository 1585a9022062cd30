"""Acceptance of issue 8: operator + exporter + scheduler against the fake API server, simulated nodes.

The test plays the parts a cluster would: the API server (:class:`FakeApiServer`), the DaemonSet and
Deployment controllers (which nodes a DaemonSet selects, their status), the kubelets (each simulated
node's allocations held by a :class:`ResourceManager` on a synthetic 2-NUMA machine, served on a real
PodResources gRPC socket; a fake sysfs tree; a KubeletConfiguration file) and the container runtime
(the pods the operator rendered run in this process with their rendered command line, parsed by the
real click commands; volume mounts are symlinks from a per-pod "container root" to a per-node "host
root", so every path the operator rendered is used as is). Ports are the one thing changed: every
pod binds ``127.0.0.1:0`` because in-process pods share one network namespace.

Scenario: three nodes carry the node group's label, one does not. Earlier Guaranteed pods fragment
the NUMA zones so that a 3-CPU Guaranteed pod fits one zone of ``numa-b`` only, though every node has
room for it at node level. The pod, created for the rendered scheduler name and selecting the node
group (a node without an NRT object passes the NUMA filter, as upstream's), must be bound to
``numa-b`` and admitted there by the node's resource manager on one NUMA node; the node's exporter
then republishes at once when the kubelet rewrites its CPU manager checkpoint (as a real kubelet
does on every exclusive allocation), without waiting for its refresh period.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from structlog.testing import capture_logs

from numaplane.cli import main as cli_main
from numaplane.exporter.daemon import Exporter
from numaplane.grpcapi.podresources.server import PodResourcesServer, StaticProvider
from numaplane.kube.resources import CRD, DAEMON_SET, DEPLOYMENT, NODE, NODE_RESOURCE_TOPOLOGY, POD
from numaplane.nrt.from_manager import allocation_state
from numaplane.operator.apply import KIND_RESOURCES
from numaplane.operator.controller import NUMA_RESOURCES_OPERATOR, NUMA_RESOURCES_SCHEDULER, Operator
from numaplane.operator.crds import all_crds
from numaplane.operator.render import parse_resources, render_stack
from numaplane.operator.render_common import Settings
from numaplane.policy.manager import ResourceManager
from numaplane.resources.pod import parse_pod
from numaplane.scheduler.service import SchedulerService
from numaplane.testing.fakeapi import FakeApiServer
from numaplane.topology.model import synthetic
from numaplane_harness.sysfs import write_sysfs

pytestmark = pytest.mark.timeout(60)

GI = 1 << 30
SETTINGS = Settings(namespace="numaplane-e2e", image="registry.example/numaplane:e2e")
GROUP_LABEL = "numaplane.io/node-group"
SCHEDULER_NAME = "numa-aware"
SELECTED = ("numa-a", "numa-b", "numa-c")
UNSELECTED = "plain-1"
#: 2 NUMA nodes × 4 CPUs (no SMT), 8 GiB each: node 0 = CPUs 0-3, node 1 = CPUs 4-7.
TOPOLOGY = synthetic(sockets=2, cores_per_numa=4, threads_per_core=1, memory_per_numa_bytes=8 * GI)
NODE_CONFIG = {
    "topologyManager": {"policy": "single-numa-node", "scope": "container"},
    "cpuManager": {"policy": "static", "reservedCPUs": "0"},
    "memoryManager": {"policy": "Static", "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}]},
}
KUBELET_CONFIG = {
    "apiVersion": "kubelet.config.k8s.io/v1beta1",
    "kind": "KubeletConfiguration",
    "topologyManagerPolicy": "single-numa-node",
    "topologyManagerScope": "container",
    "cpuManagerPolicy": "static",
    "reservedSystemCPUs": "0",
    "memoryManagerPolicy": "Static",
}
#: CPUs of the Guaranteed pods each node admitted earlier, in order, and the free CPUs per zone after.
EARLIER = {"numa-a": (2, 2), "numa-b": (2, 1), "numa-c": (1, 3)}
FREE = {"numa-a": (1, 2), "numa-b": (0, 4), "numa-c": (2, 1)}
NRO_DOC = {
    "apiVersion": "numaplane.io/v1",
    "kind": "NUMAResourcesOperator",
    "metadata": {"name": "numaresourcesoperator"},
    "spec": {
        "nodeGroups": [
            {
                "name": "workers",
                "nodeSelector": {"matchLabels": {GROUP_LABEL: "workers"}},
                "enforcement": "kubelet",
                "config": {"infoRefreshMode": "PeriodicAndEvents", "infoRefreshPeriod": "10s"},
            }
        ],
        "podExcludes": [{"namespace": "kube-system"}],
    },
}
NRS_DOC = {
    "apiVersion": "numaplane.io/v1",
    "kind": "NUMAResourcesScheduler",
    "metadata": {"name": "numaresourcesscheduler"},
    "spec": {
        "schedulerName": SCHEDULER_NAME,
        "mode": "standalone",
        "cacheResyncPeriod": "2s",
        "scoringStrategy": {
            "type": "LeastAllocated",
            "resources": [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}],
        },
    },
}


# ---------------------------------------------------------------------------------------- helpers


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for: {what}")
        await asyncio.sleep(0.05)


def node_doc(name: str, labels: Mapping[str, str]) -> dict[str, Any]:
    # node allocatable = capacity minus the reserved CPU 0 and 1 GiB
    allocatable = {"cpu": "7", "memory": "15Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "spec": {},
        "status": {"capacity": {"cpu": "8", "memory": "16Gi", "pods": "110"}, "allocatable": allocatable},
    }


def pod_doc(
    name: str, cpu: int, *, scheduler: str, node: str | None = None, selector: Mapping[str, str] | None = None
) -> dict[str, Any]:
    resources = {"cpu": str(cpu), "memory": "1Gi"}
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [
            {"name": "main", "image": "busybox", "resources": {"requests": resources, "limits": dict(resources)}}
        ],
    }
    if node is not None:
        spec["nodeName"] = node
    if selector:
        spec["nodeSelector"] = dict(selector)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "apps"}, "spec": spec}


def selects(pod_spec: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether a pod's required node affinity admits a node with ``labels`` (the DaemonSet controller's test)."""
    required = (
        (pod_spec.get("affinity") or {}).get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    )
    if not required:
        return True

    def match(expr: Mapping[str, Any]) -> bool:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In":
            return labels.get(key) in values
        if op == "NotIn":
            return labels.get(key) not in values
        if op == "Exists":
            return key in labels
        if op == "DoesNotExist":
            return key not in labels
        raise AssertionError(f"unexpected operator {op}")

    return any(all(match(e) for e in term.get("matchExpressions", [])) for term in required["nodeSelectorTerms"])


@dataclass
class SimNode:
    """A simulated node: its host file tree, its kubelet's resource manager and PodResources server."""

    name: str
    host: Path
    manager: ResourceManager = field(init=False)
    provider: StaticProvider = field(default_factory=StaticProvider)
    server: PodResourcesServer | None = None

    def __post_init__(self) -> None:
        write_sysfs(self.host, TOPOLOGY)
        from numaplane.topology.sysfs import discover

        # the kubelet and the exporter see the same machine: the one in the fake sysfs tree
        self.manager = ResourceManager(discover(self.host), NODE_CONFIG)
        kubelet = self.host / "var/lib/kubelet"
        (kubelet / "pod-resources").mkdir(parents=True)
        (kubelet / "config.yaml").write_text(yaml.safe_dump(KUBELET_CONFIG))

    def admit(self, pod: Mapping[str, Any]) -> Any:
        admission = self.manager.admit(parse_pod(pod))
        assert admission.admitted, admission.to_dict()
        self.republish()
        return admission

    def republish(self) -> None:
        self.provider.update(*allocation_state(self.manager).to_podresources())

    async def serve(self) -> None:
        socket = self.host / SETTINGS.kubelet_podresources_dir.lstrip("/") / "kubelet.sock"
        self.server = PodResourcesServer(self.provider, socket)
        await self.server.start()

    def write_cpu_manager_state(self) -> None:
        """What a real kubelet does after an exclusive allocation: rewrite ``cpu_manager_state``
        (a temporary file renamed over the old one, as its checkpoint manager writes)."""
        folder = self.host / SETTINGS.kubelet_state_dir.lstrip("/")
        scratch = folder / ".cpu_manager_state.tmp"
        scratch.write_text('{"policyName":"static","defaultCpuSet":"","checksum":0}')
        scratch.replace(folder / "cpu_manager_state")


class ContainerRoot:
    """A pod's container file system: each volume mount a symlink into the node's host root."""

    def __init__(self, root: Path, host: Path, pod_spec: Mapping[str, Any], container: Mapping[str, Any]) -> None:
        self.root = root
        volumes = {v["name"]: v for v in pod_spec.get("volumes", [])}
        for mount in container.get("volumeMounts", []):
            source = volumes[mount["name"]]["hostPath"]
            host_path = host / source["path"].lstrip("/")
            kind = source.get("type", "")
            if kind == "DirectoryOrCreate":
                host_path.mkdir(parents=True, exist_ok=True)
            elif kind == "Directory":
                assert host_path.is_dir(), f"hostPath {source['path']} (Directory) missing on the node"
            elif kind == "File":
                assert host_path.is_file(), f"hostPath {source['path']} (File) missing on the node"
            target = root / mount["mountPath"].lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(host_path)

    def args(self, container: Mapping[str, Any], env: Mapping[str, str]) -> list[str]:
        """The container's args with ``$(VAR)`` expanded, paths inside this root, loopback ephemeral ports."""
        out = []
        for arg in container["args"]:
            arg = re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env[m.group(1)], arg)
            flag, sep, value = arg.partition("=")
            if sep and flag in ("--metrics-address", "--health-address"):
                value = "127.0.0.1:0"
            elif sep and value.startswith("unix:///"):
                value = f"unix://{self.root}{value.removeprefix('unix://')}"
            elif sep and value.startswith("/"):
                value = f"{self.root}{value}"
            out.append(f"{flag}{sep}{value}" if sep else arg)
        return out


def parse_args(args: list[str]) -> tuple[str, Any]:
    """``numaplane <args>`` parsed by the real click command: ``(command name, context)``."""
    import click

    command: click.Command = cli_main
    name, rest = "numaplane", list(args)
    while isinstance(command, click.Group):
        sub = command.get_command(click.Context(command), rest[0])
        assert sub is not None, rest[0]
        name, command, rest = rest[0], sub, rest[1:]
    return name, command.make_context(name, rest)


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="npe-", dir="/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def no_errors_logged(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """No component may log an error while the stack runs (a crashed loop or handler logs one)."""
    with capture_logs() as events:
        yield
    errors = [r for r in caplog.get_records("call") if r.levelno >= logging.ERROR and r.name.startswith("numaplane")]
    assert not errors, [r.getMessage() for r in errors]
    assert not [e for e in events if e.get("log_level") in ("error", "critical")]


@contextlib.asynccontextmanager
async def running(coro: Awaitable[Any], name: str) -> AsyncIterator[asyncio.Task[Any]]:
    task = asyncio.ensure_future(coro)
    task.set_name(name)
    try:
        yield task
    finally:
        if task.done() and not task.cancelled() and task.exception() is not None:
            raise AssertionError(f"{name} died") from task.exception()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def conditions(obj: Mapping[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}


def zone_cpus_available(nrt: Mapping[str, Any]) -> tuple[int, ...]:
    out = []
    for zone in sorted(nrt["zones"], key=lambda z: z["name"]):
        row = next(r for r in zone["resources"] if r["name"] == "cpu")
        out.append(int(row["available"]))
    return tuple(out)


# ------------------------------------------------------------------------------------------ test


async def test_one_nro_and_one_nrs_give_nrts_and_a_numa_aware_scheduler(
    fake_apiserver: FakeApiServer, short_tmp: Path
) -> None:
    api = fake_apiserver
    async with contextlib.AsyncExitStack() as stack:
        kube = api.port_client()
        stack.push_async_callback(kube.close)

        # -- the cluster: nodes, the numaplane.io CRDs of deploy/ (the operator applies the NRT CRD)
        for name in SELECTED:
            await kube.create(NODE, node_doc(name, {GROUP_LABEL: "workers"}))
        await kube.create(NODE, node_doc(UNSELECTED, {GROUP_LABEL: "batch"}))
        for crd in all_crds():
            await kube.create(CRD, crd)
        operator = Operator(kube, SETTINGS, resync_period_seconds=None)
        operator_task = await stack.enter_async_context(running(operator.run(), "operator"))

        # -- one NUMAResourcesOperator and one NUMAResourcesScheduler
        nro = await kube.create(NUMA_RESOURCES_OPERATOR, NRO_DOC)
        nrs = await kube.create(NUMA_RESOURCES_SCHEDULER, NRS_DOC)
        desired = render_stack(parse_resources([nro, nrs]), SETTINGS)
        wanted = {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in desired}
        assert {"DaemonSet", "Deployment", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"} <= {
            k for k, _, _ in wanted
        }

        async def live_ids() -> set[tuple[str, str, str]]:
            out = set()
            for kind, res in KIND_RESOURCES.items():
                for ns in (SETTINGS.namespace, SETTINGS.node_namespace) if res.namespaced else (None,):
                    for obj in (await kube.list(res, namespace=ns)).items:
                        out.add((kind, obj["metadata"].get("namespace", ""), obj["metadata"]["name"]))
            return out

        async def rendered_objects_exist() -> bool:
            return wanted <= await live_ids()

        await eventually(rendered_objects_exist, "every rendered object applied")
        daemonset = await kube.get(DAEMON_SET, "numaplane-exporter-workers", namespace=SETTINGS.node_namespace)
        rendered_ds = next(o for o in desired if o["kind"] == "DaemonSet")
        assert daemonset["spec"]["template"] == rendered_ds["spec"]["template"]
        assert ("DaemonSet", SETTINGS.node_namespace, "numaplane-agent-workers") not in wanted  # kubelet mode
        deployment = await kube.get(DEPLOYMENT, "numaplane-scheduler", namespace=SETTINGS.namespace)
        nrt_crd = await kube.get(CRD, "noderesourcetopologies.topology.node.k8s.io")
        assert nrt_crd["spec"]["group"] == "topology.node.k8s.io"

        # -- the kubelets: earlier Guaranteed pods (in the API, bound, Running) fragment the zones
        nodes: dict[str, SimNode] = {}
        for i, name in enumerate([*SELECTED, UNSELECTED]):
            node = nodes[name] = SimNode(name, short_tmp / f"h{i}")
            for j, cpus in enumerate(EARLIER.get(name, ())):
                pod = await kube.create(
                    POD, pod_doc(f"{name}-early-{j}", cpus, scheduler="default-scheduler", node=name)
                )
                await kube.update_status(POD, {**pod, "status": {"phase": "Running", "qosClass": "Guaranteed"}})
                node.admit(pod)
            node.republish()
            await node.serve()
            stack.push_async_callback(node.server.stop)  # type: ignore[union-attr]
        for name, free in FREE.items():
            available = nodes[name].manager.available()
            assert (available[0]["cpu"], available[1]["cpu"]) == free
            assert 7 - sum(EARLIER[name]) >= 3  # every node has room for 3 CPUs at node level…
            assert (max(free) >= 3) is (name == "numa-b")  # …but only numa-b has them in one zone

        # -- the DaemonSet controller and the runtime: one exporter pod per node the DaemonSet selects
        pod_spec = daemonset["spec"]["template"]["spec"]
        node_labels = {o["metadata"]["name"]: o["metadata"]["labels"] for o in (await kube.list(NODE)).items}
        chosen = sorted(n for n, labels in node_labels.items() if selects(pod_spec, labels))
        assert chosen == sorted(SELECTED)
        [container] = pod_spec["containers"]
        from numaplane.cli.exporter import _options as exporter_options

        exporters: dict[str, Exporter] = {}
        for i, name in enumerate(chosen):
            root = ContainerRoot(short_tmp / f"c{i}", nodes[name].host, pod_spec, container)
            env = {"NODE_NAME": name, "POD_NAME": f"numaplane-exporter-workers-{i}"}
            command, ctx = parse_args(root.args(container, env))
            assert command == "exporter"
            options = exporter_options(ctx.params)
            assert options.refresh_mode.value == "both" and options.kubelet_state_dir is not None
            exporter_kube = api.port_client()
            stack.push_async_callback(exporter_kube.close)
            exporter = exporters[name] = Exporter(options, kube=exporter_kube)
            await exporter.start()
            stack.push_async_callback(exporter.close)

        async def nrts() -> dict[str, dict[str, Any]]:
            return {o["metadata"]["name"]: o for o in (await kube.list(NODE_RESOURCE_TOPOLOGY)).items}

        async def nrts_published() -> bool:
            got = await nrts()
            return set(got) == set(SELECTED) and all(zone_cpus_available(got[n]) == FREE[n] for n in SELECTED)

        await eventually(nrts_published, "NRT objects of exactly the selected nodes, with their free CPUs")
        for name, obj in (await nrts()).items():
            attributes = {a["name"]: a["value"] for a in obj.get("attributes", [])}
            assert attributes["topologyManagerPolicy"] == "single-numa-node", attributes
            assert obj["metadata"]["ownerReferences"][0]["name"] == name
        assert all(e.readiness()[0] for e in exporters.values())

        # the DaemonSet controller reports the pods ready: the operator says Available
        await kube.update_status(
            DAEMON_SET,
            {
                **daemonset,
                "status": {
                    "observedGeneration": daemonset["metadata"]["generation"],
                    "desiredNumberScheduled": len(chosen),
                    "currentNumberScheduled": len(chosen),
                    "numberReady": len(chosen),
                    "numberAvailable": len(chosen),
                    "updatedNumberScheduled": len(chosen),
                    "numberMisscheduled": 0,
                },
            },
        )

        async def operator_available() -> bool:
            live = await kube.get(NUMA_RESOURCES_OPERATOR, "numaresourcesoperator")
            groups = (live.get("status") or {}).get("nodeGroups") or [{}]
            return conditions(live).get("Available") == "True" and groups[0].get("readyNodes") == len(chosen)

        await eventually(operator_available, "NUMAResourcesOperator Available with every node ready")

        # -- the Deployment's pod: the standalone scheduler with the rendered settings
        [sched_container] = deployment["spec"]["template"]["spec"]["containers"]
        sched_root = ContainerRoot(
            short_tmp / "s", short_tmp / "hs", deployment["spec"]["template"]["spec"], sched_container
        )
        command, ctx = parse_args(sched_root.args(sched_container, {"POD_NAME": "sched-0", "POD_NAMESPACE": "x"}))
        assert command == "run" and not ctx.params["leader_elect"]
        from numaplane.cli.scheduler import _config as scheduler_config
        from numaplane.scheduler.config import DEFAULT_SCHEDULER_NAME

        config = scheduler_config(ctx.params, (DEFAULT_SCHEDULER_NAME,))
        assert config.scheduler_names == (SCHEDULER_NAME,)
        assert config.cache_mode == "overreserve" and config.cache.resync_period_seconds == 2.0
        assert config.strategy.type == "LeastAllocated" and config.strategy.weight("cpu") == 2
        sched_kube = api.port_client()
        stack.push_async_callback(sched_kube.close)
        service = SchedulerService(
            sched_kube,
            config,
            metrics_address=str(ctx.params["metrics_address"]),
            health_address=str(ctx.params["health_address"]),
        )
        sched_task = await stack.enter_async_context(running(service.run(), "scheduler"))

        async def scheduler_ready() -> bool:
            return service.ready

        await eventually(scheduler_ready, "scheduler informers synced")
        await kube.update_status(
            DEPLOYMENT,
            {
                **deployment,
                "status": {
                    "observedGeneration": deployment["metadata"]["generation"],
                    "replicas": 1,
                    "readyReplicas": 1,
                    "availableReplicas": 1,
                    "updatedReplicas": 1,
                },
            },
        )

        async def scheduler_available() -> bool:
            live = await kube.get(NUMA_RESOURCES_SCHEDULER, "numaresourcesscheduler")
            status = live.get("status") or {}
            return conditions(live).get("Available") == "True" and status.get("schedulerName") == SCHEDULER_NAME

        await eventually(scheduler_available, "NUMAResourcesScheduler Available")

        # -- a Guaranteed pod that fits one NUMA zone of one node only
        # (a node without an NRT object passes the NUMA filter, as upstream's: the pod targets the group)
        await kube.create(POD, pod_doc("aligned", 3, scheduler=SCHEDULER_NAME, selector={GROUP_LABEL: "workers"}))

        async def bound_node() -> str | None:
            pod = await kube.get(POD, "aligned", namespace="apps")
            return (pod.get("spec") or {}).get("nodeName")

        async def is_bound() -> bool:
            return await bound_node() is not None

        await eventually(is_bound, "the pod bound")
        assert await bound_node() == "numa-b"

        # the kubelet of numa-b admits it on one NUMA node
        node = nodes["numa-b"]
        admission = node.admit(await kube.get(POD, "aligned", namespace="apps"))
        [main] = admission.containers
        cpus = main.exclusive_cpus
        assert cpus is not None and cpus.size() == 3
        assert cpus.is_subset_of(TOPOLOGY.numa_nodes[1].cpus), cpus
        assert main.memory_numa == (1,)
        # the kubelet rewrites its CPU manager checkpoint: the exporter republishes without waiting a period
        node.write_cpu_manager_state()

        async def republished() -> bool:
            return zone_cpus_available((await nrts())["numa-b"]) == (0, 1)

        await eventually(republished, "numa-b's NRT shows the new allocation", timeout=5)
        assert not operator_task.done() and not sched_task.done()
        healthy, details = service._liveness()
        assert healthy, details
        service.stop()
