"""Errors of the exporter component.

Every failure the exporter survives is one of these types; each carries ``kind``, the value of the
``kind`` label of ``numaplane_exporter_errors_total`` (a small, fixed set: no object names, no ids).

Exception tree::

    ExporterError                     (base; ``kind`` = metric label)
    ├── ExporterConfigError           bad options or notify file at start-up (also a ValueError);
    │                                 the only error that stops the daemon
    ├── SourceError                   an input could not be read; the scan is abandoned (fast inputs)
    │   │                             or the previous good value is kept (slow inputs)
    │   ├── PodResourcesSourceError   the PodResources API failed: ``podresources_unavailable``
    │   │                             (socket missing, refused, timeout), ``podresources_unsupported``
    │   │                             (method not served) or ``podresources_call``
    │   ├── MalformedPodResources     an undecodable or inconsistent PodResources answer (a CPU the
    │   │                             machine does not have, an empty pod name, unparsable JSON)
    │   ├── KubeletConfigError        the kubelet config file is unreadable, not YAML, not a
    │   │                             KubeletConfiguration, or holds an invalid value
    │   ├── AppliedPolicyError        the agent's applied policy file is missing (the agent has not
    │   │                             written it yet), unreadable or not a valid configuration
    │   └── SysfsSourceError          sysfs discovery failed (names the file)
    └── PublishError                  the object could not be written; the last one stays published
        ├── ForeignObjectError        the NRT object on the server is not ours (no or another
        │                             ``app.kubernetes.io/managed-by`` label): never overwritten
        ├── InvalidServerObject       the object on the server is ours but malformed; reported, then
        │                             repaired by the next write (raised only by the comparison helper)
        ├── InvalidObjectError        the object we computed fails the CRD schema (a bug): not sent
        └── ApiWriteError             the API server refused or failed: ``api_conflict``, ``api_gone``,
                                      ``api_server``, ``api_unavailable``, ``api_forbidden``,
                                      ``api_invalid``, ``api_not_found`` (``cause`` is the
                                      :class:`numaplane.kube.errors.KubeError`)

Other kinds counted without an exception type of their own: ``node_lookup`` (the Node for the
owner reference could not be read), ``watch`` (the list+watch mirrors of the NRT object or of the
node's pods broke and are relisting), ``internal`` (an unexpected exception in a refresh cycle,
logged with its traceback; the loop keeps running).
"""

from __future__ import annotations

from numaplane.kube.errors import (
    AlreadyExists,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    KubeError,
    NotFound,
    ServerError,
    Unavailable,
)

__all__ = [
    "ApiWriteError",
    "AppliedPolicyError",
    "ExporterConfigError",
    "ExporterError",
    "ForeignObjectError",
    "InvalidObjectError",
    "InvalidServerObject",
    "KubeletConfigError",
    "MalformedPodResources",
    "PodResourcesSourceError",
    "PublishError",
    "SourceError",
    "SysfsSourceError",
    "api_error_kind",
]


class ExporterError(Exception):
    """Base class of the exporter's errors; ``kind`` labels the error metric."""

    kind: str = "internal"

    def __init__(self, message: str, *, kind: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if kind is not None:
            self.kind = kind


class ExporterConfigError(ExporterError, ValueError):
    """Invalid options (raised before the daemon starts)."""

    kind = "config"


class SourceError(ExporterError):
    """An input of the scan could not be read."""

    kind = "source"


class PodResourcesSourceError(SourceError):
    """The PodResources API did not answer usefully (``kind`` says how)."""

    kind = "podresources_call"


class MalformedPodResources(SourceError):
    """A PodResources answer that cannot be decoded or contradicts the machine."""

    kind = "podresources_malformed"


class KubeletConfigError(SourceError):
    """The kubelet configuration file cannot be used."""

    kind = "kubelet_config"


class AppliedPolicyError(SourceError):
    """The agent's applied policy file cannot be used (agent mode)."""

    kind = "applied_policy"


class SysfsSourceError(SourceError):
    """Topology discovery from sysfs failed."""

    kind = "sysfs"


class PublishError(ExporterError):
    """The NodeResourceTopology object could not be published."""

    kind = "publish"


class ForeignObjectError(PublishError):
    """The object on the server belongs to someone else (see :mod:`numaplane.exporter.publisher`)."""

    kind = "foreign_object"


class InvalidServerObject(PublishError):
    """The object on the server is ours but does not parse or validate."""

    kind = "invalid_server_object"


class InvalidObjectError(PublishError):
    """The computed object fails the CRD schema (a bug: it is never sent)."""

    kind = "invalid_object"


_API_KINDS: tuple[tuple[type[KubeError], str], ...] = (
    (AlreadyExists, "api_conflict"),
    (Conflict, "api_conflict"),
    (Gone, "api_gone"),
    (NotFound, "api_not_found"),
    (Invalid, "api_invalid"),
    (Forbidden, "api_forbidden"),
    (ServerError, "api_server"),
    (Unavailable, "api_unavailable"),
)


def api_error_kind(error: KubeError) -> str:
    """The metric kind of an API error (``api_other`` for codes without a kind of their own)."""
    for cls, kind in _API_KINDS:
        if isinstance(error, cls):
            return kind
    return "api_other"


class ApiWriteError(PublishError):
    """The API server refused or failed a request of the publisher; ``cause`` is the port error."""

    def __init__(self, message: str, cause: KubeError) -> None:
        super().__init__(message, kind=api_error_kind(cause))
        self.cause = cause
