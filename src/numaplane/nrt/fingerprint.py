"""The pod-set fingerprint ``pfp0v001<16 hex>`` (k8stopologyawareschedwg/podfingerprint v0.2, "v001").

A fingerprint identifies a *set* of pods by ``(namespace, name)`` only (no UID, no resources):

1. per pod ``h = XXH64(name, seed=XXH64(namespace, seed=0))`` (UTF-8 bytes, unsigned 64-bit);
2. the values, duplicates kept, sorted ascending;
3. each value as 8 bytes little-endian fed into one XXH64 (seed 0);
4. the digest as 16 lowercase hex digits (big-endian), after ``pfp0`` + ``v001``: 24 characters.

So the signature does not depend on input order; a pod listed twice counts twice.

:func:`check_fingerprint` returns the upstream ``Check`` outcome (``ok`` / ``malformed`` /
``incompatible_version`` / ``signature_mismatch``); :func:`verify_fingerprint` raises the matching
:class:`~numaplane.nrt.errors.FingerprintError`. :class:`Fingerprinter` accumulates pods and records
a trace (:class:`FingerprintStatus`, the upstream status-dump JSON) in feed order.

Which pods to feed (the exporter's ``--pods-fingerprint-method``): :data:`METHOD_ALL` feeds every pod
of the PodResources ``List``; :data:`METHOD_WITH_EXCLUSIVE_RESOURCES` only pods for which
:func:`has_exclusive_resources` holds.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final, Literal

import xxhash

from numaplane.nrt.errors import (
    FingerprintError,
    FingerprintIncompatibleVersion,
    FingerprintMalformed,
    FingerprintMismatch,
)
from numaplane.nrt.podresources import PodResources

__all__ = [
    "ANNOTATION",
    "ATTRIBUTE",
    "ATTRIBUTE_METHOD",
    "METHOD_ALL",
    "METHOD_WITH_EXCLUSIVE_RESOURCES",
    "PREFIX",
    "VERSION",
    "CheckOutcome",
    "FingerprintStatus",
    "Fingerprinter",
    "check_fingerprint",
    "compute_fingerprint",
    "has_exclusive_resources",
    "parse_method",
    "pod_hash",
    "select_pods",
    "sign_sorted",
    "verify_fingerprint",
]

PREFIX: Final = "pfp0"
VERSION: Final = "v001"
ANNOTATION: Final = "topology.node.k8s.io/fingerprint"
ATTRIBUTE: Final = "nodeTopologyPodsFingerprint"
ATTRIBUTE_METHOD: Final = "nodeTopologyPodsFingerprintMethod"
METHOD_ALL: Final = "all"
METHOD_WITH_EXCLUSIVE_RESOURCES: Final = "with-exclusive-resources"

Method = Literal["all", "with-exclusive-resources"]
CheckOutcome = Literal["ok", "malformed", "incompatible_version", "signature_mismatch"]

_MIN_LEN = len(PREFIX) + len(VERSION) + 8  # upstream minimum: 16 characters


@lru_cache(maxsize=1 << 18)
def pod_hash(namespace: str, name: str) -> int:
    """The per-pod 64-bit value: ``XXH64(name, seed=XXH64(namespace, 0))`` (a pure function, memoised)."""
    seed = xxhash.xxh64_intdigest(namespace.encode("utf-8"), 0)
    return xxhash.xxh64_intdigest(name.encode("utf-8"), seed)


def _sign_hashes(hashes: list[int]) -> str:
    hashes.sort()
    return sign_sorted(hashes)


def sign_sorted(hashes: list[int]) -> str:
    """The signature of already sorted pod hashes."""
    blob = struct.pack(f"<{len(hashes)}Q", *hashes)
    return PREFIX + VERSION + xxhash.xxh64_hexdigest(blob, 0)


def compute_fingerprint(pods: Iterable[tuple[str, str]]) -> str:
    """The signature of ``(namespace, name)`` pairs (any order, duplicates counted)."""
    return _sign_hashes([pod_hash(ns, name) for ns, name in pods])


def check_fingerprint(signature: str, pods: Iterable[tuple[str, str]]) -> CheckOutcome:
    """Upstream ``Check``: shape first (length, prefix, version), then the recomputed value."""
    if len(signature) < _MIN_LEN or signature[: len(PREFIX)] != PREFIX:
        return "malformed"
    if signature[len(PREFIX) : len(PREFIX) + len(VERSION)] != VERSION:
        return "incompatible_version"
    return "ok" if signature == compute_fingerprint(pods) else "signature_mismatch"


_ERRORS: dict[str, type[FingerprintError]] = {
    "malformed": FingerprintMalformed,
    "incompatible_version": FingerprintIncompatibleVersion,
    "signature_mismatch": FingerprintMismatch,
}


def verify_fingerprint(signature: str, pods: Iterable[tuple[str, str]]) -> None:
    """Like :func:`check_fingerprint` but raise the matching :class:`FingerprintError` unless ``ok``."""
    outcome = check_fingerprint(signature, pods)
    if outcome != "ok":
        raise _ERRORS[outcome](f"fingerprint {signature!r}: {outcome.replace('_', ' ')}")


def parse_method(text: str) -> Method:
    """A ``--pods-fingerprint-method`` value (case-insensitive, as upstream); ``ValueError`` otherwise."""
    lowered = text.lower()
    if lowered == METHOD_ALL:
        return "all"
    if lowered == METHOD_WITH_EXCLUSIVE_RESOURCES:
        return "with-exclusive-resources"
    raise ValueError(
        f"unknown pod fingerprint method {text!r} (expected {METHOD_ALL!r} or {METHOD_WITH_EXCLUSIVE_RESOURCES!r})"
    )


def has_exclusive_resources(pod: PodResources) -> bool:
    """RTE's rule: some container has CPU ids, a memory block on a NUMA node ≥ 0, or device ids on one.

    Pod-level CPU ids / memory blocks (newer kubelets) count as well.
    """
    if pod.cpu_ids or any(n >= 0 for block in pod.memory for n in block.numa_nodes):
        return True
    for container in pod.containers:
        if container.cpu_ids:
            return True
        if any(n >= 0 for block in container.memory for n in block.numa_nodes):
            return True
        if any(dev.device_ids and any(n >= 0 for n in dev.numa_nodes) for dev in container.devices):
            return True
    return False


def select_pods(pods: Iterable[PodResources], method: Method) -> list[tuple[str, str]]:
    """The ``(namespace, name)`` pairs the exporter fingerprints for ``method``, in input order."""
    if method == METHOD_ALL:
        return [(p.namespace, p.name) for p in pods]
    return [(p.namespace, p.name) for p in pods if has_exclusive_resources(p)]


@dataclass(frozen=True, slots=True)
class FingerprintStatus:
    """A trace of one computation (upstream ``Status``): pods in feed order, expected vs computed."""

    fingerprint_computed: str
    pods: tuple[tuple[str, str], ...]
    fingerprint_expected: str = ""
    node_name: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The upstream status-dump JSON (empty fields omitted)."""
        out: dict[str, Any] = {}
        if self.fingerprint_expected:
            out["fingerprintExpected"] = self.fingerprint_expected
        if self.fingerprint_computed:
            out["fingerprintComputed"] = self.fingerprint_computed
        if self.pods:
            out["pods"] = [{"namespace": ns, "name": name} for ns, name in self.pods]
        if self.node_name:
            out["nodeName"] = self.node_name
        return out


class Fingerprinter:
    """Accumulates pods and signs them; with ``traced=True`` it also remembers the pods in feed order.

    Not thread-safe; cheap to create (one per computation).
    """

    def __init__(self, *, traced: bool = False, node_name: str = "") -> None:
        self._hashes: list[int] = []
        self._pods: list[tuple[str, str]] | None = [] if traced else None
        self._node_name = node_name

    def add(self, namespace: str, name: str) -> None:
        self._hashes.append(pod_hash(namespace, name))
        if self._pods is not None:
            self._pods.append((namespace, name))

    def add_all(self, pods: Iterable[tuple[str, str]]) -> None:
        for namespace, name in pods:
            self.add(namespace, name)

    def sign(self) -> str:
        return _sign_hashes(list(self._hashes))

    def check(self, signature: str) -> CheckOutcome:
        if len(signature) < _MIN_LEN or signature[: len(PREFIX)] != PREFIX:
            return "malformed"
        if signature[len(PREFIX) : len(PREFIX) + len(VERSION)] != VERSION:
            return "incompatible_version"
        return "ok" if signature == self.sign() else "signature_mismatch"

    def status(self, expected: str = "") -> FingerprintStatus:
        """The trace (pods are empty unless ``traced``)."""
        pods: Sequence[tuple[str, str]] = self._pods or ()
        return FingerprintStatus(self.sign(), tuple(pods), expected, self._node_name)
