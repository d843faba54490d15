"""The documentation site (issue 41): builds with --strict, fetches nothing at view time, and its
generated pages (start page, CLI reference, Python API, decision records) come from the sources."""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from docs_text import DOCS, README, ROOT

from benchcheck.cli import main


def _commands(cmd: click.Command = main, path: str = "benchcheck") -> Iterator[tuple[str, click.Command]]:
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name, sub in sorted(cmd.commands.items()):
            if not sub.hidden:
                yield from _commands(sub, f"{path} {name}")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built with --strict from a copy of the sources plus two decision records, as a
    merged tree would hold them (none is named in mkdocs.yml)."""
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    src = tmp_path_factory.mktemp("src")
    shutil.copy(ROOT / "mkdocs.yml", src / "mkdocs.yml")
    shutil.copy(README, src / "README.md")
    shutil.copytree(DOCS, src / "docs")
    decisions = src / "docs" / "decisions"
    decisions.mkdir(exist_ok=True)
    (decisions / "998-docsite-test-first.md").write_text("# 998: first\n\nSee [the numbers](../PERFORMANCE.md).\n")
    (decisions / "999-docsite-test-second.md").write_text("# 999: second\n\nText.\n")
    out = tmp_path_factory.mktemp("site")
    t0 = time.process_time()
    build(load_config(config_file=str(src / "mkdocs.yml"), site_dir=str(out), strict=True))
    assert time.process_time() - t0 < 30
    return out


def test_the_site_has_every_page_of_the_nav(site: Path) -> None:
    for page in ("index", "getting-started", "without-a-gpu", "screening", "launch", "slurm", "ray", "audit",
                 "PROTOCOL", "reference/cli", "reference/api", "ARCHITECTURE", "PERFORMANCE", "development"):
        assert (site / f"{page}.html").is_file(), page


def test_the_start_page_is_the_readme_with_links_inside_the_site(site: Path) -> None:
    index = (site / "index.html").read_text()
    assert "<h1 id=\"benchcheck\">BenchCheck" in index
    assert 'src="img/report.png"' in index and (site / "img" / "report.png").is_file()
    assert 'href="getting-started.html' in index and 'href="docs/' not in index


def test_nothing_is_fetched_from_the_network_at_view_time(site: Path) -> None:
    """No CDN script or stylesheet, no web font: the site reads offline (file:// included)."""
    fetched = re.compile(r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)=\"(?:https?:)?//", re.I)
    for page in site.rglob("*.html"):
        html = page.read_text()
        bad = [m.group(0) for m in fetched.finditer(html) if 'rel="canonical"' not in m.group(0)]
        assert bad == [], (page.name, bad[:3])
        assert "fonts.googleapis" not in html and "fonts.gstatic" not in html, page.name
    for css in site.rglob("*.css"):
        assert not re.search(r"@import\s+url\(\s*['\"]?https?:", css.read_text()), css.name


def test_cli_reference_holds_every_command_and_option(site: Path) -> None:
    page = (site / "reference" / "cli.html").read_text()
    missing = []
    for path, cmd in _commands():
        if f"<code>{path}</code>" not in page:
            missing.append(path)
        missing += [f"{path} {opt}" for p in cmd.params if isinstance(p, click.Option) and not p.hidden
                    for opt in p.opts if opt not in page]
    assert missing == []


def test_python_api_page_documents_the_records_the_store_and_the_engines(site: Path) -> None:
    page = (site / "reference" / "api.html").read_text()
    from benchcheck import records, store
    from benchcheck.engines import base

    for name in ("ScoreRow", "GenRow", "ErrorRow", "StepStore", "RunSpec", "Engine", "ScoreRequest", "LetterScores",
                 "append_rows", "read_rows", "load_items"):
        assert f'id="{name.casefold()}"' in page, name
    # docstrings come through: one line of each module's main record
    for obj in (records.ScoreRow, store.StepStore, base.ScoreRequest):
        first = (obj.__doc__ or "").strip().splitlines()[0].replace("``", "")
        words = first.split()[:4]
        assert " ".join(words) in re.sub(r"<[^>]+>", "", page), (obj.__name__, words)


def test_decision_records_join_the_nav_under_performance(site: Path) -> None:
    perf = (site / "PERFORMANCE.html").read_text()
    assert perf.index("decisions/998-docsite-test-first.html") < perf.index("decisions/999-docsite-test-second.html")
    assert (site / "decisions" / "999-docsite-test-second.html").is_file()


def test_every_page_under_docs_is_in_the_nav() -> None:
    """A page missing from mkdocs.yml fails the strict build (validation.omitted_files: warn); this
    names it directly."""
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = [p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")
             if p.relative_to(DOCS).parts[0] not in ("hooks", "decisions")]
    assert [p for p in pages if f": {p}" not in nav] == []
