"""Agent mode: the policy the node's agent enforces now, from the file the agent writes.

``numaplane agent --applied-policy-file`` writes the configuration in force (a ``NodeResourceConfig``
document with ``metadata.revision``, see :mod:`numaplane.agent.appliedpolicy`) at start and after every
applied change. The exporter (``--applied-policy-file``, the same host file) takes from it what it
publishes — the Topology Manager policy and scope — and the CPU and memory manager policies and
reserved CPUs it uses; the file is watched (:class:`~numaplane.exporter.events.FilesWatcher`,
:attr:`~numaplane.exporter.events.Trigger.APPLIED_POLICY`), so a new policy reaches the NRT without an
exporter restart.

A missing file (the agent has not started on this node yet) or an invalid one is an
:class:`~numaplane.exporter.errors.AppliedPolicyError`: before the first good read nothing is
published (the scan fails and is retried; readiness stays false); after it, the last good value is kept
and the error reported, as for the kubelet config file.
"""

from __future__ import annotations

from numaplane.documents import DocumentError, parse_document
from numaplane.exporter.errors import AppliedPolicyError, SourceError
from numaplane.exporter.kubelet import KubeletConfigSource
from numaplane.kube.kubeletconfig import KubeletConfiguration
from numaplane.policy.config import parse_config
from numaplane.policy.errors import PolicyConfigError
from numaplane.topology.cpuset import CPUSet

__all__ = ["AppliedPolicySource"]


class AppliedPolicySource(KubeletConfigSource):
    """The agent's applied policy file, parsed again only when it changed on disk."""

    def parse(self, text: str) -> KubeletConfiguration:
        where = str(self.path)
        try:
            doc = parse_document(text, where)
            config = parse_config(doc)
        except DocumentError as error:
            raise AppliedPolicyError(str(error)) from error
        except PolicyConfigError as error:
            raise AppliedPolicyError(f"{where}: {error}") from error
        return KubeletConfiguration(
            topology_manager_policy=config.topology_policy,
            topology_manager_scope=config.topology_scope,
            reserved_system_cpus=config.reserved_cpus or CPUSet(),
            cpu_manager_policy=config.cpu_policy,
            memory_manager_policy=config.memory_policy,
        )

    def unreadable(self, error: OSError | UnicodeDecodeError) -> SourceError:
        if isinstance(error, FileNotFoundError):
            return AppliedPolicyError(
                f"{self.path}: no applied policy yet (the node's agent writes it when it starts: "
                "is `numaplane agent --applied-policy-file` running on this node with the same file?)"
            )
        return AppliedPolicyError(f"{self.path}: cannot read: {error}")
