"""What the CLI's help cites is reachable (issue 41): the protocol from an installed package
(`benchcheck protocol`, the page shipped as package data), the guides as pages of the site."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from docs_text import DOCS, ROOT

from benchcheck.cli import main
from benchcheck.cli.protocol import protocol_text, sections


def _helps(cmd: click.Command = main, path: str = "benchcheck") -> Iterator[tuple[str, str]]:
    yield path, cmd.get_help(click.Context(cmd, info_name=path, terminal_width=200, max_content_width=200))
    if isinstance(cmd, click.Group):
        for name, sub in sorted(cmd.commands.items()):
            yield from _helps(sub, f"{path} {name}")


def test_every_protocol_section_the_help_cites_exists() -> None:
    cited = {(path, next(g for g in m.groups() if g)) for path, text in _helps()
             for m in re.finditer(r"benchcheck protocol (?:\"([^\"]+)\"|'([^']+)'|(\w+))", text)}
    # the overview's lines, `frames`, `videos`, `screen --max-unit` and the protocol command's example
    assert len({name.casefold() for _, name in cited}) >= 3, cited
    runner = CliRunner()
    for path, name in sorted(cited):
        r = runner.invoke(main, ["protocol", name])
        assert r.exit_code == 0 and r.output.startswith("## "), (path, name, r.output[:200])


def test_every_docs_page_the_help_cites_is_a_page_of_the_site() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    cited = {(path, m.group(1)) for path, text in _helps() for m in re.finditer(r"docs/([\w./-]+\.md)", text)}
    bad = [(path, page) for path, page in sorted(cited) if not (DOCS / page).is_file() or f": {page}" not in nav]
    assert bad == []


def test_every_site_page_the_help_cites_by_name_is_in_the_nav() -> None:
    """An installed user has no docs/ folder: help cites a guide as `site page "TITLE"`, TITLE being
    its title in mkdocs.yml's nav (the name the site shows)."""
    nav = (ROOT / "mkdocs.yml").read_text()
    titles = set(re.findall(r"^\s*- (.+?): [\w./-]+\.md\s*$", nav, re.M))
    cited = {(path, " ".join(m.group(1).split())) for path, text in _helps()
             for m in re.finditer(r'site\s+page\s+"([^"]+)"', text)}
    assert len({title for _, title in cited}) >= 4, cited  # Ray, The demo, Items, QA benchmark
    assert [(path, title) for path, title in sorted(cited) if title not in titles] == []


def test_a_built_wheel_ships_the_protocol_and_prints_it(tmp_path: Path) -> None:
    """Build the wheel from a copy of the tree (no network, no build isolation), then run
    `benchcheck protocol` from the wheel alone: the page it prints is docs/PROTOCOL.md."""
    pytest.importorskip("setuptools", reason="the build backend (pyproject's build-system) is not installed")
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    shutil.copytree(ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    wheels = tmp_path / "wheels"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                        "-q", "-w", str(wheels), str(tree)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    (wheel,) = wheels.glob("benchcheck-*.whl")
    page = (ROOT / "docs" / "PROTOCOL.md").read_text()
    with zipfile.ZipFile(wheel) as z:
        assert z.read("benchcheck/docs/PROTOCOL.md").decode() == page
    env = {**os.environ, "PYTHONPATH": str(wheel)}
    run = subprocess.run([sys.executable, "-m", "benchcheck", "protocol", "Steps"], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout == sections(page)["Steps"]
    assert protocol_text() == page
