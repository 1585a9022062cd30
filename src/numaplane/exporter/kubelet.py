"""The kubelet settings the exporter needs, from a ``KubeletConfiguration`` YAML file and/or flags.

Read from the file with the project's one strict reader, :mod:`numaplane.kube.kubeletconfig` (the
agent's take-over check reads it too): ``kind: KubeletConfiguration`` and a
``kubelet.config.k8s.io/...`` ``apiVersion`` required, ``topologyManagerPolicy``,
``topologyManagerScope``, ``reservedSystemCPUs``, ``cpuManagerPolicy``, ``memoryManagerPolicy``
typed and checked. A field absent from the file takes the kubelet's default (``none``,
``container``, no reserved CPUs, ``none``, ``None``), because that is what the kubelet then runs
with. Flags override the file key by key (:meth:`KubeletSettings.overridden`).

Validation is strict where the value is published or used: the Topology Manager policy and scope
must be kubelet spellings, reserved CPUs a valid cpuset. Manager policies of the CPU and memory
managers are informational (logged) and kept as given; a non-string is still an error. Any problem
is a :class:`~numaplane.exporter.errors.KubeletConfigError` naming the file and field.

:class:`KubeletConfigSource` re-reads the file only when its ``(mtime, size, inode)`` changes, so
the refresh loop can ask for it on every periodic tick at the cost of one ``stat``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from numaplane.exporter.errors import KubeletConfigError, SourceError
from numaplane.kube.kubeletconfig import (
    TOPOLOGY_MANAGER_POLICIES,
    TOPOLOGY_MANAGER_SCOPES,
    KubeletConfigurationError,
    parse_kubelet_configuration,
)
from numaplane.topology.cpuset import CPUSet

__all__ = [
    "TOPOLOGY_MANAGER_POLICIES",
    "TOPOLOGY_MANAGER_SCOPES",
    "KubeletConfigSource",
    "KubeletSettings",
    "parse_kubelet_config",
    "validate_policy",
    "validate_scope",
]


@dataclass(frozen=True, slots=True)
class KubeletSettings:
    """What the exporter uses from the kubelet's configuration (kubelet spellings, as published)."""

    topology_manager_policy: str = "none"
    topology_manager_scope: str = "container"
    reserved_cpus: CPUSet = field(default_factory=CPUSet)
    cpu_manager_policy: str = "none"
    memory_manager_policy: str = "None"

    def overridden(
        self, *, policy: str | None = None, scope: str | None = None, reserved_cpus: CPUSet | None = None
    ) -> KubeletSettings:
        """These settings with the given flag values in place of the file's (``None`` keeps the file's)."""
        return replace(
            self,
            topology_manager_policy=self.topology_manager_policy if policy is None else policy,
            topology_manager_scope=self.topology_manager_scope if scope is None else scope,
            reserved_cpus=self.reserved_cpus if reserved_cpus is None else reserved_cpus,
        )

    def to_dict(self) -> dict[str, str]:
        return {
            "topologyManagerPolicy": self.topology_manager_policy,
            "topologyManagerScope": self.topology_manager_scope,
            "reservedSystemCPUs": self.reserved_cpus.format(),
            "cpuManagerPolicy": self.cpu_manager_policy,
            "memoryManagerPolicy": self.memory_manager_policy,
        }


def validate_policy(value: str, where: str = "topologyManagerPolicy") -> str:
    """``value`` if it is a Topology Manager policy in kubelet spelling; :class:`KubeletConfigError` otherwise."""
    if value not in TOPOLOGY_MANAGER_POLICIES:
        raise KubeletConfigError(f"{where}: {value!r} is not one of {', '.join(TOPOLOGY_MANAGER_POLICIES)}")
    return value


def validate_scope(value: str, where: str = "topologyManagerScope") -> str:
    """``value`` if it is a Topology Manager scope; :class:`KubeletConfigError` otherwise."""
    if value not in TOPOLOGY_MANAGER_SCOPES:
        raise KubeletConfigError(f"{where}: {value!r} is not one of {', '.join(TOPOLOGY_MANAGER_SCOPES)}")
    return value


def parse_kubelet_config(text: str, where: str = "kubelet config") -> KubeletSettings:
    """Parse a ``KubeletConfiguration`` document with the project's one strict reader
    (:func:`numaplane.kube.kubeletconfig.parse_kubelet_configuration`: ``kind`` and ``apiVersion``
    required, the fields read typed and checked); ``where`` names the source in error messages."""
    try:
        config = parse_kubelet_configuration(text, where)
    except KubeletConfigurationError as error:
        raise KubeletConfigError(str(error)) from None
    return KubeletSettings(
        topology_manager_policy=config.topology_manager_policy,
        topology_manager_scope=config.topology_manager_scope,
        reserved_cpus=config.reserved_system_cpus,
        cpu_manager_policy=config.cpu_manager_policy,
        memory_manager_policy=config.memory_manager_policy,
    )


class KubeletConfigSource:
    """The kubelet config file, parsed again only when it changed on disk.

    :meth:`read` raises :class:`KubeletConfigError` on every call while the file is unusable (so each
    failed refresh is counted); a later good read replaces the value. Subclasses read other files
    into the same settings by overriding :meth:`parse` and :meth:`unreadable`.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._stamp: tuple[int, int, int] | None = None
        self._settings: KubeletSettings | None = None

    def parse(self, text: str) -> KubeletSettings:
        """The settings in the file's ``text``; raises a :class:`~numaplane.exporter.errors.SourceError`."""
        return parse_kubelet_config(text, str(self.path))

    def unreadable(self, error: OSError | UnicodeDecodeError) -> SourceError:
        """The error for a file that cannot be read."""
        return KubeletConfigError(f"{self.path}: cannot read: {error}")

    def read(self) -> KubeletSettings:
        try:
            st = self.path.stat()
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
            if stamp == self._stamp and self._settings is not None:
                return self._settings
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            self._stamp = None
            raise self.unreadable(error) from error
        try:
            settings = self.parse(text)
        except SourceError:
            self._stamp = None
            raise
        self._stamp, self._settings = stamp, settings
        return settings
