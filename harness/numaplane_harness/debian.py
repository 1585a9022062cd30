"""Debian packages for tests, fetched with a *private* apt configuration and unpacked into a cache.

The private configuration has its own sources list (the suites asked for), its own lists and caches
under the cache folder; the system's apt sources are never read or changed. ``apt-get download`` then
``dpkg -x`` each package into ``<cache>/unpacked/<package>``; a ``.done`` marker makes later calls
free and network-less. Used by the real containerd and the real control-plane fixtures.
"""

from __future__ import annotations

import fcntl
import os
import platform
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

__all__ = ["DebianUnavailable", "cache_base", "debian_arch", "fetch_debs", "run_tool"]

DEBIAN_MIRROR = "http://deb.debian.org/debian"
DEBIAN_KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")


class DebianUnavailable(Exception):
    """The packages cannot be fetched or unpacked here; the message says why."""


def cache_base() -> Path:
    """``$NUMAPLANE_CACHE``, else ``~/.cache/numaplane``: the root of every test download cache."""
    base = os.environ.get("NUMAPLANE_CACHE")
    return Path(base) if base else Path.home() / ".cache" / "numaplane"


def run_tool(
    args: list[str], *, env: dict[str, str] | None = None, timeout: float = 300, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a helper program, capturing its output as text; never raises on a non-zero exit."""
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout, check=False, cwd=cwd)


def debian_arch() -> str:
    """This machine's Debian architecture name (``amd64``, ``arm64``, ...)."""
    machine = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "armhf", "ppc64le": "ppc64el", "s390x": "s390x"}.get(
        machine, machine
    )


def _apt_env(cache: Path, suites: Sequence[str]) -> dict[str, str]:
    """Write the private apt configuration; return an environment that selects it."""
    apt = cache / "apt"
    for sub in ("lists/partial", "archives/partial", "sources.list.d", "preferences.d", "state"):
        (apt / sub).mkdir(parents=True, exist_ok=True)
    keyring = f" [signed-by={DEBIAN_KEYRING}]" if DEBIAN_KEYRING.exists() else ""
    (apt / "sources.list").write_text("".join(f"deb{keyring} {DEBIAN_MIRROR} {s} main\n" for s in sorted(suites)))
    arch = debian_arch()
    (apt / "apt.conf").write_text(
        "\n".join(
            [
                f'Dir::Etc::SourceList "{apt}/sources.list";',
                f'Dir::Etc::SourceParts "{apt}/sources.list.d";',
                f'Dir::Etc::Preferences "{apt}/preferences";',
                f'Dir::Etc::PreferencesParts "{apt}/preferences.d";',
                f'Dir::State "{apt}/state";',
                f'Dir::State::Lists "{apt}/lists";',
                'Dir::State::status "/dev/null";',
                f'Dir::Cache "{apt}";',
                f'Dir::Cache::Archives "{apt}/archives";',
                f'APT::Architecture "{arch}";',
                'APT::Architectures { "' + arch + '"; };',
                'APT::Sandbox::User "root";',
                'Acquire::Retries "2";',
                "",
            ]
        )
    )
    env = dict(os.environ)
    env["APT_CONFIG"] = str(apt / "apt.conf")
    env["DEBIAN_FRONTEND"] = "noninteractive"
    return env


def fetch_debs(cache: Path, packages: Sequence[tuple[str, str]]) -> Path:
    """Download (once) and unpack each ``(package, suite)``; return the ``unpacked`` folder.

    ``<returned>/<package>`` holds the package's files as ``dpkg -x`` lays them out. Concurrent
    callers on one cache serialise on a lock file. Raises :class:`DebianUnavailable`.
    """
    cache.mkdir(parents=True, exist_ok=True)
    unpacked = cache / "unpacked"
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        missing = [(p, s) for p, s in packages if not (unpacked / p / ".done").exists()]
        if not missing:
            return unpacked
        for tool in ("apt-get", "dpkg"):
            if shutil.which(tool) is None:
                raise DebianUnavailable(f"{tool} not found: cannot fetch Debian packages")
        env = _apt_env(cache, sorted({suite for _, suite in packages}))
        debs = cache / "debs"
        debs.mkdir(exist_ok=True)
        update = run_tool(["apt-get", "update", "-q"], env=env)
        if update.returncode != 0:
            raise DebianUnavailable(f"apt-get update (private Debian config) failed: {update.stderr[-800:]}")
        for package, suite in missing:
            for old in debs.glob(f"{package}_*.deb"):
                old.unlink()
            got = run_tool(["apt-get", "download", "-q", f"{package}/{suite}"], env=env, timeout=600, cwd=debs)
            files = sorted(debs.glob(f"{package}_*.deb"))
            if got.returncode != 0 or not files:
                raise DebianUnavailable(f"apt-get download {package}/{suite} failed: {got.stderr[-800:]}")
            target = unpacked / package
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            x = run_tool(["dpkg", "-x", str(files[-1]), str(target)])
            if x.returncode != 0:
                raise DebianUnavailable(f"dpkg -x {files[-1].name} failed: {x.stderr[-800:]}")
            (target / ".done").write_text(files[-1].name + "\n")
    return unpacked
