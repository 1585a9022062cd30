"""The one strict reader of the kubelet's configuration file (``KubeletConfiguration``).

The exporter (kubelet mode: the policies it publishes) and the agent (the take-over check: refuse to
enforce while the kubelet's static managers are on) read the same file, so they read it here and agree
on what it is:

* the text is a document of :mod:`numaplane.documents` (bounded size and nesting, YAML aliases to
  mappings or lists refused, integers bounded), one mapping;
* ``kind: KubeletConfiguration`` and ``apiVersion: kubelet.config.k8s.io/<version>`` are required, as
  the kubelet's own loader requires them: an empty file, a Pod manifest or a bare list of fields is
  not the kubelet's configuration, and reading it as one would publish or enforce a guess;
* the fields numaplane reads are typed and checked as the kubelet validates them:
  ``topologyManagerPolicy`` (:data:`TOPOLOGY_MANAGER_POLICIES`), ``topologyManagerScope``
  (:data:`TOPOLOGY_MANAGER_SCOPES`), ``reservedSystemCPUs`` (a cpuset), ``cpuManagerPolicy`` and
  ``memoryManagerPolicy`` (strings, kept as given: informational); an absent field takes the kubelet's
  default;
* unknown fields: the rest of the kubelet's ~100 fields are not ours to judge and are ignored (a newer
  kubelet adds fields); but a key that differs from one of the fields above only by case
  (``TopologyManagerPolicy``) is refused: the kubelet's strict decoding calls it unknown and its lenient
  fallback reads it, so which value the node runs cannot be told from the file;
* with ``envelope=True`` (the agent's ``/configz`` URL) the kubelet's ``{"kubeletconfig": {...}}``
  answer is accepted too: the kubelet writes it without ``kind`` and ``apiVersion``.

Every problem is a :class:`KubeletConfigurationError` naming the source (file or URL), the field path
(when one field is wrong) and the reason, on one line. Pure apart from the optional file read
(:func:`read_kubelet_configuration`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from numaplane.documents import DocumentError, parse_document
from numaplane.topology.cpuset import CPUSet
from numaplane.topology.errors import CPUSetParseError

__all__ = [
    "API_GROUP",
    "KIND",
    "MAX_KUBELET_CONFIG_BYTES",
    "TOPOLOGY_MANAGER_POLICIES",
    "TOPOLOGY_MANAGER_SCOPES",
    "KubeletConfiguration",
    "KubeletConfigurationError",
    "parse_kubelet_configuration",
    "read_kubelet_configuration",
]

KIND: Final = "KubeletConfiguration"
API_GROUP: Final = "kubelet.config.k8s.io/"
TOPOLOGY_MANAGER_POLICIES: Final = ("none", "best-effort", "restricted", "single-numa-node")
TOPOLOGY_MANAGER_SCOPES: Final = ("container", "pod")
#: Largest kubelet configuration read (bytes); a real one is a few KiB.
MAX_KUBELET_CONFIG_BYTES: Final = 1024 * 1024
#: The fields read, with the kubelet's defaults.
_DEFAULTS: Final = {
    "topologyManagerPolicy": "none",
    "topologyManagerScope": "container",
    "reservedSystemCPUs": "",
    "cpuManagerPolicy": "none",
    "memoryManagerPolicy": "None",
}


class KubeletConfigurationError(ValueError):
    """A kubelet configuration that cannot be used. ``source``: the file or URL; ``field``: the field
    path or ``None``; ``reason``: why. The message is ``"<source>: [<field>: ]<reason>"``."""

    def __init__(self, source: str, reason: str, field: str | None = None) -> None:
        super().__init__(f"{source}: {field}: {reason}" if field else f"{source}: {reason}")
        self.source = source
        self.field = field
        self.reason = reason


@dataclass(frozen=True, slots=True)
class KubeletConfiguration:
    """The fields numaplane reads, typed (kubelet spellings), and the whole ``document`` as read.

    The exporter publishes and uses this value as is (its flags override it key by key:
    :meth:`overridden`; the agent's applied policy file gives one too, without a document). Two values
    are equal when their five fields are: ``document`` is where they came from, not what they say."""

    topology_manager_policy: str = "none"
    topology_manager_scope: str = "container"
    reserved_system_cpus: CPUSet = field(default_factory=CPUSet)
    cpu_manager_policy: str = "none"
    memory_manager_policy: str = "None"
    document: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def overridden(
        self, *, policy: str | None = None, scope: str | None = None, reserved_cpus: CPUSet | None = None
    ) -> KubeletConfiguration:
        """This configuration with the given flag values in place of the file's (``None`` keeps the file's)."""
        return replace(
            self,
            topology_manager_policy=self.topology_manager_policy if policy is None else policy,
            topology_manager_scope=self.topology_manager_scope if scope is None else scope,
            reserved_system_cpus=self.reserved_system_cpus if reserved_cpus is None else reserved_cpus,
        )

    def to_dict(self) -> dict[str, str]:
        """The five fields under the kubelet's names (``reservedSystemCPUs`` as a cpuset string)."""
        return {
            "topologyManagerPolicy": self.topology_manager_policy,
            "topologyManagerScope": self.topology_manager_scope,
            "reservedSystemCPUs": self.reserved_system_cpus.format(),
            "cpuManagerPolicy": self.cpu_manager_policy,
            "memoryManagerPolicy": self.memory_manager_policy,
        }


def _what(doc: Any) -> str:
    if doc is None or doc == {}:
        return "the file is empty"
    if not isinstance(doc, Mapping):
        return f"a {type(doc).__name__}, not a mapping"
    kind = doc.get("kind")
    return f"kind {kind!r}" if kind is not None else "no kind"


def _string(doc: Mapping[str, Any], key: str, source: str, field_path: str) -> str:
    value = doc.get(key)
    if value is None:
        return _DEFAULTS[key]
    if not isinstance(value, str):
        raise KubeletConfigurationError(source, f"must be a string, got {type(value).__name__}", field_path + key)
    return value


def _one_of(value: str, allowed: tuple[str, ...], source: str, field_path: str) -> str:
    if value not in allowed:
        raise KubeletConfigurationError(source, f"{value!r} is not one of {', '.join(allowed)}", field_path)
    return value


def parse_kubelet_configuration(text: str, source: str, *, envelope: bool = False) -> KubeletConfiguration:
    """The kubelet configuration in ``text`` (module docstring); ``source`` names it in errors.

    Raises :class:`KubeletConfigurationError`."""
    if len(text) > MAX_KUBELET_CONFIG_BYTES:
        raise KubeletConfigurationError(source, f"larger than {MAX_KUBELET_CONFIG_BYTES} bytes")
    try:
        doc = parse_document(text, source) if text.strip() else None
    except DocumentError as exc:
        raise KubeletConfigurationError(source, exc.reason) from None
    prefix = ""
    if envelope and isinstance(doc, Mapping) and set(doc) == {"kubeletconfig"}:
        doc, prefix = doc["kubeletconfig"], "kubeletconfig."  # /configz: the kubelet's own, without kind
        if not isinstance(doc, Mapping):
            raise KubeletConfigurationError(source, f"not a KubeletConfiguration ({_what(doc)})", "kubeletconfig")
    elif not isinstance(doc, Mapping) or doc.get("kind") != KIND:
        raise KubeletConfigurationError(source, f"not a {KIND} ({_what(doc)})")
    else:
        api_version = doc.get("apiVersion")
        if api_version is None:
            raise KubeletConfigurationError(
                source, f"not a {KIND} (no apiVersion; the kubelet needs {API_GROUP}v1beta1)"
            )
        if not (isinstance(api_version, str) and api_version.startswith(API_GROUP)):
            raise KubeletConfigurationError(source, f"not a {KIND} (apiVersion {api_version!r} is not {API_GROUP}...)")
    for key in doc:
        if not isinstance(key, str):
            raise KubeletConfigurationError(source, f"field name {key!r} is not a string", prefix.rstrip(".") or None)
        lowered = key.lower()
        for known in _DEFAULTS:
            if key != known and lowered == known.lower():
                raise KubeletConfigurationError(
                    source,
                    f"unknown field (the kubelet's field is {known}: its strict decoding refuses {key}, its "
                    "lenient fallback reads it, so the value in force cannot be told)",
                    prefix + key,
                )
    policy = _one_of(
        _string(doc, "topologyManagerPolicy", source, prefix),
        TOPOLOGY_MANAGER_POLICIES,
        source,
        prefix + "topologyManagerPolicy",
    )
    scope = _one_of(
        _string(doc, "topologyManagerScope", source, prefix),
        TOPOLOGY_MANAGER_SCOPES,
        source,
        prefix + "topologyManagerScope",
    )
    try:
        reserved = CPUSet.parse(_string(doc, "reservedSystemCPUs", source, prefix))
    except CPUSetParseError as exc:
        raise KubeletConfigurationError(source, str(exc), prefix + "reservedSystemCPUs") from None
    return KubeletConfiguration(
        topology_manager_policy=policy,
        topology_manager_scope=scope,
        reserved_system_cpus=reserved,
        cpu_manager_policy=_string(doc, "cpuManagerPolicy", source, prefix),
        memory_manager_policy=_string(doc, "memoryManagerPolicy", source, prefix),
        document=doc,
    )


def read_kubelet_configuration(path: str | Path) -> KubeletConfiguration:
    """:func:`parse_kubelet_configuration` of the file at ``path`` (read at most the size limit + 1 byte)."""
    source = str(path)
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_KUBELET_CONFIG_BYTES + 1)
        text = data.decode("utf-8")
    except OSError as exc:
        raise KubeletConfigurationError(source, f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise KubeletConfigurationError(source, f"not UTF-8 text: {exc.reason}") from None
    return parse_kubelet_configuration(text, source)
