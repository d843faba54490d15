"""Units stay the same whatever part of a benchmark a run asks for (audit-crash), and a rerun under
another split asks no done item again (scale-audit).

A unit's rows go to ``{bench}.p{part}.jsonl``. Units were planned over the items eligible *in
this run*: a pilot with ``--limit`` (or a later step run while an earlier one was still filling
in) split a benchmark differently from the full run, so the same item fell in another part file
and was screened again (two rows), and two processes planning differently worked the same items
under different leases. And a run read only its own unit's file: a rerun with another
``--max-unit`` (or after a benchmark grew past 20,000 items and became two parts) screened every
done item again, although ``--plan-only`` said nothing was left; it now reads every row file of
its benchmark.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from screen_helpers import cli, popen, write_rules

from benchcheck.store import read_rows


def _rows_per_item(step_dir: Path) -> Counter[str]:
    return Counter(r["item_id"] for p in sorted(step_dir.glob("*.jsonl")) for r in read_rows(p))


def _screen(items: Path, res: Path, rules: Path, *extra: str, max_unit: str | None = "8") -> str:
    unit = ("--max-unit", max_unit) if max_unit else ()
    r = cli("screen", "--items", str(items), "--step", "1", "--results", str(res), "--engine", "scripted",
            "--rules", str(rules), "--no-progress", "--bench", "DemoNext", *unit, *extra)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_pilot_with_limit_then_full_run_screens_each_item_once(tmp_path: Path) -> None:
    assert cli("demo", "items", "--out", str(tmp_path / "items")).returncode == 0
    rules = write_rules(tmp_path / "rules.json")
    res = tmp_path / "res"
    _screen(tmp_path / "items", res, rules, "--limit", "20")
    first = _rows_per_item(res / "step1")
    assert sum(first.values()) == 20
    _screen(tmp_path / "items", res, rules)
    rows = _rows_per_item(res / "step1")
    assert len(rows) == 98
    assert [i for i, n in rows.items() if n > 1] == []  # the pilot's items were not asked again


def test_two_runs_with_different_limits_at_once_share_units(tmp_path: Path) -> None:
    assert cli("demo", "items", "--out", str(tmp_path / "items")).returncode == 0
    rules = write_rules(tmp_path / "rules.json", delay_s=0.01)
    res = tmp_path / "res"
    base = ("screen", "--items", str(tmp_path / "items"), "--step", "1", "--results", str(res), "--engine",
            "scripted", "--rules", str(rules), "--no-progress", "--bench", "DemoNext", "--max-unit", "8",
            "--batch-items", "1")
    procs = [popen(*base, "--limit", "20"), popen(*base)]
    for p in procs:
        assert p.wait(timeout=240) == 0, p.stderr.read() if p.stderr else ""
    _screen(tmp_path / "items", res, rules)  # whatever a held unit left
    rows = _rows_per_item(res / "step1")
    assert len(rows) == 98
    assert [i for i, n in rows.items() if n > 1] == []


def test_rerun_with_another_max_unit_asks_no_done_item_again(tmp_path: Path) -> None:
    assert cli("demo", "items", "--out", str(tmp_path / "items")).returncode == 0
    rules = write_rules(tmp_path / "rules.json")
    res = tmp_path / "res"
    _screen(tmp_path / "items", res, rules)
    assert len(list((res / "step1").glob("DemoNext.p*.jsonl"))) > 1
    first = _rows_per_item(res / "step1")
    assert len(first) == 98 and max(first.values()) == 1
    for unit in ("30", None):  # another split, then one unit for the whole benchmark
        out = _screen(tmp_path / "items", res, rules, max_unit=unit)
        assert "nothing left to run" in out, out
    assert _rows_per_item(res / "step1") == first
