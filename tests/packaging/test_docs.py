"""docs/: the reference sections are what the code renders now, and every page the guide promises exists."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"


def _gen_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs", REPO / "scripts" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_reference_sections_are_up_to_date() -> None:
    stale = _gen_docs().stale_pages(DOCS)
    assert not stale, f"run: python scripts/gen_docs.py (stale: {stale})"


def test_every_generated_section_is_known_and_filled() -> None:
    gen = _gen_docs()
    found = set()
    for page in DOCS.glob("*.md"):
        for match in gen.MARKER.finditer(page.read_text()):
            found.add(match.group("key"))
            assert match.group("body").count("\n") >= 3, (page.name, match.group("key"))
    assert found == set(gen.SECTIONS), set(gen.SECTIONS) ^ found


def test_one_page_per_topic_and_links_resolve() -> None:
    pages = {p.name for p in DOCS.glob("*.md")}
    assert {
        "install.md",
        "agent.md",
        "exporter.md",
        "scheduler.md",
        "operator.md",
        "simulator.md",
        "workloads.md",
        "troubleshooting.md",
    } <= pages
    for page in DOCS.glob("*.md"):
        for target in re.findall(r"\]\(([a-z-]+\.md)(?:#[^)]*)?\)", page.read_text()):
            assert target in pages, (page.name, target)


def test_a_new_flag_makes_the_docs_stale(tmp_path: Path) -> None:
    gen = _gen_docs()
    page = tmp_path / "agent.md"
    text = (DOCS / "agent.md").read_text().replace("`--nri-socket`", "`--nri-sock`")
    page.write_text(text)
    assert gen.stale_pages(tmp_path) == ["agent.md"]
