"""The test images of the private containerd: busybox and a "pause" image, as an OCI image layout tar.

:func:`build_busybox_image` writes the tar by hand, no registry or image tool involved: one
uncompressed layer holding Debian's static ``/bin/busybox``, a link per applet it lists (at least
``sh``, ``sleep`` and ``cat``), ``/etc/passwd`` and ``/etc/group``; two images over that layer,
:data:`BUSYBOX_IMAGE` (``sh``) and :data:`PAUSE_IMAGE` (``sleep infinity``, the CRI sandbox image).
Every timestamp is 0 and every JSON document has sorted keys, so the same busybox binary always gives
the same bytes (and digests). ``ctr images import`` reads the result.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Callable
from pathlib import Path

from numaplane_harness.debian import debian_arch, run_tool

__all__ = ["BUSYBOX_IMAGE", "PAUSE_IMAGE", "build_busybox_image"]

BUSYBOX_IMAGE = "localhost/numaplane/busybox:test"
PAUSE_IMAGE = "localhost/numaplane/pause:test"


def _tar_bytes(build: Callable[[tarfile.TarFile], None]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        build(tar)
    return buf.getvalue()


def _add_file(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))


def _add_dir(tar: tarfile.TarFile, name: str, mode: int = 0o755) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = mode
    info.mtime = 0
    tar.addfile(info)


def _add_symlink(tar: tarfile.TarFile, name: str, target: str) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    info.mode = 0o777
    info.mtime = 0
    tar.addfile(info)


def _busybox_layer(busybox: Path) -> bytes:
    listed = run_tool([str(busybox), "--list"], timeout=30)
    applets = (
        sorted({a.strip() for a in listed.stdout.split() if a.strip() and "/" not in a})
        if listed.returncode == 0
        else []
    )
    for needed in ("sh", "sleep", "cat"):
        if needed not in applets:
            applets.append(needed)
    binary = busybox.read_bytes()

    def build(tar: tarfile.TarFile) -> None:
        for d in ("bin", "dev", "etc", "proc", "sys", "tmp", "root", "var", "run"):
            _add_dir(tar, d, 0o1777 if d == "tmp" else 0o755)
        _add_file(tar, "bin/busybox", binary, 0o755)
        for applet in sorted(set(applets)):
            if applet != "busybox":
                _add_symlink(tar, f"bin/{applet}", "busybox")
        _add_file(tar, "etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n")
        _add_file(tar, "etc/group", b"root:x:0:\n")

    return _tar_bytes(build)


def build_busybox_image(busybox: Path, out: Path) -> Path:
    """Write an OCI image layout tar with ``BUSYBOX_IMAGE`` and ``PAUSE_IMAGE`` (same layer) to ``out``."""
    layer = _busybox_layer(busybox)
    layer_digest = hashlib.sha256(layer).hexdigest()
    blobs: dict[str, bytes] = {layer_digest: layer}
    manifests = []

    def blob(data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return digest

    for ref, cmd in ((BUSYBOX_IMAGE, ["sh"]), (PAUSE_IMAGE, ["sleep", "infinity"])):
        config = json.dumps(
            {
                "architecture": debian_arch(),
                "os": "linux",
                "config": {"Env": ["PATH=/bin"], "Cmd": cmd, "WorkingDir": "/"},
                "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_digest}"]},
                "history": [{"created_by": "numaplane_harness.containerd (busybox-static)"}],
            },
            sort_keys=True,
        ).encode()
        config_digest = blob(config)
        manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {
                    "mediaType": "application/vnd.oci.image.config.v1+json",
                    "digest": f"sha256:{config_digest}",
                    "size": len(config),
                },
                "layers": [
                    {
                        "mediaType": "application/vnd.oci.image.layer.v1.tar",
                        "digest": f"sha256:{layer_digest}",
                        "size": len(layer),
                    }
                ],
            },
            sort_keys=True,
        ).encode()
        manifest_digest = blob(manifest)
        manifests.append(
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": f"sha256:{manifest_digest}",
                "size": len(manifest),
                "annotations": {
                    "io.containerd.image.name": ref,
                    "org.opencontainers.image.ref.name": ref.rsplit(":", 1)[1],
                },
            }
        )
    index = json.dumps({"schemaVersion": 2, "manifests": manifests}, sort_keys=True).encode()

    def build(tar: tarfile.TarFile) -> None:
        _add_file(tar, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        _add_file(tar, "index.json", index)
        _add_dir(tar, "blobs")
        _add_dir(tar, "blobs/sha256")
        for digest, data in sorted(blobs.items()):
            _add_file(tar, f"blobs/sha256/{digest}", data)

    out.write_bytes(_tar_bytes(build))
    return out
