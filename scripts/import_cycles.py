"""CI check: import cycles between the modules of ``src/numaplane``.

Builds the module-level import graph from the AST of every module: an edge ``a → b`` for each
``import numaplane.b`` / ``from numaplane.b import x`` / relative import anywhere in ``a`` (module
body or a function body: a lazy import inside a function is still an arrow), except those under an
``if TYPE_CHECKING:`` block (annotations only, never executed; ``--with-type-checking`` counts them
too, to show circles that such a block only hides). ``from pkg import name`` is an edge
to ``pkg.name`` when that is a module, else to ``pkg`` (its ``__init__``). Importing ``a.b`` is not
counted as an edge to the package ``a`` (every submodule would otherwise close a circle with a
re-exporting ``__init__``).

Reports each strongly connected component of more than one module (a module importing itself
does not count) and, per component, its elementary circles (Johnson's algorithm). ``--max N``
exits 1 when there are more than ``N`` components. Exit 0 otherwise.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import srcmodules
from srcmodules import resolve_from

ROOT = Path(__file__).resolve().parent.parent / "src"
PACKAGE = "numaplane"


def module_name(path: Path, root: Path = ROOT) -> str:
    """Dotted name of the module at ``path`` (a package's ``__init__`` is the package)."""
    return srcmodules.module_name(path, root)


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _imports(tree: ast.AST, type_checking: bool = False) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement in ``tree``; those in the body of ``if TYPE_CHECKING:`` only when asked."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
            continue
        if not type_checking and isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _owner(name: str, modules: set[str]) -> str | None:
    """The longest known module that ``name`` is or lies in (``a.b.func`` → ``a.b``)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def import_graph(root: Path = ROOT, type_checking: bool = False) -> dict[str, set[str]]:
    """Module → the ``numaplane`` modules it imports (self-imports dropped).

    ``type_checking`` also counts the imports under ``if TYPE_CHECKING:`` (annotation-only arrows,
    which hide a circle from the interpreter but not from the reader).
    """
    paths = sorted((root / PACKAGE).rglob("*.py"))
    modules = {module_name(p, root) for p in paths}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for path in paths:
        module = module_name(path, root)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in _imports(tree, type_checking):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                source = resolve_from(module, path.name == "__init__.py", node)
                targets = [
                    f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source for alias in node.names
                ]
            for target in targets:
                owner = _owner(target, modules) if target.startswith(PACKAGE) else None
                if owner is not None and owner != module:
                    graph[module].add(owner)
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Components of more than one module (Tarjan, iterative), each sorted, sorted by first name."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def circles(graph: dict[str, set[str]], component: list[str]) -> list[list[str]]:
    """Elementary circles inside one component, each starting at its smallest module.

    A simple depth-first enumeration from each start over members greater than it (Johnson's
    idea without the blocking sets; the components here are a handful of modules).
    """
    members = set(component)
    found: list[list[str]] = []

    def walk(path: list[str], allowed: set[str]) -> None:
        for child in sorted(graph[path[-1]] & allowed):
            if child == path[0]:
                found.append(list(path))
            elif child not in path:
                walk([*path, child], allowed)

    for start in component:
        walk([start], {m for m in members if m >= start})
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--max", type=int, default=None, help="fail when there are more than N cyclic components")
    parser.add_argument(
        "--with-type-checking",
        action="store_true",
        help="also count imports under `if TYPE_CHECKING:` (annotation-only arrows)",
    )
    args = parser.parse_args(argv)
    graph = import_graph(type_checking=args.with_type_checking)
    components = strongly_connected(graph)
    arrows = sum(len(v) for v in graph.values())
    total_circles = 0
    for component in components:
        found = circles(graph, component)
        total_circles += len(found)
        print(f"cycle component ({len(component)} modules): {' ↔ '.join(component)}")
        for circle in found:
            print(f"  circle: {' → '.join([*circle, circle[0]])}")
    print(
        f"import cycles: {len(components)} components, {total_circles} elementary circles "
        f"({len(graph)} modules, {arrows} arrows)"
    )
    if args.max is not None and len(components) > args.max:
        print(f"more import cycles than allowed: {len(components)} > {args.max}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
