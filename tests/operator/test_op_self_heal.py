"""Every object the operator owns comes back within seconds after deletion or drift (issue 25 item 15).

Before: only DaemonSets and Deployments were watched, so a deleted ``numaplane-scheduler-metrics``
Service (or a Role, a NetworkPolicy, a ConfigMap...) stayed gone until an unrelated event. The running
operator (informers, work queue, workers) against the fake API server, through the real lightkube adapter.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from test_op_controller import SETTINGS, assert_cluster_matches, live_objects, samples

from numaplane.kube.client import LightkubePort
from numaplane.kube.errors import KubeError
from numaplane.kube.resources import CRD
from numaplane.nrt.crd import crd_manifest
from numaplane.operator.apply import KIND_RESOURCES, PRUNABLE
from numaplane.operator.controller import NUMA_RESOURCES_OPERATOR, NUMA_RESOURCES_SCHEDULER, Operator
from numaplane.operator.crds import all_crds
from numaplane.testing.fakeapi import FakeApiServer

pytestmark = pytest.mark.timeout(90)

#: Seconds within which a deleted or edited object must be back.
WITHIN = 3.0


@pytest_asyncio.fixture
async def running() -> AsyncIterator[tuple[LightkubePort, list[dict[str, object]]]]:
    async with FakeApiServer() as server:
        kube = server.port_client()
        for crd in [*all_crds(), crd_manifest()]:
            await kube.create(CRD, crd)
        docs = samples()
        nro, nrs = docs[0], docs[1]
        await kube.create(NUMA_RESOURCES_OPERATOR, nro)
        await kube.create(NUMA_RESOURCES_SCHEDULER, nrs)
        operator = Operator(kube, SETTINGS, resync_period_seconds=None)
        task = asyncio.create_task(operator.run())
        try:
            await _eventually(lambda: assert_cluster_matches(kube, nro, nrs), "the stack rendered")
            yield kube, [nro, nrs]
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await kube.close()


async def _eventually(check: object, what: str, timeout: float = 30.0) -> float:
    """Seconds until ``check()`` (an awaitable factory) stops raising ``AssertionError``."""
    began = time.monotonic()
    while True:
        try:
            await check()  # type: ignore[operator]
            return time.monotonic() - began
        except (AssertionError, KubeError):
            if time.monotonic() - began > timeout:
                raise
            await asyncio.sleep(0.05)


async def test_every_owned_kind_comes_back_after_deletion(
    running: tuple[LightkubePort, list[dict[str, object]]],
) -> None:
    kube, docs = running
    owned = {key: obj for key, obj in (await live_objects(kube)).items() if "applied-hash" in str(obj["metadata"])}
    kinds = {key[0] for key in owned}
    # the stack has an object of every kind the operator prunes, the scheduler's metrics Service too
    assert kinds >= {res.kind for res in PRUNABLE}, kinds
    assert ("Service", SETTINGS.namespace, "numaplane-scheduler-metrics") in owned
    seconds: dict[str, float] = {}
    # one at a time, every owned object (the scheduler's and the node groups')
    for kind_, namespace, name in sorted(k for k in owned if k[0] not in ("Namespace", "CustomResourceDefinition")):
        res = KIND_RESOURCES[kind_]
        uid = owned[(kind_, namespace, name)]["metadata"]["uid"]
        await kube.delete(res, name, namespace=namespace or None)

        async def back(res: object = res, name: str = name, namespace: str = namespace, uid: str = uid) -> None:
            live = await kube.get(res, name, namespace=namespace or None)  # type: ignore[arg-type]
            assert live["metadata"]["uid"] != uid  # a new object, not the old one still terminating

        seconds[f"{kind_} {name}"] = await _eventually(back, f"{kind_} {name} recreated", timeout=WITHIN)
    await assert_cluster_matches(kube, *docs)  # type: ignore[arg-type]
    print(f"{len(seconds)} objects recreated after deletion, slowest {max(seconds.values()):.2f} s")


async def test_drift_of_an_unwatched_kind_before_is_undone(
    running: tuple[LightkubePort, list[dict[str, object]]],
) -> None:
    kube, docs = running
    service = KIND_RESOURCES["Service"]
    live = await kube.get(service, "numaplane-scheduler-metrics", namespace=SETTINGS.namespace)
    live["spec"]["ports"][0]["port"] = 9999
    await kube.replace(service, live)
    policy = KIND_RESOURCES["NetworkPolicy"]
    [first] = (await kube.list(policy, namespace=SETTINGS.namespace, label_selector="numaplane.io/owner")).items[:1]
    first["spec"]["ingress"] = [{}]  # allow everything
    await kube.replace(policy, first)
    await _eventually(lambda: assert_cluster_matches(kube, *docs), "drift undone", timeout=WITHIN)  # type: ignore[arg-type]


async def test_a_weakened_pod_security_label_is_restored(
    running: tuple[LightkubePort, list[dict[str, object]]],
) -> None:
    """The install namespace's ``restricted`` level is what keeps privileged pods out of it: a change to
    either namespace's labels is undone within seconds, like any owned object's drift."""
    kube, _ = running
    namespace = KIND_RESOURCES["Namespace"]
    enforce = "pod-security.kubernetes.io/enforce"
    for name, level in ((SETTINGS.namespace, "restricted"), (SETTINGS.node_namespace, "privileged")):
        await kube.patch(
            namespace, name, {"metadata": {"labels": {enforce: "privileged" if level != "privileged" else "baseline"}}}
        )

        async def restored(name: str = name, level: str = level) -> None:
            assert (await kube.get(namespace, name))["metadata"]["labels"][enforce] == level

        seconds = await _eventually(restored, f"{name} back to {level}", timeout=WITHIN)
        print(f"{name}: enforce label back to {level} in {seconds:.2f} s")
