"""Sysfs snapshots: find the sysfs root in a folder, and unpack an untrusted snapshot archive safely.

A snapshot is a copy of a machine's ``sys/`` (and maybe ``proc/``) tree under one top folder, as a
folder or a tar archive (``numaplane topology --sysfs``); :func:`~numaplane.topology.sysfs.discover`
reads the root these functions return. The archive may come from anyone: the rules :func:`unpack_snapshot` enforces
are the security boundary of every command that accepts a snapshot. Errors are :class:`SysfsError`.
"""

from __future__ import annotations

import bisect
import contextlib
import lzma
import os
import posixpath
import tarfile
import zlib
from collections.abc import Iterator
from pathlib import Path

from numaplane.limits import (
    MAX_SNAPSHOT_BYTES,
    MAX_SNAPSHOT_LINK_DEPTH,
    MAX_SNAPSHOT_LINKS,
    MAX_SNAPSHOT_MEMBERS,
)
from numaplane.topology.errors import SysfsError

__all__ = ["find_sysfs_root", "unpack_snapshot"]


def find_sysfs_root(folder: str | Path) -> Path:
    """``folder`` if it holds ``sys/``, else its only sub-folder that does (a snapshot's top folder).

    Raises :class:`SysfsError` when neither is the case.
    """
    base = Path(folder)
    if (base / "sys").is_dir():
        return base
    try:
        candidates = [d for d in base.iterdir() if d.is_dir() and (d / "sys").is_dir()]
    except OSError as exc:
        raise SysfsError(str(base), exc.strerror or str(exc)) from None
    if len(candidates) == 1:
        return candidates[0]
    reason = "several snapshot folders" if candidates else "no sys/ folder"
    raise SysfsError(str(base), f"{reason}: expected a sysfs root (a folder holding sys/)")


def unpack_snapshot(archive: str | Path, dest: str | Path) -> Path:
    """Unpack a snapshot archive (``.tar``, ``.tar.gz``, …) into ``dest``; return its sysfs root.

    Untrusted archives are safe to unpack (even as root): every member first passes the standard
    library's ``data`` extraction filter (no absolute names, no ``..``, nothing resolving outside
    ``dest`` on disk, no device or set-id files, no ownership taken from the archive), then ours:
    names are normalised (``./a//b`` is ``a/b``) before any check, only regular files, directories
    and symlinks are extracted (no hard links), a name may appear once (a symlink cannot be re-pointed
    after its check), no member goes through an extracted symlink, and a symlink's target must stay
    inside ``dest`` both lexically and resolved. At most ``MAX_SNAPSHOT_MEMBERS`` members and
    ``MAX_SNAPSHOT_BYTES`` of file data (:mod:`numaplane.limits`).

    Symlinks: at most ``MAX_SNAPSHOT_LINKS``, and resolving one follows at most
    ``MAX_SNAPSHOT_LINK_DEPTH`` symlinks (counted over the archive's own links, before anything
    resolves the target on disk), so the work per link is bounded and a chain of links costs linear
    time, not quadratic. A link written after links that lead to or through its name (a chain
    written backwards) makes those be resolved again at once; and once every member is out, every
    link is resolved again over the final set of links. A link that leaves ``dest`` or follows too
    many links refuses the archive, and then every symlink extracted is removed. Errors are
    :class:`SysfsError`.
    """
    target = Path(dest)
    target.mkdir(parents=True, exist_ok=True)
    check = _SafeMembers(target)
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(target, members=check.bounded(tar), filter=check)
        check.recheck_links()
    except (tarfile.TarError, OSError, EOFError, zlib.error, lzma.LZMAError, RecursionError) as exc:
        check.remove_links()
        raise SysfsError(str(archive), f"cannot unpack snapshot: {exc}") from None
    return find_sysfs_root(target)


_MAX_NAME_CHARS = 1024  # sysfs paths are < 200 characters; far below PATH_MAX (realpath's blind spot)


class _SafeMembers:
    """A tarfile extraction filter for untrusted snapshots (see :func:`unpack_snapshot`)."""

    def __init__(self, dest: Path) -> None:
        self.root = os.path.realpath(dest)
        self.links: dict[str, str] = {}  # normalised name -> link target, as in the archive
        self.leads_of: dict[str, str] = {}  # link name -> the path it resolves to (over the links so far)
        self.leads_to: list[tuple[str, str]] = []  # (that path, link name), sorted
        self.seen: set[str] = set()

    def bounded(self, tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
        """The members, read one at a time, refusing the archive past the count and size limits."""
        count = size = 0
        while (member := tar.next()) is not None:
            count += 1
            size += max(member.size, 0)
            if count > MAX_SNAPSHOT_MEMBERS:
                raise tarfile.TarError(f"more than {MAX_SNAPSHOT_MEMBERS} members")
            if size > MAX_SNAPSHOT_BYTES:
                raise tarfile.TarError(f"more than {MAX_SNAPSHOT_BYTES} bytes of files")
            yield member

    def __call__(self, member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
        raw = member.name
        if len(raw) > _MAX_NAME_CHARS or "\0" in raw:
            raise tarfile.TarError(f"{raw[:80]}...: name too long")
        if raw.startswith("/") or ".." in raw.split("/"):
            raise tarfile.TarError(f"{raw}: path leaves the destination")
        name = posixpath.normpath(raw)
        if name == ".":
            return None  # the archive's own top folder entry
        parts = name.split("/")
        if ".." in parts:
            raise tarfile.TarError(f"{raw}: path leaves the destination")
        if name in self.seen:
            raise tarfile.TarError(f"{raw}: appears twice in the archive")
        self.seen.add(name)
        if any("/".join(parts[:i]) in self.links for i in range(1, len(parts))):
            raise tarfile.TarError(f"{raw}: path goes through a symlink")
        if not (member.isfile() or member.isdir() or member.issym()):
            raise tarfile.TarError(f"{raw}: not a regular file, directory or symlink")
        on_disk = os.path.join(self.root, *parts)
        parent = os.path.dirname(on_disk)
        if os.path.lexists(parent) and not os.path.isdir(parent):
            raise tarfile.TarError(f"{raw}: its parent is not a directory")
        if not member.isdir() and os.path.lexists(on_disk):
            # tarfile would replace it, and fall back to copying the link's target when a symlink
            # cannot be made (recursively, for a link to its own folder)
            raise tarfile.TarError(f"{raw}: already exists")
        if member.issym():
            # bounded before anything (the data filter, realpath) follows the link on disk
            link = member.linkname
            if len(self.links) >= MAX_SNAPSHOT_LINKS:
                raise tarfile.TarError(f"more than {MAX_SNAPSHOT_LINKS} symlinks")
            if len(link) > _MAX_NAME_CHARS or "\0" in link:
                raise tarfile.TarError(f"{raw}: link target too long")
            lexical = posixpath.normpath(posixpath.join(posixpath.dirname(name), link))
            if link.startswith("/") or lexical == ".." or lexical.startswith("../"):
                raise tarfile.TarError(f"{raw}: link target {link} leaves the destination")
            leads_to = self._resolve(raw, name, link)
        filtered = tarfile.data_filter(member.replace(name=name, deep=False), dest)
        if filtered is None:  # pragma: no cover - data_filter refuses by raising
            return None
        if member.issym():
            resolved = os.path.realpath(os.path.join(self.root, *parts[:-1], link))
            if os.path.commonpath([resolved, self.root]) != self.root:
                raise tarfile.TarError(f"{raw}: link target {link} leaves the destination")
            self._add_link(name, link, leads_to)
            return filtered
        if member.isdir():
            return filtered.replace(mode=((filtered.mode or 0o755) | 0o700) & 0o755, deep=False)
        return filtered

    def _resolve(self, raw: str, name: str, link: str) -> str:
        """Where the symlink ``name`` with target ``link`` leads, over the archive's links so far (as the
        kernel resolves it on the extracted tree: ``..`` after a link goes up from where the link leads);
        raise ``TarError`` if that leaves the destination or follows more than
        ``MAX_SNAPSHOT_LINK_DEPTH`` links. Work: at most that many links, each adding at most
        ``_MAX_NAME_CHARS`` of path."""
        done: list[str] = []  # the resolved path so far, as its prefixes: "a", "a/b", ...
        pending = [p for p in reversed(link.split("/")) if p not in ("", ".")]
        pending += reversed(name.split("/")[:-1])
        followed = 0
        while pending:
            part = pending.pop()
            if part == "..":
                if not done:
                    raise tarfile.TarError(f"{raw}: link target {link} leaves the destination")
                done.pop()
                continue
            done.append(f"{done[-1]}/{part}" if done else part)
            target = self.links.get(done[-1])
            if target is None:
                continue
            followed += 1
            if followed > MAX_SNAPSHOT_LINK_DEPTH:
                raise tarfile.TarError(
                    f"{raw}: link target {link} goes through more than {MAX_SNAPSHOT_LINK_DEPTH} symlinks"
                )
            done.pop()
            pending.extend(p for p in reversed(target.split("/")) if p not in ("", "."))
        return done[-1] if done else ""

    def _add_link(self, name: str, link: str, leads_to: str) -> None:
        """Record the link ``name``; resolve again the earlier links that lead to or through it (they
        were written first, pointing at a path that did not exist yet: a chain written backwards)."""
        self.links[name] = link
        self._set_leads_to(name, leads_to)
        lo = bisect.bisect_left(self.leads_to, (name, ""))
        hi = bisect.bisect_left(self.leads_to, (name + "0", ""))  # "0" sorts right after "/"
        for path, earlier in self.leads_to[lo:hi]:
            if earlier != name and (path == name or path.startswith(name + "/")):
                self._set_leads_to(earlier, self._resolve(earlier, earlier, self.links[earlier]))

    def _set_leads_to(self, name: str, path: str) -> None:
        old = self.leads_of.get(name)
        if old is not None:
            del self.leads_to[bisect.bisect_left(self.leads_to, (old, name))]
        self.leads_of[name] = path
        bisect.insort(self.leads_to, (path, name))

    def recheck_links(self) -> None:
        """Resolve every link again over the final set of links (see :func:`unpack_snapshot`)."""
        for name, link in self.links.items():
            self._resolve(name, name, link)

    def remove_links(self) -> None:
        """Remove the symlinks extracted (a refused archive leaves no link that may lead outside)."""
        for name in self.links:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(self.root, *name.split("/")))
