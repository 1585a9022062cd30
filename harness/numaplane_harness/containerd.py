"""A real, private containerd 1.7 with NRI for tests — fetched from Debian, run as root, cleaned up.

What :func:`run_containerd` does (DESIGN.md, "Tests and real components"; wire/nri.md):

1. :func:`fetch_packages` — with a *private* apt configuration (:mod:`numaplane_harness.debian`) (its own sources list naming trixie and
   bookworm, its own lists and caches under the cache folder; the system's apt sources are never read
   or changed) ``apt-get download`` Debian trixie's ``containerd`` 1.7, bookworm's ``runc`` 1.1 (trixie's
   needs a newer glibc), bookworm's ``busybox-static`` and trixie's ``golang-github-kubernetes-cri-api-dev``
   (the CRI api.proto), then ``dpkg -x`` each into the cache. The cache is ``$NUMAPLANE_CACHE/containerd``
   or ``~/.cache/numaplane/containerd``; once filled, no network is needed.
2. :func:`~numaplane_harness.busyboximage.build_busybox_image` — an OCI image layout tar written by hand: one uncompressed layer with
   ``/bin/busybox`` and its applet links, two tags over it (``busybox`` and a ``sleep infinity`` "pause"
   image used as the CRI sandbox image).
3. A private config (root, state, sockets, NRI socket, runc root, cgroupfs driver — all under a temp
   folder), ``containerd --config`` started as a child process, the images imported with ``ctr``.
4. On exit: every pod sandbox is stopped and removed through CRI, containerd is terminated, then — by
   pid, only processes whose command line names *this* instance's socket or that sit in *this*
   instance's cgroups — leftover shims and containers are killed; its mounts are unmounted, its cgroup
   folders removed, and the entries it added under ``/run/containerd`` deleted.

:func:`containerd_unavailable_reason` tells why a machine cannot run it (not root, no cpuset cgroup,
no apt/dpkg, Debian unreachable with an empty cache); :func:`make_containerd_fixture` builds a
session-scoped pytest fixture that skips LOUDLY with that reason (or fails, if
``NUMAPLANE_REQUIRE_CONTAINERD=1``). Import it in a ``conftest.py``::

    from numaplane_harness.containerd import make_containerd_fixture
    containerd = make_containerd_fixture()

Why one module over 400 lines: it is one fixture whose start (steps 1 and 3) and clean-up (step 4)
act on the same state of a shared machine — processes, cgroups, mounts, ``/run/containerd``; in one
file a reviewer can check that the clean-up undoes every change the start makes and touches nothing
of another instance. (The image and the host clean-up primitives live in
:mod:`numaplane_harness.busyboximage` and :mod:`numaplane_harness.hostcleanup`.)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

from numaplane_harness.busyboximage import BUSYBOX_IMAGE, PAUSE_IMAGE, build_busybox_image
from numaplane_harness.cri import CRI_PROTO_PATH, CRIClient, CRIError, load_cri_module
from numaplane_harness.debian import DebianUnavailable, cache_base, fetch_debs, run_tool
from numaplane_harness.hostcleanup import cgroup_dirs, kill_cgroup_members, pids_naming, unmount_under
from numaplane_harness.processes import terminate_process
from numaplane_harness.unavailable import component_unavailable

__all__ = [
    "BUSYBOX_IMAGE",
    "PAUSE_IMAGE",
    "ContainerdInstance",
    "ContainerdPackages",
    "ContainerdUnavailable",
    "cache_root",
    "containerd_unavailable_reason",
    "cpuset_of_container",
    "fetch_packages",
    "make_containerd_fixture",
    "run_containerd",
    "terminate_process",
]

K8S_NAMESPACE = "k8s.io"

#: (package, Debian suite) fetched by :func:`fetch_packages`.
PACKAGES: tuple[tuple[str, str], ...] = (
    ("containerd", "trixie"),
    ("runc", "bookworm"),
    ("busybox-static", "bookworm"),
    ("golang-github-kubernetes-cri-api-dev", "trixie"),
)
CGROUP_ROOT = Path("/sys/fs/cgroup")
RUN_CONTAINERD = Path("/run/containerd")


class ContainerdUnavailable(Exception):
    """This machine cannot run the real containerd; the message says why."""


def cache_root() -> Path:
    """``$NUMAPLANE_CACHE/containerd``, else ``~/.cache/numaplane/containerd``."""
    return cache_base() / "containerd"


# ---- 1. packages -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ContainerdPackages:
    """Paths inside the unpacked packages."""

    containerd: Path
    ctr: Path
    bin_dir: Path  # containerd-shim-runc-v2 lives here; goes on PATH
    runc: Path
    busybox: Path
    cri_proto: Path
    cache: Path


def _run(
    args: list[str], *, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return run_tool(args, env=env, timeout=timeout)


def fetch_packages(cache: Path | None = None) -> ContainerdPackages:
    """Download (once) and unpack the packages; raises :class:`ContainerdUnavailable` if impossible."""
    cache = cache or cache_root()
    try:
        unpacked = fetch_debs(cache, PACKAGES)
    except DebianUnavailable as exc:
        raise ContainerdUnavailable(str(exc)) from exc
    bin_dir = unpacked / "containerd" / "usr" / "bin"
    return ContainerdPackages(
        containerd=bin_dir / "containerd",
        ctr=bin_dir / "ctr",
        bin_dir=bin_dir,
        runc=unpacked / "runc" / "usr" / "sbin" / "runc",
        busybox=unpacked / "busybox-static" / "bin" / "busybox",
        cri_proto=unpacked / "golang-github-kubernetes-cri-api-dev" / CRI_PROTO_PATH,
        cache=cache,
    )


# ---- 3. running it -----------------------------------------------------------------------------


def _cpuset_cgroup_root() -> tuple[Path, int] | None:
    """The cpuset hierarchy and cgroup version (1 or 2), or None."""
    v1 = CGROUP_ROOT / "cpuset"
    if (v1 / "cpuset.cpus").exists():
        return v1, 1
    controllers = CGROUP_ROOT / "cgroup.controllers"
    if controllers.exists() and "cpuset" in controllers.read_text().split():
        return CGROUP_ROOT, 2
    return None


def containerd_unavailable_reason() -> str | None:
    """Why this machine cannot run the real containerd fixture, or None if it can (network aside)."""
    if sys.platform != "linux":
        return f"needs Linux, this is {sys.platform}"
    if os.geteuid() != 0:
        return "needs root (containerd creates cgroups, mounts and namespaces)"
    if _cpuset_cgroup_root() is None:
        return "no cpuset cgroup controller (neither /sys/fs/cgroup/cpuset nor cgroup v2 with cpuset)"
    for tool in ("apt-get", "dpkg"):
        if shutil.which(tool) is None:
            return f"{tool} not found (needed to fetch Debian's containerd)"
    return None


def cpuset_of_container(cgroup_parent: str, container_id: str) -> tuple[str, str]:
    """``(cpuset.cpus, cpuset.mems)`` of a container created with the cgroupfs driver."""
    found = _cpuset_cgroup_root()
    if found is None:
        raise ContainerdUnavailable("no cpuset cgroup controller")
    path = found[0] / cgroup_parent.strip("/") / container_id
    return (path / "cpuset.cpus").read_text().strip(), (path / "cpuset.mems").read_text().strip()


@dataclass
class ContainerdInstance:
    """A running private containerd. Sockets and paths are all under ``workdir``."""

    workdir: Path
    address: str  # containerd gRPC socket (CRI lives here too)
    nri_socket: str
    cgroup_root: str  # put pod cgroup parents below this, e.g. f"{cgroup_root}/pod{uid}"
    packages: ContainerdPackages
    process: subprocess.Popen[bytes]
    log_path: Path
    cri_pb: ModuleType
    images: tuple[str, ...] = (BUSYBOX_IMAGE, PAUSE_IMAGE)
    _env: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def cdi_dir(self) -> Path:
        """The one CDI spec folder this containerd reads (``enable_cdi``; a CDI device named in a container's
        CRI config is resolved from the specs here)."""
        return self.workdir / "cdi"

    def cri(self) -> CRIClient:
        """A new CRI client (close it, or use it as a context manager)."""
        return CRIClient(self.address, self.cri_pb)

    def ctr(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return _run(
            [str(self.packages.ctr), "--address", self.address, "--namespace", K8S_NAMESPACE, *args],
            env=self._env,
            timeout=timeout,
        )

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def remove_all_pods(self) -> None:
        """Stop and remove every pod sandbox through CRI (best effort: clean-up never raises)."""
        with contextlib.suppress(Exception), self.cri() as cri:
            cri.timeout_seconds = 15
            for pod_id in cri.list_pod_sandboxes():
                with contextlib.suppress(CRIError):
                    cri.stop_pod_sandbox(pod_id)
                with contextlib.suppress(CRIError):
                    cri.remove_pod_sandbox(pod_id)

    def new_pod(self, name: str, **kw: Any) -> tuple[Any, str]:
        """A pod sandbox config (host network, cgroup under ``cgroup_root``) and its cgroup parent."""
        uid = uuid.uuid4().hex
        cgroup_parent = f"{self.cgroup_root}/pod{uid}"
        logs = self.workdir / "pod-logs" / uid
        logs.mkdir(parents=True, exist_ok=True)
        with self.cri() as cri:
            config = cri.pod_config(name, uid, cgroup_parent=cgroup_parent, log_directory=str(logs), **kw)
        return config, cgroup_parent


def _config_toml(work: Path, packages: ContainerdPackages, request_timeout: str) -> str:
    return f"""version = 2
root = "{work}/root"
state = "{work}/state"
disabled_plugins = [
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing",
]

[grpc]
  address = "{work}/containerd.sock"

[ttrpc]
  address = "{work}/containerd-ttrpc.sock"

[debug]
  address = ""
  level = "info"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{work}/opt"

[plugins."io.containerd.nri.v1.nri"]
  disable = false
  disable_connections = false
  socket_path = "{work}/nri.sock"
  plugin_path = "{work}/nri-plugins"
  plugin_config_path = "{work}/nri-conf.d"
  plugin_registration_timeout = "5s"
  plugin_request_timeout = "{request_timeout}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  # CDI on, reading only this containerd's own spec folder (DRA drivers write there; issue 28)
  enable_cdi = true
  cdi_spec_dirs = ["{work}/cdi"]
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{work}/cni/bin"
    conf_dir = "{work}/cni/conf"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "{packages.runc}"
        Root = "{work}/runc"
        SystemdCgroup = false
"""


@contextlib.contextmanager
def run_containerd(
    packages: ContainerdPackages | None = None,
    *,
    request_timeout: str = "2s",
    startup_timeout_seconds: float = 30.0,
) -> Iterator[ContainerdInstance]:
    """Start a private containerd with NRI enabled; yield it; clean everything up afterwards."""
    reason = containerd_unavailable_reason()
    if reason:
        raise ContainerdUnavailable(reason)
    packages = packages or fetch_packages()
    for binary in (packages.containerd, packages.ctr, packages.runc, packages.busybox, packages.cri_proto):
        if not binary.exists():
            raise ContainerdUnavailable(f"{binary} missing from the unpacked packages")
    runc = _run([str(packages.runc), "--version"], timeout=30)
    if runc.returncode != 0:
        raise ContainerdUnavailable(f"bookworm's runc does not run here: {runc.stderr.strip()[-400:]}")
    cri_pb = load_cri_module(packages.cri_proto, packages.cache)

    run_before = set(os.listdir(RUN_CONTAINERD)) if RUN_CONTAINERD.is_dir() else None
    work = Path(tempfile.mkdtemp(prefix="numaplane-containerd-"))
    for sub in ("nri-plugins", "nri-conf.d", "cni/bin", "cni/conf", "opt", "runc", "cdi"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    config = work / "config.toml"
    config.write_text(_config_toml(work, packages, request_timeout))
    image_tar = build_busybox_image(packages.busybox, work / "busybox-oci.tar")
    env = dict(os.environ)
    env["PATH"] = f"{packages.bin_dir}:{env.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}"
    log_path = work / "containerd.log"
    cgroup_root = f"/numaplane-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [str(packages.containerd), "--config", str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    instance = ContainerdInstance(
        workdir=work,
        address=str(work / "containerd.sock"),
        nri_socket=str(work / "nri.sock"),
        cgroup_root=cgroup_root,
        packages=packages,
        process=process,
        log_path=log_path,
        cri_pb=cri_pb,
        _env=env,
    )
    try:
        deadline = time.monotonic() + startup_timeout_seconds
        while True:
            if process.poll() is not None:
                raise ContainerdUnavailable(f"containerd exited with {process.returncode}:\n{instance.log_tail()}")
            if Path(instance.address).exists() and Path(instance.nri_socket).exists():
                probe = instance.ctr("version", timeout=10)
                if probe.returncode == 0:
                    break
            if time.monotonic() > deadline:
                raise ContainerdUnavailable(
                    f"containerd did not come up in {startup_timeout_seconds} s:\n{instance.log_tail()}"
                )
            time.sleep(0.05)
        imported = instance.ctr("images", "import", str(image_tar), timeout=120)
        if imported.returncode != 0:
            raise ContainerdUnavailable(f"ctr images import failed: {imported.stderr[-800:]}")
        yield instance
    finally:
        _teardown(instance, run_before)


def _socket_is_dead(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        try:
            probe.connect(str(path))
        except OSError:
            return True
    return False


def _clean_run_containerd(run_before: set[str] | None, folder: Path = RUN_CONTAINERD) -> None:
    """Remove what this instance left under /run/containerd (shim sockets in ``s/``), and nothing else.

    Another containerd may run on the machine at the same time (another test session), so only dead
    sockets go, then folders left empty; entries that existed before we started are not touched.
    """
    if not folder.is_dir():
        return
    for entry in sorted(folder.iterdir()):
        if run_before is not None and entry.name in run_before and entry.is_file():
            continue
        if entry.is_dir() and not entry.is_symlink():
            _clean_run_containerd(None, entry)
            with contextlib.suppress(OSError):
                entry.rmdir()  # only if empty
        elif entry.is_socket() and (run_before is None or entry.name not in run_before) and _socket_is_dead(entry):
            with contextlib.suppress(OSError):
                entry.unlink()
    if run_before is None and folder == RUN_CONTAINERD:
        with contextlib.suppress(OSError):
            folder.rmdir()


def _teardown(instance: ContainerdInstance, run_before: set[str] | None) -> None:
    instance.remove_all_pods()
    terminate_process(instance.process)
    # Shims outlive containerd: they name our socket path on their command line.
    for pid in pids_naming(str(instance.workdir)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    kill_cgroup_members(instance.cgroup_root)
    time.sleep(0.1)
    unmount_under(instance.workdir)
    for d in cgroup_dirs(instance.cgroup_root):
        with contextlib.suppress(OSError):
            d.rmdir()
    _clean_run_containerd(run_before)
    shutil.rmtree(instance.workdir, ignore_errors=True)


# ---- 4. pytest ---------------------------------------------------------------------------------


def make_containerd_fixture(name: str = "containerd") -> Any:
    """A session-scoped pytest fixture yielding a :class:`ContainerdInstance`.

    Skips loudly where the machine cannot run it; with ``NUMAPLANE_REQUIRE_CONTAINERD=1`` it fails instead.
    """
    import pytest

    @pytest.fixture(scope="session", name=name)
    def containerd_fixture() -> Iterator[ContainerdInstance]:
        def unavailable(reason: str) -> NoReturn:
            component_unavailable("containerd", reason, "NUMAPLANE_REQUIRE_CONTAINERD")

        reason = containerd_unavailable_reason()
        if reason:
            unavailable(reason)
        try:
            packages = fetch_packages()
        except ContainerdUnavailable as exc:
            unavailable(str(exc))
            raise
        with run_containerd(packages) as instance:
            yield instance

    return containerd_fixture
