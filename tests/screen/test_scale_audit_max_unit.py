"""A rerun with another split of a benchmark asks no done item again (scale-audit).

A unit's rows go to ``{bench}.p{part}.jsonl``, and the split depends on ``--max-unit`` and on the
benchmark's size. A run reading only its own unit's file did not see the rows an earlier run had
written under another split: a rerun with another ``--max-unit`` (or after a benchmark grew past
20,000 items and became two parts) screened every done item again, a second row each, although
``--plan-only`` said nothing was left.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from screen_helpers import cli, write_rules

from benchcheck.store import read_rows


def _rows_per_item(step_dir: Path) -> Counter[str]:
    return Counter(r["item_id"] for p in sorted(step_dir.glob("*.jsonl")) for r in read_rows(p))


def _screen(items: Path, res: Path, rules: Path, *extra: str) -> str:
    r = cli("screen", "--items", str(items), "--step", "1", "--results", str(res), "--engine", "scripted",
            "--rules", str(rules), "--no-progress", "--bench", "DemoNext", *extra)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_rerun_with_another_max_unit_asks_no_done_item_again(tmp_path: Path) -> None:
    assert cli("demo", "items", "--out", str(tmp_path / "items")).returncode == 0
    rules = write_rules(tmp_path / "rules.json")
    res = tmp_path / "res"
    _screen(tmp_path / "items", res, rules, "--max-unit", "8")
    assert len(list((res / "step1").glob("DemoNext.p*.jsonl"))) > 1
    first = _rows_per_item(res / "step1")
    assert len(first) == 98 and max(first.values()) == 1
    for extra in (("--max-unit", "30"), ()):  # another split, then one unit for the whole benchmark
        out = _screen(tmp_path / "items", res, rules, *extra)
        assert "nothing left to run" in out, out
    assert _rows_per_item(res / "step1") == first
