"""The canary's starting point (issue 23 item 5): the NRT it is judged against must be current.

On a real node the canary failed with "the exporter does not see its exclusive CPUs" although the
exporter did: the NRT read before the canary still counted the CPU of a pod deleted a moment before
(its exporter was being replaced, so nothing had published the release). The canary then took that
very CPU, the NRT did not change, and the check waited for a drop that could never come.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from numaplane.e2e.serial import SerialOptions, SerialRun, pods_exclusive_cpus, zone_cpus_in_use, zone_cpus_used
from numaplane.e2e.view import ClusterView
from numaplane.kube.resources import CRD, NODE_RESOURCE_TOPOLOGY, POD
from numaplane.testing.fakeapi import FakeApiServer
from numaplane.testing.fakeapi.crd import crd_for


def _pod(name: str, cpu: str, *, limit: str | None = None, **meta: Any) -> dict[str, Any]:
    resources = {"requests": {"cpu": cpu, "memory": "64Mi"}, "limits": {"cpu": limit or cpu, "memory": "64Mi"}}
    return {
        "metadata": {"name": name, "namespace": "ns", **meta},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "pause", "resources": resources}]},
        "status": {"phase": "Running"},
    }


def _nrt(available: int) -> dict[str, Any]:
    row = {"name": "cpu", "capacity": "2", "allocatable": "1", "available": str(available)}
    return {"metadata": {"name": "n1"}, "zones": [{"name": "node-0", "type": "Node", "resources": [row]}]}


def test_exclusive_cpus_are_those_the_kubelet_pins() -> None:
    sidecar = _pod("side", "1")
    sidecar["spec"]["initContainers"] = [
        {**sidecar["spec"]["containers"][0], "name": "s", "restartPolicy": "Always"},
        {**sidecar["spec"]["containers"][0], "name": "init"},  # a plain init container's CPUs are reused
    ]
    done = _pod("done", "4")
    done["status"]["phase"] = "Succeeded"
    pods = [
        _pod("g", "2"),
        _pod("fraction", "500m"),
        _pod("burstable", "1", limit="2"),
        _pod("going", "3", deletionTimestamp="2026-01-01T00:00:00Z"),
        _pod("skipped", "5"),
        done,
        sidecar,
    ]
    assert pods_exclusive_cpus(pods, lambda ns, name: name == "skipped") == 2 + 2
    assert zone_cpus_used(_nrt(0)) == 1


async def _run(server: FakeApiServer, nrt: dict[str, Any], pods: list[dict[str, Any]]) -> SerialRun:
    await server.store.create(CRD, crd_for(NODE_RESOURCE_TOPOLOGY))
    await server.store.create(NODE_RESOURCE_TOPOLOGY, nrt)
    for pod in pods:
        created = await server.store.create(POD, copy.deepcopy(pod))
        await server.store.update_status(POD, {**created, "status": pod["status"]})
    return SerialRun(server.port_client(), ClusterView("ns"), SerialOptions(timeout_seconds=2, interval_seconds=0.1))


async def test_a_stale_nrt_is_waited_for_and_named(fake_apiserver: FakeApiServer) -> None:
    # the NRT still counts the CPU of a pod that is gone: the canary must not start from it
    run = await _run(fake_apiserver, _nrt(0), [])
    try:
        with pytest.raises(TimeoutError) as caught:
            await run.settled("n1")
        assert str(caught.value) == (
            "the NRT to agree with the node's pods before the canary: not within 2 s: its zones show 1 exclusive"
            " CPUs in use, the node's Guaranteed pods hold 0"
        )

        async def publish_the_release() -> None:  # the exporter (its new pod) catches up
            await asyncio.sleep(0.5)
            live = await fake_apiserver.store.get(NODE_RESOURCE_TOPOLOGY, "n1")
            await fake_apiserver.store.replace(NODE_RESOURCE_TOPOLOGY, {**live, "zones": _nrt(1)["zones"]})

        task = asyncio.create_task(publish_the_release())
        assert await run.settled("n1") == {"node-0": 0.0}
        await task
    finally:
        await run.port.close()


async def test_an_nrt_that_counts_the_nodes_pods_is_taken_at_once(fake_apiserver: FakeApiServer) -> None:
    run = await _run(fake_apiserver, _nrt(0), [_pod("g", "1")])
    try:
        assert await run.settled("n1") == {"node-0": 1.0}
    finally:
        await run.port.close()


def test_the_canary_is_measured_in_cpus_in_use_not_available() -> None:
    """Seen on the real node: the NRT before the canary came from the exporter of the group's previous
    (kubelet) mode, 0 CPUs allocatable and 0 available; the agent-mode exporter then published 1
    allocatable, 0 available with the canary's CPU. ``available`` did not move, the CPUs in use did."""
    before = {"metadata": {"name": "n1"}, "zones": [_nrt(0)["zones"][0]]}
    before["zones"][0]["resources"][0].update(allocatable="0", available="0")
    after = _nrt(0)
    assert zone_cpus_in_use(before) == {"node-0": 0.0} and zone_cpus_in_use(after) == {"node-0": 1.0}
