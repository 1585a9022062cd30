"""scripts/import_cycles.py: the module graph, its circles and the CI bound, on small trees."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "import_cycles.py"


def _script() -> ModuleType:
    if str(SCRIPT.parent) not in sys.path:  # as ``python scripts/import_cycles.py`` has it: its helper module
        sys.path.insert(0, str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("import_cycles", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["import_cycles"] = module
    spec.loader.exec_module(module)
    return module


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "numaplane" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_lazy_import_closes_a_circle_and_type_checking_does_not(tmp_path: Path) -> None:
    ic = _script()
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "pkg/__init__.py": "from numaplane.pkg.a import f\n",
            "pkg/a.py": "from numaplane.pkg.b import g\ndef f() -> None: ...\n",
            "pkg/b.py": "def g() -> None:\n    from numaplane.pkg import a\n",
            "pkg/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from numaplane.pkg.d import x\n",
            "pkg/d.py": "from . import c\nx = 1\n",
        },
    )
    graph = ic.import_graph(root)
    assert graph["numaplane.pkg.b"] == {"numaplane.pkg.a"}
    assert graph["numaplane.pkg.c"] == set()
    assert ic.strongly_connected(graph) == [["numaplane.pkg.a", "numaplane.pkg.b"]]
    with_tc = ic.import_graph(root, type_checking=True)
    assert ic.strongly_connected(with_tc) == [
        ["numaplane.pkg.a", "numaplane.pkg.b"],
        ["numaplane.pkg.c", "numaplane.pkg.d"],
    ]
    assert ic.circles(with_tc, ["numaplane.pkg.c", "numaplane.pkg.d"]) == [["numaplane.pkg.c", "numaplane.pkg.d"]]


def test_the_tree_is_within_the_ci_bound() -> None:
    ic = _script()
    assert ic.main(["--max", "3"]) == 0
    assert len(ic.strongly_connected(ic.import_graph())) <= 3
