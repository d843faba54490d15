"""Helpers for the import/export tests: a small user-style benchmark screened at step 1 (scripted engine,
in this process) so that every item is decided, and the CLI run in-process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from benchcheck.cli import main

RULES = [{"match": "", "letters": {"A": -1.2, "B": -1.5, "C": -1.4, "D": -1.3, "E": -3.0}}]


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def screen_step1(items: Path, results: Path, root: Path) -> None:
    """Step 1 (blind: needs no video) decides every item; with these rules no letter wins by log 2."""
    rules = root / "rules.json"
    rules.write_text(json.dumps(RULES))
    r = invoke("screen", "--items", str(items), "--step", "1", "--results", str(results), "--engine", "scripted",
               "--rules", str(rules), "--no-progress")
    assert r.exit_code == 0, r.output


def export(results: Path, items: Path, fmt: str, out: Path, *extra: str) -> Result:
    r = invoke("export", "--results", str(results), "--items", str(items), "--format", fmt, "--chain", "1",
               "--out", str(out), *extra)
    assert r.exit_code == 0, r.output
    return r
