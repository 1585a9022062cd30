"""The one OCI image layout writer of the harness: images as an OCI image layout tar (``ctr images
import`` and ``docker load`` read it), written by hand, no registry or image tool involved.

Used by :mod:`numaplane_harness.image` (the numaplane image, one gzip layer) and
:mod:`numaplane_harness.busyboximage` (busybox and pause over one uncompressed layer). Invariants:
every JSON document has sorted keys and every tar entry mtime 0, so the same inputs give the same
bytes and digests; blobs are content-addressed (``blobs/sha256/<hex>``) and each is written once,
in digest order; the index names each image by ``io.containerd.image.name`` and the tag as
``org.opencontainers.image.ref.name``.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "LAYER_TAR",
    "LAYER_TAR_GZIP",
    "Blob",
    "Image",
    "add_dir",
    "add_file",
    "canonical_json",
    "tar_bytes",
    "write_oci_layout",
]

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"
LAYER_TAR_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"


def canonical_json(doc: Mapping[str, Any]) -> bytes:
    """``doc`` as JSON with sorted keys (the bytes its digest is taken of)."""
    return json.dumps(doc, sort_keys=True).encode()


@dataclass(frozen=True, slots=True)
class Blob:
    """Content for ``blobs/sha256/<digest>``: bytes in memory or a file (streamed, for big layers)."""

    digest: str  # hex sha256
    size: int  # bytes
    data: bytes | None = None
    path: Path | None = None

    @classmethod
    def of_bytes(cls, data: bytes) -> Blob:
        return cls(hashlib.sha256(data).hexdigest(), len(data), data=data)

    @classmethod
    def of_file(cls, path: Path) -> Blob:
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
        return cls(digest.hexdigest(), path.stat().st_size, path=path)

    def descriptor(self, media_type: str) -> dict[str, Any]:
        return {"mediaType": media_type, "digest": f"sha256:{self.digest}", "size": self.size}


@dataclass(frozen=True, slots=True)
class Image:
    """One image of the layout: its name (``registry/repo:tag``), config document and layers
    (``(media type, blob)``, base first)."""

    name: str
    config: Mapping[str, Any]
    layers: Sequence[tuple[str, Blob]]


def tar_bytes(build: Any) -> bytes:
    """The bytes of a PAX tar that ``build(tar)`` fills."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        build(tar)
    return buf.getvalue()


def add_file(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    """A regular file entry, mtime 0."""
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))


def add_dir(tar: tarfile.TarFile, name: str, mode: int = 0o755) -> None:
    """A directory entry, mtime 0."""
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = mode
    info.mtime = 0
    tar.addfile(info)


def _add_blob(tar: tarfile.TarFile, blob: Blob) -> None:
    name = f"blobs/sha256/{blob.digest}"
    if blob.path is None:
        add_file(tar, name, blob.data or b"")
        return
    info = tarfile.TarInfo(name)
    info.size = blob.size
    info.mode = 0o644
    info.mtime = 0
    with open(blob.path, "rb") as f:
        tar.addfile(info, f)


def write_oci_layout(out: Path, images: Sequence[Image]) -> list[str]:
    """Write ``images`` as one OCI image layout tar at ``out``; their manifest digests
    (``sha256:<hex>``), in order."""
    blobs: dict[str, Blob] = {}
    entries: list[dict[str, Any]] = []
    digests: list[str] = []
    for image in images:
        config = Blob.of_bytes(canonical_json(image.config))
        manifest = Blob.of_bytes(
            canonical_json(
                {
                    "schemaVersion": 2,
                    "mediaType": MANIFEST,
                    "config": config.descriptor(CONFIG),
                    "layers": [blob.descriptor(media_type) for media_type, blob in image.layers],
                }
            )
        )
        for blob in (config, manifest, *(blob for _, blob in image.layers)):
            blobs[blob.digest] = blob
        entries.append(
            {
                **manifest.descriptor(MANIFEST),
                "annotations": {
                    "io.containerd.image.name": image.name,
                    "org.opencontainers.image.ref.name": image.name.rsplit(":", 1)[1],
                },
            }
        )
        digests.append(f"sha256:{manifest.digest}")
    index = canonical_json({"schemaVersion": 2, "manifests": entries})
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        add_file(tar, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        add_file(tar, "index.json", index)
        add_dir(tar, "blobs")
        add_dir(tar, "blobs/sha256")
        for digest in sorted(blobs):
            _add_blob(tar, blobs[digest])
    return digests
