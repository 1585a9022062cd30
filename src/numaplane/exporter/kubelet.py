"""The kubelet settings the exporter needs, from a ``KubeletConfiguration`` YAML file and/or flags.

Read from the file (``kubelet.config.k8s.io/v1beta1`` field names): ``topologyManagerPolicy``,
``topologyManagerScope``, ``reservedSystemCPUs``, ``cpuManagerPolicy``, ``memoryManagerPolicy``.
A field absent from the file takes the kubelet's default (``none``, ``container``, no reserved
CPUs, ``none``, ``None``), because that is what the kubelet then runs with. Flags override the file
key by key (:meth:`KubeletSettings.overridden`).

Validation is strict where the value is published or used: the Topology Manager policy and scope
must be kubelet spellings, reserved CPUs a valid cpuset. Manager policies of the CPU and memory
managers are informational (logged) and kept as given; a non-string is still an error. Any problem
is a :class:`~numaplane.exporter.errors.KubeletConfigError` naming the file and field.

:class:`KubeletConfigSource` re-reads the file only when its ``(mtime, size, inode)`` changes, so
the refresh loop can ask for it on every periodic tick at the cost of one ``stat``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from numaplane.documents import DocumentError, parse_document
from numaplane.exporter.errors import KubeletConfigError, SourceError
from numaplane.topology.cpuset import CPUSet
from numaplane.topology.errors import CPUSetParseError

__all__ = [
    "TOPOLOGY_MANAGER_POLICIES",
    "TOPOLOGY_MANAGER_SCOPES",
    "KubeletConfigSource",
    "KubeletSettings",
    "parse_kubelet_config",
    "validate_policy",
    "validate_scope",
]

TOPOLOGY_MANAGER_POLICIES: Final = ("none", "best-effort", "restricted", "single-numa-node")
TOPOLOGY_MANAGER_SCOPES: Final = ("container", "pod")
_KIND: Final = "KubeletConfiguration"
_API_GROUP: Final = "kubelet.config.k8s.io/"


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


def _string(doc: Mapping[str, Any], key: str, default: str, where: str) -> str:
    value = doc.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise KubeletConfigError(f"{where}: {key} must be a string, got {type(value).__name__}")
    return value


def parse_kubelet_config(text: str, where: str = "kubelet config") -> KubeletSettings:
    """Parse a ``KubeletConfiguration`` document; ``where`` names the source in error messages."""
    try:
        doc = parse_document(text, where)
    except DocumentError as error:
        raise KubeletConfigError(str(error)) from error
    if doc is None:
        doc = {}
    if not isinstance(doc, Mapping):
        raise KubeletConfigError(f"{where}: expected a mapping, got {type(doc).__name__}")
    kind = doc.get("kind")
    if kind is not None and kind != _KIND:
        raise KubeletConfigError(f"{where}: kind is {kind!r}, expected {_KIND!r}")
    api_version = doc.get("apiVersion")
    if api_version is not None and not (isinstance(api_version, str) and api_version.startswith(_API_GROUP)):
        raise KubeletConfigError(f"{where}: apiVersion {api_version!r} is not a kubelet.config.k8s.io version")
    policy = validate_policy(_string(doc, "topologyManagerPolicy", "none", where), f"{where}: topologyManagerPolicy")
    scope = validate_scope(_string(doc, "topologyManagerScope", "container", where), f"{where}: topologyManagerScope")
    reserved_text = _string(doc, "reservedSystemCPUs", "", where)
    try:
        reserved = CPUSet.parse(reserved_text)
    except CPUSetParseError as error:
        raise KubeletConfigError(f"{where}: reservedSystemCPUs: {error}") from error
    return KubeletSettings(
        topology_manager_policy=policy,
        topology_manager_scope=scope,
        reserved_cpus=reserved,
        cpu_manager_policy=_string(doc, "cpuManagerPolicy", "none", where),
        memory_manager_policy=_string(doc, "memoryManagerPolicy", "None", where),
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
