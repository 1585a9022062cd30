"""Helpers of the state-machine tests: the pods and containers of ``agent_helpers`` (as a
kubelet-driven containerd sends them), passed through the NRI translation the agent's handler uses,
so the state machine sees exactly the values it sees in production."""

from __future__ import annotations

import agent_helpers

from numaplane.nri.events import RuntimeContainer, Sandbox
from numaplane.nri.proto import api_pb2
from numaplane.nri.translate import container_from_pb, sandbox_from_pb


def sandbox(
    name: str, *, qos: str = "Guaranteed", namespace: str = "default", annotations: dict[str, str] | None = None
) -> Sandbox:
    return sandbox_from_pb(agent_helpers.sandbox(name, qos=qos, namespace=namespace, annotations=annotations))


def container(pod: Sandbox, name: str = "main", **kw: object) -> RuntimeContainer:
    """As :func:`agent_helpers.container` (same keywords)."""
    return container_from_pb(agent_helpers.container(api_pb2.PodSandbox(id=pod.id, name=pod.name), name, **kw))  # type: ignore[arg-type]


def guaranteed(pod: Sandbox, name: str = "main", n: int = 1, **kw: object) -> RuntimeContainer:
    """A Guaranteed container with ``n`` CPUs and 64 MiB."""
    return container(pod, name, cpu_milli=n * 1000, cpu_limit_milli=n * 1000, memory=64 << 20, **kw)
