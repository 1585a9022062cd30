"""Module names of a source tree, shared by the CI checks that read it (``import_cycles.py``,
``check_private_imports.py``): the dotted name of a file, and the module a ``from ... import`` names.

Pure: reads no file (the callers parse them). Imported by the scripts beside it (``python scripts/x.py``
puts this folder first on ``sys.path``).
"""

from __future__ import annotations

import ast
from pathlib import Path

__all__ = ["module_name", "resolve_from"]


def module_name(path: Path, root: Path) -> str:
    """Dotted name of the module at ``path`` under ``root`` (a package's ``__init__`` is the package)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def resolve_from(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module ``node`` (a ``from ... import`` in ``module``; ``is_package``: ``module`` is
    a package's ``__init__``) imports from: its ``module`` when absolute, else resolved against
    ``module``'s package, ``level`` dots up."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base.pop()
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))
