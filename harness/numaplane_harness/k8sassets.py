"""The Kubernetes binaries of the test control plane and kubelet: found or unpacked once, checked.

:func:`k8s_assets` returns a folder holding ``kube-apiserver`` and the other :data:`K8S_BINARIES`: the one
``KUBEBUILDER_ASSETS`` names (the envtest convention, for users with their own binaries), else the
xz-compressed binaries of ``$NUMAPLANE_SHARED/k8s`` unpacked once into ``<cache>/k8s/<hash of
SHA256SUMS>``, each checked against ``SHA256SUMS`` before it is put in place (a partial or mismatching
file never is). :func:`etcd_binary` takes ``etcd`` from that folder, else Debian trixie's ``etcd-server``
fetched once with the private apt configuration (:mod:`numaplane_harness.debian`). Anything missing
raises :class:`KubeUnavailable` saying what.
"""

from __future__ import annotations

import hashlib
import lzma
import os
from pathlib import Path

from numaplane_harness.debian import DebianUnavailable, cache_base, fetch_debs

__all__ = ["K8S_BINARIES", "KubeUnavailable", "etcd_binary", "k8s_assets", "shared_dir"]

K8S_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kubectl")


class KubeUnavailable(Exception):
    """This machine cannot run the real control plane; the message says why."""


def shared_dir() -> Path:
    """``$NUMAPLANE_SHARED``, else the ``shared`` folder beside the repository."""
    shared = os.environ.get("NUMAPLANE_SHARED")
    if shared:
        return Path(shared)
    return Path(__file__).resolve().parents[2].parent / "shared"


def _unpack_xz(source: Path, target: Path, sha256: str | None) -> None:
    partial = target.with_name(target.name + ".partial")
    digest = hashlib.sha256()
    with lzma.open(source) as src, open(partial, "wb") as dst:
        while chunk := src.read(1 << 20):
            digest.update(chunk)
            dst.write(chunk)
    if sha256 is not None and digest.hexdigest() != sha256:
        partial.unlink()
        raise KubeUnavailable(f"{source.name}: sha256 {digest.hexdigest()} does not match SHA256SUMS ({sha256})")
    partial.chmod(0o755)
    partial.replace(target)


def k8s_assets() -> Path:
    """The folder holding ``kube-apiserver`` and the other binaries (see the module docstring)."""
    named = os.environ.get("KUBEBUILDER_ASSETS")
    if named:
        folder = Path(named)
        missing = [b for b in ("kube-apiserver",) if not (folder / b).is_file()]
        if missing:
            raise KubeUnavailable(f"KUBEBUILDER_ASSETS={folder} has no {', '.join(missing)}")
        return folder
    source = shared_dir() / "k8s"
    sums_file = source / "SHA256SUMS"
    if not sums_file.is_file():
        raise KubeUnavailable(f"no Kubernetes binaries: set KUBEBUILDER_ASSETS or provide {source}/*.xz")
    sums = {}
    for line in sums_file.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2:
            sums[parts[1]] = parts[0]
    version = hashlib.sha256(sums_file.read_bytes()).hexdigest()[:12]
    folder = cache_base() / "k8s" / version
    folder.mkdir(parents=True, exist_ok=True)
    for binary in K8S_BINARIES:
        target = folder / binary
        packed = source / f"{binary}.xz"
        if target.is_file() or not packed.is_file():
            continue
        _unpack_xz(packed, target, sums.get(binary))
    return folder


def etcd_binary(assets: Path) -> Path:
    """``etcd`` from the assets folder, else Debian trixie's ``etcd-server`` (fetched once)."""
    own = assets / "etcd"
    if own.is_file():
        return own
    try:
        unpacked = fetch_debs(cache_base() / "etcd", [("etcd-server", "trixie")])
    except DebianUnavailable as exc:
        raise KubeUnavailable(f"etcd: {exc}") from exc
    return unpacked / "etcd-server" / "usr" / "bin" / "etcd"
