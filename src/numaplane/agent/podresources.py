"""The agent's allocations as a kubelet PodResources v1 provider (served by ``grpcapi.podresources``).

Every answer is computed from the current state, inside the agent's state-machine serialisation, so a reader
never sees a half-applied change. Pods are listed with all the containers the agent tracks;
containers in the shared pool have no CPU ids (as the kubelet lists them); exclusive CPUs, pinned
memory blocks and devices come from the resource manager. ``GetAllocatableResources`` reports the
CPUs that are not reserved, and memory per NUMA node only with the static memory policy (the
kubelet's semantics).
"""

from __future__ import annotations

from collections.abc import Sequence

from numaplane.agent.handler import StateRunner
from numaplane.nrt.podresources import AllocatableResources, PodResources

__all__ = ["AgentPodResources"]


class AgentPodResources:
    """A :class:`~numaplane.grpcapi.podresources.server.PodResourcesProvider` over the agent's state machine."""

    def __init__(self, runner: StateRunner) -> None:
        self.runner = runner

    async def list_pods(self) -> Sequence[PodResources]:
        _, pods = await self.runner.call(self.runner.state.pod_resources)
        return pods

    async def allocatable_resources(self) -> AllocatableResources:
        allocatable, _ = await self.runner.call(self.runner.state.pod_resources)
        return allocatable

    async def get_pod(self, namespace: str, name: str) -> PodResources | None:
        for pod in await self.list_pods():
            if pod.namespace == namespace and pod.name == name:
                return pod
        return None
