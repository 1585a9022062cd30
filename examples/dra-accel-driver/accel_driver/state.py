"""The driver's node state: its device inventory, the claims it prepared (checkpoint) and their CDI specs.

Invariants:

* A claim is *prepared* exactly when its uid is in the checkpoint; its CDI spec file exists then too (it
  is written before the checkpoint records the claim, and removed before the checkpoint forgets it, so a
  crash between the two leaves at worst an unreferenced spec that the next prepare/unprepare rewrites or
  removes).
* A device is prepared for at most one claim at a time (the allocator gives each device to one claim;
  a second claim naming it is refused with :class:`PrepareError`).
* :meth:`DriverState.prepare` and :meth:`DriverState.unprepare` are idempotent: the kubelet repeats them
  after its own restarts and after errors.

No I/O other than the checkpoint file and the CDI spec folder; the API is read by the caller.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DRIVER_NAME = "accel.example.com"
#: CDI kind ("<vendor>/<class>") of the devices this driver prepares
CDI_KIND = f"{DRIVER_NAME}/accel"
#: the CDI spec version written (containerd 1.7's CDI library reads it)
CDI_VERSION = "0.5.0"
#: the standard NUMA attribute (KEP-6072) and the driver's own attributes in its ResourceSlice
NUMA_ATTRIBUTE = "resource.kubernetes.io/numaNode"
CHECKPOINT_VERSION = 1

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


class DriverConfigError(ValueError):
    """A device inventory or option that cannot be used; the message names the input."""


class CheckpointError(Exception):
    """The checkpoint file cannot be read back (corrupt, wrong version, bad checksum); names the file."""


class PrepareError(Exception):
    """A claim cannot be prepared (or unprepared); the message names the claim and why. Per claim: the
    other claims of the same request are still answered."""


@dataclass(frozen=True)
class AccelDevice:
    """One accelerator of this node: its device name (a DNS label) and NUMA node (>= 0)."""

    name: str
    numa_node: int


def parse_devices(text: str) -> tuple[AccelDevice, ...]:
    """``"accel-0=0,accel-1=1"`` → the inventory, in the given order.

    Raises :class:`DriverConfigError` naming the bad entry: empty inventory, a name that is not a DNS
    label, a NUMA node that is not a non-negative integer, a name given twice.
    """
    devices: list[AccelDevice] = []
    seen: set[str] = set()
    entries = [e.strip() for e in text.split(",")] if text.strip() else []
    if not entries:
        raise DriverConfigError("--devices: no device given (expected e.g. accel-0=0,accel-1=1)")
    for entry in entries:
        name, sep, numa = entry.partition("=")
        name, numa = name.strip(), numa.strip()
        if not sep:
            raise DriverConfigError(f"--devices: {entry!r} is not <name>=<NUMA node>")
        if not _DNS_LABEL.match(name):
            raise DriverConfigError(f"--devices: device name {name!r} is not a DNS label (a-z, 0-9, '-', <= 63)")
        if not numa.isdigit():
            raise DriverConfigError(f"--devices: NUMA node {numa!r} of {name} is not a non-negative integer")
        if name in seen:
            raise DriverConfigError(f"--devices: device {name} is given twice")
        seen.add(name)
        devices.append(AccelDevice(name, int(numa)))
    return tuple(devices)


@dataclass(frozen=True)
class PreparedDevice:
    """One device of a prepared claim, as answered to the kubelet."""

    request_names: tuple[str, ...]
    pool: str
    device: str
    cdi_device_ids: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "requestNames": list(self.request_names),
            "pool": self.pool,
            "device": self.device,
            "cdiDeviceIDs": list(self.cdi_device_ids),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> PreparedDevice:
        return cls(
            tuple(str(r) for r in doc["requestNames"]),
            str(doc["pool"]),
            str(doc["device"]),
            tuple(str(c) for c in doc["cdiDeviceIDs"]),
        )


@dataclass(frozen=True)
class PreparedClaim:
    uid: str
    namespace: str
    name: str
    devices: tuple[PreparedDevice, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "devices": [d.to_json() for d in self.devices],
        }


def encode_checkpoint(claims: Mapping[str, PreparedClaim]) -> str:
    """The checkpoint document: ``{"version", "claims": {uid: …}, "checksum"}``, keys sorted; the checksum is
    the sha256 of the canonical JSON of ``claims``."""
    body = {uid: claims[uid].to_json() for uid in sorted(claims)}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    checksum = hashlib.sha256(canonical.encode()).hexdigest()
    return json.dumps({"version": CHECKPOINT_VERSION, "claims": body, "checksum": checksum}, indent=2, sort_keys=True)


def decode_checkpoint(text: str, source: str) -> dict[str, PreparedClaim]:
    """Inverse of :func:`encode_checkpoint`; :class:`CheckpointError` naming ``source`` on any defect."""
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict) or doc.get("version") != CHECKPOINT_VERSION:
            raise CheckpointError(f"checkpoint {source}: not a version {CHECKPOINT_VERSION} accel driver checkpoint")
        body = doc["claims"]
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
        if hashlib.sha256(canonical.encode()).hexdigest() != doc.get("checksum"):
            raise CheckpointError(f"checkpoint {source}: checksum mismatch (the file was changed or cut short)")
        return {
            str(uid): PreparedClaim(
                str(uid),
                str(c["namespace"]),
                str(c["name"]),
                tuple(PreparedDevice.from_json(d) for d in c["devices"]),
            )
            for uid, c in body.items()
        }
    except CheckpointError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CheckpointError(f"checkpoint {source}: cannot be read: {exc}") from None


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def cdi_device_name(claim_uid: str, device: str) -> str:
    """The CDI device name of ``device`` prepared for a claim (unique per claim and device)."""
    return f"{claim_uid}-{device}"


def cdi_spec(claim: PreparedClaim, inventory: Mapping[str, AccelDevice]) -> dict[str, Any]:
    """The CDI spec of one prepared claim: one CDI device per accelerator, whose container edits set
    ``ACCEL_DEVICE_<NAME>=<NUMA node>`` (the fake device is an environment variable), plus
    ``ACCEL_CLAIM=<namespace>/<name>`` on every device."""
    devices = []
    for prepared in claim.devices:
        env_name = "ACCEL_DEVICE_" + re.sub(r"[^A-Z0-9]", "_", prepared.device.upper())
        numa = inventory[prepared.device].numa_node
        devices.append(
            {
                "name": cdi_device_name(claim.uid, prepared.device),
                "containerEdits": {"env": [f"{env_name}={numa}", f"ACCEL_CLAIM={claim.namespace}/{claim.name}"]},
            }
        )
    return {"cdiVersion": CDI_VERSION, "kind": CDI_KIND, "devices": devices}


class DriverState:
    """The claims this node prepared, persisted in ``checkpoint`` and mirrored as CDI specs in ``cdi_dir``.

    Thread-safe (one lock): the gRPC server calls it from its worker threads.
    """

    def __init__(
        self, *, node: str, inventory: Sequence[AccelDevice], checkpoint: Path, cdi_dir: Path, pool: str = ""
    ) -> None:
        if len(node) > 253 or not all(_DNS_LABEL.match(part) for part in node.split(".")):
            raise DriverConfigError(f"--node-name: {node!r} is not a node name")
        self.node = node
        self.pool = pool or node
        self.inventory = {d.name: d for d in inventory}
        self.checkpoint = checkpoint
        self.cdi_dir = cdi_dir
        self._lock = threading.Lock()
        self.claims: dict[str, PreparedClaim] = {}
        if checkpoint.exists():
            self.claims = decode_checkpoint(checkpoint.read_text(encoding="utf-8"), str(checkpoint))
        for claim in self.claims.values():  # a spec lost with a crash comes back
            unknown = [d.device for d in claim.devices if d.device not in self.inventory]
            if unknown:
                raise CheckpointError(
                    f"checkpoint {checkpoint}: claim {claim.namespace}/{claim.name} holds {unknown}, "
                    "not in --devices (the inventory shrank while the claim is prepared)"
                )
            if not self.spec_path(claim.uid).exists():
                _atomic_write(self.spec_path(claim.uid), json.dumps(cdi_spec(claim, self.inventory), indent=2))

    def spec_path(self, claim_uid: str) -> Path:
        return self.cdi_dir / f"{DRIVER_NAME}-{claim_uid}.json"

    def prepare(self, uid: str, namespace: str, name: str, claim: Mapping[str, Any] | None) -> PreparedClaim:
        """Prepare claim ``namespace/name`` (``uid``) from its API object ``claim`` (None: not found).

        Already prepared: the recorded answer, without reading ``claim`` (the kubelet may repeat a
        prepare after the claim's allocation is gone). Raises :class:`PrepareError` when the claim is not
        found, is another claim of that name (uid differs), is not allocated, has no result of this
        driver, names a device or pool this node does not have, or a device another claim holds.
        """
        label = f"claim {namespace}/{name} ({uid or 'no uid'})"
        if not uid or not name or not namespace:
            raise PrepareError(f"{label}: the kubelet's request lacks the claim's uid, name or namespace")
        with self._lock:
            known = self.claims.get(uid)
            if known is not None:
                if not self.spec_path(uid).exists():
                    _atomic_write(self.spec_path(uid), json.dumps(cdi_spec(known, self.inventory), indent=2))
                return known
            if claim is None:
                raise PrepareError(f"{label}: not found in the API")
            got_uid = claim.get("metadata", {}).get("uid")
            if got_uid != uid:
                raise PrepareError(f"{label}: the API's claim of that name has uid {got_uid} (it was recreated)")
            allocation = (claim.get("status") or {}).get("allocation")
            if not allocation:
                raise PrepareError(f"{label}: not allocated")
            results = [
                r for r in (allocation.get("devices") or {}).get("results") or [] if r.get("driver") == DRIVER_NAME
            ]
            if not results:
                raise PrepareError(f"{label}: its allocation has no device of driver {DRIVER_NAME}")
            holders = {d.device: c for c in self.claims.values() for d in c.devices}
            by_device: dict[str, list[str]] = {}
            for result in results:
                device, pool = str(result.get("device", "")), str(result.get("pool", ""))
                if pool != self.pool:
                    raise PrepareError(
                        f"{label}: device {device} is of pool {pool!r}, this node's pool is {self.pool!r}"
                    )
                if device not in self.inventory:
                    raise PrepareError(f"{label}: device {device!r} is not a device of this node")
                if device in holders:
                    other = holders[device]
                    raise PrepareError(f"{label}: device {device} is prepared for claim {other.namespace}/{other.name}")
                by_device.setdefault(device, []).append(str(result.get("request", "")))
            prepared = PreparedClaim(
                uid,
                namespace,
                name,
                tuple(
                    PreparedDevice(tuple(requests), self.pool, device, (f"{CDI_KIND}={cdi_device_name(uid, device)}",))
                    for device, requests in by_device.items()
                ),
            )
            _atomic_write(self.spec_path(uid), json.dumps(cdi_spec(prepared, self.inventory), indent=2))
            claims = {**self.claims, uid: prepared}
            _atomic_write(self.checkpoint, encode_checkpoint(claims))
            self.claims = claims
            return prepared

    def unprepare(self, uid: str) -> PreparedClaim | None:
        """Unprepare claim ``uid``: its CDI spec removed, then forgotten by the checkpoint. Unknown: None
        (done before, or never prepared here) — not an error, the kubelet repeats unprepares."""
        if not uid:
            raise PrepareError("unprepare: the kubelet's request lacks the claim's uid")
        with self._lock:
            self.spec_path(uid).unlink(missing_ok=True)
            known = self.claims.get(uid)
            if known is None:
                return None
            claims = {k: v for k, v in self.claims.items() if k != uid}
            _atomic_write(self.checkpoint, encode_checkpoint(claims))
            self.claims = claims
            return known
