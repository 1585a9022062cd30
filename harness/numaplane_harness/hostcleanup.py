"""Removing what a test component left on the host: its processes, mounts and cgroup folders.

Used by the containerd and kubelet fixtures' teardown. Each function touches only what its argument
names — processes whose command line contains a given text, the folders of one cgroup path in every
mounted hierarchy, mounts at or below one folder — so a fixture cleans up after itself on a shared
machine without touching anything else. Every step tolerates what is already gone.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from numaplane_harness.debian import run_tool

__all__ = ["CGROUP_FS", "cgroup_dirs", "kill_cgroup_members", "pids_naming", "unmount_under"]

CGROUP_FS = Path("/sys/fs/cgroup")


def pids_naming(text: str) -> list[int]:
    """Pids of processes whose command line contains ``text``."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            pids.append(int(proc.name))
    return pids


def cgroup_dirs(cgroup_root: str) -> list[Path]:
    """Every existing folder of ``cgroup_root`` in every mounted hierarchy, deepest first."""
    rel = cgroup_root.strip("/")
    dirs: list[Path] = []
    hierarchies = [p for p in CGROUP_FS.iterdir() if p.is_dir()] if CGROUP_FS.is_dir() else []
    hierarchies.append(CGROUP_FS)
    for hierarchy in hierarchies:
        top = hierarchy / rel
        if top.is_dir() and not top.is_symlink():
            dirs.extend(p for p in top.rglob("*") if p.is_dir())
            dirs.append(top)
    return sorted(set(dirs), key=lambda p: len(p.parts), reverse=True)


def kill_cgroup_members(cgroup_root: str) -> None:
    """SIGKILL every process in ``cgroup_root``'s folders (any hierarchy); gone or unreadable ones are skipped."""
    for d in cgroup_dirs(cgroup_root):
        with contextlib.suppress(OSError):
            for line in (d / "cgroup.procs").read_text().split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(line), signal.SIGKILL)


def unmount_under(path: Path) -> None:
    """Lazily unmount every mount point at or below ``path``, deepest first."""
    prefix = str(path.resolve())
    mounts = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4].replace("\\040", " ")
            if point == prefix or point.startswith(prefix + "/"):
                mounts.append(point)
    for point in sorted(mounts, key=len, reverse=True):
        run_tool(["umount", "-l", point], timeout=30)
