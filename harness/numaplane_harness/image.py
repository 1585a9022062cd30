"""Build numaplane's container image without a container engine or a registry: an OCI image layout.

Why not ``buildah``/``podman`` with the ``Containerfile``: they need the base image from a registry,
and machines like the CI's reach Debian's mirror and PyPI but no container registry. So the image is
assembled here, from the same kind of parts, each pinned:

1. **Base**: Debian bookworm's Python 3.11 runtime and the shared libraries it needs, fetched with the
   private apt configuration (:mod:`numaplane_harness.debian`) and unpacked with ``dpkg -x``. Every
   ``.deb`` must match the name, version and sha256 recorded in ``image/debian.lock`` (the base is pinned
   by digest: a mirror that serves anything else fails the build).
2. **Dependencies**: ``image/requirements.lock``, one ``name==version --hash=sha256:...`` line each,
   installed with ``pip install --require-hashes --no-deps --only-binary=:all:`` into
   ``/opt/numaplane/site``. ``scripts/lock_image.py`` regenerates both lock files.
3. **numaplane**: the project's wheel (built from the working tree), installed the same way; byte code
   compiled ahead of time (``unchecked-hash``: the root filesystem is read-only at run time).
4. One deterministic layer (sorted entries, mtime 0, owner root): ``/etc/passwd`` and ``/etc/group``
   with ``nonroot`` (65532), ``/tmp``; the config runs ``/opt/numaplane/bin/numaplane`` as
   ``65532:65532`` (the node DaemonSets override the user to 0 for the root-owned sockets).

:func:`build_image` writes ``numaplane-<version>.oci.tar`` (a layout ``ctr images import`` accepts) and
returns a :class:`BuiltImage` with its digest and sizes. Results are cached under
``<cache>/image/<key>`` where the key hashes the locks and the source tree, so an unchanged tree is a
cache hit (a fraction of a second).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from numaplane import __version__
from numaplane_harness.debian import DebianUnavailable, cache_base, debian_arch, fetch_debs
from numaplane_harness.ocilayout import LAYER_TAR_GZIP, Blob, Image, write_oci_layout

__all__ = [
    "IMAGE_NAME",
    "BuiltImage",
    "ImageBuildError",
    "build_image",
    "read_debian_lock",
]

IMAGE_NAME = f"localhost/numaplane:v{__version__}"
SUITE = "bookworm"
NONROOT = 65532
PYTHON = "/usr/bin/python3.11"
SITE = "opt/numaplane/site"
ENTRYPOINT = "/opt/numaplane/bin/numaplane"
#: Whole folders of the Debian root that a Python runtime never reads.
_DROP = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/lintian", "usr/share/locale")


class ImageBuildError(Exception):
    """The image cannot be built here; the message says why."""


@dataclass(frozen=True, slots=True)
class BuiltImage:
    """An OCI layout tar of the image and what to quote about it."""

    path: Path
    name: str
    manifest_digest: str
    layer_bytes: int  # uncompressed: what the node's disk holds
    compressed_bytes: int  # gzip: what a registry stores and a node pulls
    build_seconds: float
    cached: bool


def _repo() -> Path:
    return Path(__file__).resolve().parents[2]


def read_debian_lock(path: Path) -> list[tuple[str, str, str]]:
    """``(package, version, sha256)`` lines of ``image/debian.lock`` (``#`` comments allowed)."""
    out = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            package, version, sha = line.split()
            out.append((package, version, sha))
    return out


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _cache_key(repo: Path) -> str:
    digest = hashlib.sha256()
    for lock in ("image/debian.lock", "image/requirements.lock", "pyproject.toml"):
        digest.update((repo / lock).read_bytes())
    for path in sorted((repo / "src" / "numaplane").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(repo)).encode())
            digest.update(path.read_bytes())
    digest.update(sys.version.encode())
    return digest.hexdigest()[:16]


def _run(args: list[str], *, cwd: Path | None = None, timeout: float = 900) -> None:
    got = subprocess.run(args, capture_output=True, text=True, cwd=cwd, timeout=timeout, check=False)
    if got.returncode != 0:
        raise ImageBuildError(f"{' '.join(args[:4])} ... failed:\n{(got.stderr or got.stdout)[-1500:]}")


def _debian_root(root: Path, lock: list[tuple[str, str, str]]) -> None:
    """Unpack the locked packages into ``root``, checking each ``.deb``'s version and sha256."""
    cache = cache_base() / "image-debs"
    try:
        unpacked = fetch_debs(cache, [(package, SUITE) for package, _, _ in lock])
    except DebianUnavailable as exc:
        raise ImageBuildError(str(exc)) from exc
    for package, version, sha in lock:
        deb_name = (unpacked / package / ".done").read_text().strip()
        deb = cache / "debs" / deb_name
        got = _sha256(deb) if deb.is_file() else "(missing)"
        if got != sha:
            raise ImageBuildError(
                f"{package}: {deb_name} has sha256 {got}, image/debian.lock pins {version} {sha}"
                " (the mirror moved on: run scripts/lock_image.py and review the change)"
            )
        shutil.copytree(
            unpacked / package, root, symlinks=True, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".done")
        )
    for folder in _DROP:
        shutil.rmtree(root / folder, ignore_errors=True)


def _python_layer(root: Path, repo: Path, work: Path) -> None:
    """Install the locked dependencies and numaplane's wheel into ``root/opt/numaplane``."""
    wheels = cache_base() / "image-wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    lock = repo / "image" / "requirements.lock"
    _run([*pip, "download", "--require-hashes", "--no-deps", "--only-binary=:all:", "-d", str(wheels), "-r", str(lock)])
    dist = work / "dist"
    _run([*pip, "wheel", "--no-deps", "-w", str(dist), str(repo)])
    site = root / SITE
    _run(
        [
            *pip,
            "install",
            "--require-hashes",
            "--no-deps",
            "--no-index",
            "--only-binary=:all:",
            "--find-links",
            str(wheels),
            "--no-compile",
            "--target",
            str(site),
            "-r",
            str(lock),
        ]
    )
    wheel = next(dist.glob("numaplane-*.whl"))
    _run([*pip, "install", "--no-deps", "--no-index", "--no-compile", "--target", str(site), str(wheel)])
    shutil.rmtree(site / "bin", ignore_errors=True)  # console scripts with this machine's interpreter path
    for tests in site.glob("*/tests"):
        if tests.is_dir() and tests.parent.name in {"numpy", "matplotlib", "fontTools", "PIL"}:
            shutil.rmtree(tests)
    _run([sys.executable, "-m", "compileall", "-q", "-j0", "--invalidation-mode", "unchecked-hash", str(site)])
    bin_dir = root / "opt/numaplane/bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "numaplane"
    script.write_text(f"#!{PYTHON}\nimport sys\nfrom numaplane.cli import main\nsys.exit(main())\n")
    script.chmod(0o755)
    etc = root / "etc"
    etc.mkdir(exist_ok=True)
    (etc / "passwd").write_text(
        f"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:{NONROOT}:{NONROOT}::/home/nonroot:/sbin/nologin\n"
    )
    (etc / "group").write_text(f"root:x:0:\nnonroot:x:{NONROOT}:\n")
    for folder in ("tmp", "home/nonroot", "root", "proc", "sys", "dev", "run", "var/lib/numaplane"):
        (root / folder).mkdir(parents=True, exist_ok=True)


def _entries(root: Path) -> Iterable[Path]:
    yield from sorted(root.rglob("*"), key=lambda p: str(p.relative_to(root)))


def _layer_tar(root: Path, out: Path) -> None:
    """A deterministic tar of ``root``: sorted, mtime 0, owner root (``home/nonroot`` owned by nonroot)."""
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for path in _entries(root):
            name = str(path.relative_to(root))
            info = tar.gettarinfo(str(path), arcname=name)
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if name == "tmp":
                info.mode = 0o1777
            elif name == "home/nonroot":
                info.uid = info.gid = NONROOT
            if info.isreg():
                with open(path, "rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)


def _write_layout(layer: Path, out: Path, name: str) -> tuple[str, int]:
    """The OCI layout tar at ``out`` (one gzip layer); returns the manifest digest and compressed size."""
    diff_id = _sha256(layer)
    gz = layer.with_suffix(".tar.gz")
    with (
        open(layer, "rb") as src,
        open(gz, "wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=6) as dst,
    ):
        shutil.copyfileobj(src, dst, 1 << 20)
    compressed = Blob.of_file(gz)
    config = {
        "architecture": debian_arch(),
        "os": "linux",
        "config": {
            "User": f"{NONROOT}:{NONROOT}",
            "Entrypoint": [ENTRYPOINT],
            "Cmd": ["--help"],
            "Env": [
                "PATH=/opt/numaplane/bin:/usr/bin:/bin",
                f"PYTHONPATH=/{SITE}",
                "PYTHONDONTWRITEBYTECODE=1",
                "PYTHONUNBUFFERED=1",
                "LANG=C.UTF-8",
            ],
            "WorkingDir": "/",
            "Labels": {
                "org.opencontainers.image.title": "numaplane",
                "org.opencontainers.image.version": __version__,
                "org.opencontainers.image.licenses": "Apache-2.0",
            },
        },
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
        "history": [{"created_by": "numaplane_harness.image (Debian bookworm + image/requirements.lock + wheel)"}],
    }
    (digest,) = write_oci_layout(out, [Image(name, config, [(LAYER_TAR_GZIP, compressed)])])
    gz.unlink()
    return digest, compressed.size


def build_image(*, repo: Path | None = None, cache: Path | None = None, name: str = IMAGE_NAME) -> BuiltImage:
    """Build (or take from the cache) the image; raises :class:`ImageBuildError` with the reason."""
    repo = repo or _repo()
    started = time.monotonic()
    for needed in ("image/debian.lock", "image/requirements.lock", "pyproject.toml"):
        if not (repo / needed).is_file():
            raise ImageBuildError(f"{repo / needed} not found")
    key = _cache_key(repo)
    folder = (cache or cache_base() / "image") / key
    out = folder / f"numaplane-{__version__}.oci.tar"
    meta = folder / "image.json"
    if out.is_file() and meta.is_file():
        info = json.loads(meta.read_text())
        return BuiltImage(
            out, info["name"], info["digest"], info["layerBytes"], info["compressedBytes"], info["buildSeconds"], True
        )
    folder.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="numaplane-image-"))
    try:
        root = work / "root"
        root.mkdir()
        _debian_root(root, read_debian_lock(repo / "image" / "debian.lock"))
        _python_layer(root, repo, work)
        layer = work / "layer.tar"
        _layer_tar(root, layer)
        partial = out.with_suffix(".partial")
        digest, compressed = _write_layout(layer, partial, name)
        partial.replace(out)
        built = BuiltImage(out, name, digest, layer.stat().st_size, compressed, time.monotonic() - started, False)
        meta.write_text(
            json.dumps(
                {
                    "name": name,
                    "digest": digest,
                    "layerBytes": built.layer_bytes,
                    "compressedBytes": compressed,
                    "buildSeconds": round(built.build_seconds, 1),
                }
            )
        )
        return built
    finally:
        shutil.rmtree(work, ignore_errors=True)


def unavailable_reason() -> str | None:
    """Why this machine cannot build the image, or None."""
    if sys.platform != "linux":
        return f"needs Linux, this is {sys.platform}"
    for tool in ("apt-get", "dpkg"):
        if shutil.which(tool) is None:
            return f"{tool} not found (the base is assembled from Debian packages)"
    if sys.version_info[:2] != (3, 11):
        return f"the image's wheels are cp311; this interpreter is {sys.version_info[0]}.{sys.version_info[1]}"
    if os.environ.get("NUMAPLANE_NO_IMAGE_BUILD") == "1":
        return "NUMAPLANE_NO_IMAGE_BUILD=1"
    return None
