"""CI check: no module imports another module's underscore (private) names.

A name that crosses modules is part of a contract and gets a public name. Looks at every
``from numaplane.x import _name`` (absolute or relative) and every ``numaplane_module._name``
attribute read through a module imported as ``import numaplane.x [as y]`` or
``from numaplane.x import module``, in ``src/numaplane``; dunder names are fine. Exit status 1
and one line per offence when any is found outside :data:`ALLOWED`.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from srcmodules import module_name, resolve_from

ROOT = Path(__file__).resolve().parent.parent / "src"

#: Known offenders, each "importing module: imported module.name" (none left: keep it that way).
ALLOWED: frozenset[str] = frozenset()


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _known_modules() -> set[str]:
    return {module_name(p, ROOT) for p in ROOT.rglob("*.py")}


def offences(path: Path, modules: set[str]) -> list[str]:
    """``"importer: imported.name"`` for each private name ``path`` takes from another module."""
    module = module_name(path, ROOT)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[str] = []
    aliases: dict[str, str] = {}  # local name → numaplane module it stands for
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = resolve_from(module, path.name == "__init__.py", node)
            if not source.startswith("numaplane"):
                continue
            for alias in node.names:
                if f"{source}.{alias.name}" in modules:
                    aliases[alias.asname or alias.name] = f"{source}.{alias.name}"
                elif _private(alias.name) and source != module:
                    found.append(f"{module}: {source}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("numaplane") and alias.asname:
                    aliases[alias.asname] = alias.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            target = node.value
            if isinstance(target, ast.Name) and target.id in aliases and aliases[target.id] != module:
                found.append(f"{module}: {aliases[target.id]}.{node.attr}")
    return found


def main() -> int:
    modules = _known_modules()
    found = sorted({o for p in sorted(ROOT.rglob("*.py")) for o in offences(p, modules)})
    bad = [o for o in found if o not in ALLOWED]
    for offence in bad:
        print(f"private name imported across modules: {offence}")
    stale = sorted(ALLOWED - set(found))
    for entry in stale:
        print(f"allow-list entry no longer needed (remove it): {entry}")
    if bad or stale:
        return 1
    print(f"no private names imported across modules ({len(ALLOWED)} allowed, listed in {Path(__file__).name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
