"""Loading a machine's :class:`~numaplane.topology.model.Topology` from what users name on a command line.

One place for the four inputs (DESIGN.md, "Topology"):

* a **name** of a machine the caller knows (the simulator's built-ins: passed in as ``builtins``, since
  what a name means belongs to the caller's layer);
* a **topology document**: JSON or YAML, the format of ``Topology.to_dict`` (``--from`` output feeds
  back); a document without a name takes the file's stem;
* a **sysfs folder**: a sysfs root or a snapshot folder holding one (:func:`~numaplane.topology.snapshot.find_sysfs_root`);
* a **snapshot archive** (``.tar.gz`` and the other tar forms), unpacked into a temporary folder that is
  removed afterwards; the machine is named after the archive and its ``source`` is ``sysfs:<archive>``.

Every failure is a :class:`~numaplane.topology.errors.TopologyError` whose message names the file:
:class:`~numaplane.topology.errors.TopologyLoadError` (``"<path>: <reason>"``) or, from inside a sysfs
tree, :class:`~numaplane.topology.errors.SysfsError`. This is an adapter (it reads files), like
:mod:`numaplane.topology.sysfs`; the pure core never imports it (``pyproject.toml``'s contracts).
"""

from __future__ import annotations

import dataclasses
import tarfile
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from numaplane.documents import DocumentError, read_document
from numaplane.topology.document import topology_from_dict
from numaplane.topology.errors import TopologyFormatError, TopologyLoadError
from numaplane.topology.model import Topology
from numaplane.topology.snapshot import find_sysfs_root, unpack_snapshot
from numaplane.topology.sysfs import View, discover

__all__ = ["ARCHIVE_SUFFIXES", "archive_stem", "load_sysfs", "load_topology", "load_topology_file"]

#: Names of snapshot archives, longest first (``machine.tar.gz`` → ``machine``).
ARCHIVE_SUFFIXES = (".tar.gz", ".tar.xz", ".tar.bz2", ".tgz", ".tar")


def archive_stem(archive: Path) -> str:
    """``machine`` for ``machine.tar.gz`` (and the other tar suffixes)."""
    name = archive.name
    for suffix in ARCHIVE_SUFFIXES:
        if name.endswith(suffix):
            return name.removesuffix(suffix)
    return archive.stem


def load_topology_file(path: str | Path) -> Topology:
    """A topology JSON/YAML document; a document without a name takes the file's stem."""
    file = Path(path)
    try:
        doc = read_document(file)
    except DocumentError as exc:
        raise TopologyLoadError(exc.path or file, exc.reason) from None
    try:
        topology = topology_from_dict(doc)
    except TopologyFormatError as exc:
        raise TopologyLoadError(file, str(exc)) from None
    except (AttributeError, KeyError, TypeError, ValueError) as exc:  # not even a mapping of the right shape
        raise TopologyLoadError(file, f"not a topology document: {exc}") from None
    return topology if topology.name else dataclasses.replace(topology, name=file.stem)


def load_sysfs(path: str | Path, *, view: View = "kubelet") -> Topology:
    """The machine of a sysfs root or snapshot folder, or of a snapshot archive (unpacked meanwhile).

    ``view`` picks the resource managers' picture (``"kubelet"``) or the hwloc one for pictures and
    lscpu-like output (``"hwloc"``); see :mod:`numaplane.topology.sysfs`.
    """
    source = Path(path)
    try:
        if source.is_dir():
            return discover(find_sysfs_root(source), view=view)
        if not source.exists():
            raise TopologyLoadError(source, "no such file or folder")
        if not tarfile.is_tarfile(source):
            raise TopologyLoadError(source, "not a folder or a tar archive")
        with tempfile.TemporaryDirectory(prefix="numaplane-sysfs-") as tmp:
            root = unpack_snapshot(source, tmp)
            topology = discover(root, view=view)
        name = archive_stem(source) if root == Path(tmp) else topology.name
        return dataclasses.replace(topology, name=name, source=f"sysfs:{source}")
    except (EOFError, tarfile.TarError) as exc:  # a truncated or corrupt archive
        raise TopologyLoadError(source, f"broken archive: {exc or 'truncated'}") from None
    except OSError as exc:
        raise TopologyLoadError(exc.filename or source, str(exc.strerror or exc)) from None


def load_topology(spec: str | Path, *, builtins: Mapping[str, Callable[[], Topology]] | None = None) -> Topology:
    """A name in ``builtins``, a sysfs folder or snapshot archive, or a topology JSON/YAML file."""
    if builtins is not None and str(spec) in builtins:
        return builtins[str(spec)]()
    path = Path(spec)
    if not path.exists():
        # a spec written as a path (a folder part or a file suffix) is a missing file, not a misspelt name
        looks_like_path = len(path.parts) > 1 or path.suffix.lower() in (
            ".yaml",
            ".yml",
            ".json",
            ".gz",
            ".tgz",
            ".tar",
        )
        known = f"not a built-in name ({', '.join(sorted(builtins))}) and " if builtins and not looks_like_path else ""
        raise TopologyLoadError(spec, f"{known}no such file or folder")
    if path.is_dir() or path.name.endswith(ARCHIVE_SUFFIXES):
        return load_sysfs(path)
    return load_topology_file(path)
