"""The kubelet settings the exporter needs, from a ``KubeletConfiguration`` YAML file and/or flags.

Read from the file with the project's one strict reader, :mod:`numaplane.kube.kubeletconfig` (the
agent's take-over check reads it too): ``kind: KubeletConfiguration`` and a
``kubelet.config.k8s.io/...`` ``apiVersion`` required, ``topologyManagerPolicy``,
``topologyManagerScope``, ``reservedSystemCPUs``, ``cpuManagerPolicy``, ``memoryManagerPolicy``
typed and checked. A field absent from the file takes the kubelet's default (``none``,
``container``, no reserved CPUs, ``none``, ``None``), because that is what the kubelet then runs
with. The value is the reader's own :class:`~numaplane.kube.kubeletconfig.KubeletConfiguration`; flags
override the file key by key (:meth:`~numaplane.kube.kubeletconfig.KubeletConfiguration.overridden`).

Validation is strict where the value is published or used: the Topology Manager policy and scope
must be kubelet spellings, reserved CPUs a valid cpuset. Manager policies of the CPU and memory
managers are informational (logged) and kept as given; a non-string is still an error. Any problem
is a :class:`~numaplane.exporter.errors.KubeletConfigError` naming the file and field.

:class:`KubeletConfigSource` re-reads the file only when its ``(mtime, size, inode)`` changes, so
the refresh loop can ask for it on every periodic tick at the cost of one ``stat``.
"""

from __future__ import annotations

import os
from pathlib import Path

from numaplane.exporter.errors import KubeletConfigError, SourceError
from numaplane.kube.kubeletconfig import (
    TOPOLOGY_MANAGER_POLICIES,
    TOPOLOGY_MANAGER_SCOPES,
    KubeletConfiguration,
    KubeletConfigurationError,
    parse_kubelet_configuration,
)

__all__ = [
    "TOPOLOGY_MANAGER_POLICIES",
    "TOPOLOGY_MANAGER_SCOPES",
    "KubeletConfigSource",
    "parse_kubelet_config",
    "validate_policy",
    "validate_scope",
]


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


def parse_kubelet_config(text: str, where: str = "kubelet config") -> KubeletConfiguration:
    """Parse a ``KubeletConfiguration`` document with the project's one strict reader
    (:func:`numaplane.kube.kubeletconfig.parse_kubelet_configuration`: ``kind`` and ``apiVersion``
    required, the fields read typed and checked); ``where`` names the source in error messages."""
    try:
        return parse_kubelet_configuration(text, where)
    except KubeletConfigurationError as error:
        raise KubeletConfigError(str(error)) from None


class KubeletConfigSource:
    """The kubelet config file, parsed again only when it changed on disk.

    :meth:`read` raises :class:`KubeletConfigError` on every call while the file is unusable (so each
    failed refresh is counted); a later good read replaces the value. Subclasses read other files
    into the same settings by overriding :meth:`parse` and :meth:`unreadable`.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._stamp: tuple[int, int, int] | None = None
        self._settings: KubeletConfiguration | None = None

    def parse(self, text: str) -> KubeletConfiguration:
        """The settings in the file's ``text``; raises a :class:`~numaplane.exporter.errors.SourceError`."""
        return parse_kubelet_config(text, str(self.path))

    def unreadable(self, error: OSError | UnicodeDecodeError) -> SourceError:
        """The error for a file that cannot be read."""
        return KubeletConfigError(f"{self.path}: cannot read: {error}")

    def read(self) -> KubeletConfiguration:
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
