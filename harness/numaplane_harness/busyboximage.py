"""The test images of the private containerd: busybox and a "pause" image, as an OCI image layout tar.

:func:`build_busybox_image` writes the tar by hand, no registry or image tool involved: one
uncompressed layer holding Debian's static ``/bin/busybox``, a link per applet it lists (at least
``sh``, ``sleep`` and ``cat``), ``/etc/passwd`` and ``/etc/group``; two images over that layer,
:data:`BUSYBOX_IMAGE` (``sh``) and :data:`PAUSE_IMAGE` (``sleep infinity``, the CRI sandbox image).
Every timestamp is 0 and every JSON document has sorted keys, so the same busybox binary always gives
the same bytes (and digests). ``ctr images import`` reads the result.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

from numaplane_harness.debian import debian_arch, run_tool
from numaplane_harness.ocilayout import LAYER_TAR, Blob, Image, add_dir, add_file, tar_bytes, write_oci_layout

__all__ = ["BUSYBOX_IMAGE", "PAUSE_IMAGE", "build_busybox_image"]

BUSYBOX_IMAGE = "localhost/numaplane/busybox:test"
PAUSE_IMAGE = "localhost/numaplane/pause:test"


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
            add_dir(tar, d, 0o1777 if d == "tmp" else 0o755)
        add_file(tar, "bin/busybox", binary, 0o755)
        for applet in sorted(set(applets)):
            if applet != "busybox":
                _add_symlink(tar, f"bin/{applet}", "busybox")
        add_file(tar, "etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n")
        add_file(tar, "etc/group", b"root:x:0:\n")

    return tar_bytes(build)


def build_busybox_image(busybox: Path, out: Path) -> Path:
    """Write an OCI image layout tar with ``BUSYBOX_IMAGE`` and ``PAUSE_IMAGE`` (same layer) to ``out``."""
    layer = Blob.of_bytes(_busybox_layer(busybox))
    write_oci_layout(
        out,
        [
            Image(
                ref,
                {
                    "architecture": debian_arch(),
                    "os": "linux",
                    "config": {"Env": ["PATH=/bin"], "Cmd": cmd, "WorkingDir": "/"},
                    "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer.digest}"]},
                    "history": [{"created_by": "numaplane_harness.containerd (busybox-static)"}],
                },
                [(LAYER_TAR, layer)],
            )
            for ref, cmd in ((BUSYBOX_IMAGE, ["sh"]), (PAUSE_IMAGE, ["sleep", "infinity"]))
        ],
    )
    return out
