"""The operator's API, group ``numaplane.io`` version ``v1``: three cluster-scoped custom resources.

* :mod:`.numaresources` — ``NUMAResourcesOperator`` (singleton): node groups, exporter config.
* :mod:`.scheduler` — ``NUMAResourcesScheduler`` (singleton): the NUMA-aware scheduler.
* :mod:`.policy` — ``NodeResourcePolicy`` (one per agent node group): the agent's live policy.

Each kind is a frozen dataclass with ``from_dict`` (validates everything the CRD schema cannot and
raises :class:`numaplane.operator.errors.SpecError` listing every problem) and ``to_dict``.
"""

from numaplane.operator.api.meta import API_VERSION, GROUP, VERSION
from numaplane.operator.api.numaresources import NUMAResourcesOperator
from numaplane.operator.api.policy import NodeResourcePolicy
from numaplane.operator.api.scheduler import NUMAResourcesScheduler

__all__ = ["API_VERSION", "GROUP", "VERSION", "NUMAResourcesOperator", "NUMAResourcesScheduler", "NodeResourcePolicy"]
