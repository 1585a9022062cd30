"""The agent reports the policy revision it applied or rejected on its own pod, as the operator reads it."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from test_agent_nri import TOPOLOGY, options

from numaplane.agent.daemon import Agent
from numaplane.agent.policyreport import CONDITION_TYPE, PolicyReporter
from numaplane.kube.client import LightkubePort
from numaplane.kube.resources import POD
from numaplane.operator.status import POLICY_CONDITION, NodePolicyState, node_policy_state
from numaplane.testing.fakeapi import FakeApiServer
from numaplane_harness.nrifake import FakeRuntime

pytestmark = pytest.mark.timeout(60)

NAMESPACE = "numaplane-system"
READY = {"type": "Ready", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z"}


def document(revision: str, reserved: str = "0") -> dict[str, Any]:
    return {
        "metadata": {"policy": "latency", "nodeGroup": "latency", "revision": revision},
        "topologyManager": {"policy": "single-numa-node"},
        "cpuManager": {"reservedCPUs": reserved},
    }


async def agent_pod(kube: LightkubePort) -> dict[str, Any]:
    pod = await kube.create(
        POD,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "numaplane-agent-x1", "namespace": NAMESPACE},
            "spec": {"nodeName": "node-a", "containers": [{"name": "agent", "image": "numaplane"}]},
        },
    )
    return await kube.update_status(POD, {**pod, "status": {"phase": "Running", "conditions": [READY]}})


async def wait_state(kube: LightkubePort, revision: str, state: NodePolicyState) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while True:
        pod = await kube.get(POD, "numaplane-agent-x1", namespace=NAMESPACE)
        if node_policy_state(pod, revision)[0] is state:
            return pod
        assert time.monotonic() < deadline, (revision, state, pod.get("status"))
        await asyncio.sleep(0.05)


def conditions(pod: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in pod["status"]["conditions"]}


def test_the_condition_type_is_the_operators() -> None:
    assert CONDITION_TYPE == POLICY_CONDITION


async def test_applied_rejected_applied_reach_the_pod(short_tmp: Path, fake_kube: LightkubePort) -> None:
    await agent_pod(fake_kube)
    config = short_tmp / "config.json"
    config.write_text(json.dumps(document("r1")))
    runtime = FakeRuntime()
    await runtime.listen(str(short_tmp / "nri.sock"))
    opts = options(short_tmp, pod_name="numaplane-agent-x1", pod_namespace=NAMESPACE)
    agent = Agent(opts, topology=TOPOLOGY, kube=fake_kube)
    await agent.start()
    try:
        pod = await wait_state(fake_kube, "r1", NodePolicyState.APPLIED)
        first = conditions(pod)[CONDITION_TYPE]
        assert first["message"] == "revision r1" and first["reason"] == "Applied"
        assert conditions(pod)["Ready"] == READY  # the kubelet's conditions are kept
        # an invalid policy (CPU 99 does not exist) is rejected and the reason reaches the operator
        config.write_text(json.dumps(document("r2", reserved="99")))
        pod = await wait_state(fake_kube, "r2", NodePolicyState.REJECTED)
        _, revision, message = node_policy_state(pod, "r2")
        assert revision == "r2" and message, message
        assert conditions(pod)[CONDITION_TYPE]["reason"] == "Rejected"
        config.write_text(json.dumps(document("r3", reserved="0-1")))
        pod = await wait_state(fake_kube, "r3", NodePolicyState.APPLIED)
        assert conditions(pod)["Ready"] == READY
    finally:
        await agent.stop()
        await runtime.close()


async def test_api_errors_are_retried_and_documents_without_revision_are_not_reported(
    fake_apiserver: FakeApiServer,
) -> None:
    kube = fake_apiserver.port_client()
    try:
        await agent_pod(kube)
        reporter = PolicyReporter(kube, NAMESPACE, "numaplane-agent-x1", retry_initial_seconds=0.02)
        reporter.start()
        reporter.report({"topologyManager": {}}, True)  # hand-written config: nothing to report
        await asyncio.sleep(0.1)
        assert CONDITION_TYPE not in conditions(await kube.get(POD, "numaplane-agent-x1", namespace=NAMESPACE))
        faults = [
            fake_apiserver.faults.add(500, verb="update", resource="pods/status"),
            fake_apiserver.faults.add(409, verb="update", resource="pods/status"),
        ]
        reporter.report(document("r9"), False, "no such CPU")
        pod = await wait_state(kube, "r9", NodePolicyState.REJECTED)
        assert [f.hits for f in faults] == [1, 1]
        assert node_policy_state(pod, "r9")[2] == "no such CPU"
        await reporter.stop()
    finally:
        await kube.close()
