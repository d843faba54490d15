"""pack's report and a result row without an item id (``null`` or missing): every reader skips such a
row (the reducer's ``parse_row``), so the report counts it nowhere and one note names its file and
line; the pack goes on. A number is read as its text, as every reader reads it (the item loader too)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchcheck.cli import main
from benchcheck.data.pack import PackOptions, pack


def _lines(path: Path, rows: list[object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_pool_rows_without_an_item_id_are_named_not_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    row = {"bench": "B", "step": 1, "model": "m", "removed": False}
    _lines(tmp_path / "results" / "pool" / "step1" / "B.jsonl", [
        {**row, "item_id": "B_0"},
        {**row, "item_id": None, "removed": True},
        {**row, "item_id": 5, "removed": True},  # item 5 of an item file with numeric ids: "5" everywhere
        {**row},  # no item_id at all
        {**row, "item_id": None, "status": "timeout", "error": "t"},
    ])
    r = CliRunner().invoke(main, ["pack", "--results", "results/pool", "--out", "out/r.tar.gz"])
    assert r.exit_code == 0 and r.exception is None, r.output
    bad = "results/pool/step1/B.jsonl"
    note = f"note: 3 result rows have no item_id (null or missing) and are not counted: {bad}:2, {bad}:4, {bad}:5"
    assert note in r.stderr.splitlines()
    rep = json.loads((tmp_path / "out" / "r.report.json").read_text())
    (st,) = rep["stages"]
    assert (st["items_done"], st["removed"], st["error_rows"]) == (2, 1, 0)
    assert note.removeprefix("note: ") in rep["notes"]
    assert note.removeprefix("note: ") in (tmp_path / "out" / "r.report.md").read_text()


def test_sweep_failures_without_an_item_id_are_named_not_counted(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results").mkdir()
    with (tmp_path / "results" / "conditions_results.csv").open("w", newline="") as f:
        csv.writer(f).writerows([["condition", "bench", "item_id", "status", "pred"], ["c", "B", "B_0", "ok", "A"]])
    fails = tmp_path / "data" / "logs" / "failures.jsonl"
    _lines(fails, [{"item_id": "B_1", "kind": "engine"}, {"item_id": None, "kind": "engine"},
                   {"video_id": "v0", "reason": "broken"}, {"item_id": 7, "kind": "engine"}])
    res = pack(PackOptions(Path("results"), (Path("data/logs"),), Path("out.tar.gz")))
    assert res.report.failures == 2 and res.report.failure_examples == ["7", "B_1"]
    assert ("2 result rows have no item_id (null or missing) and are not counted: data/logs/failures.jsonl:2, "
            "data/logs/failures.jsonl:3") in res.report.notes


def test_the_note_names_the_first_rows_and_counts_the_rest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _lines(tmp_path / "results" / "step2" / "B.jsonl",
           [{"item_id": "B_0", "step": 2}] + [{"item_id": None, "step": 2}] * 8)
    res = pack(PackOptions(Path("results"), (), Path("out.tar.gz")))
    (note,) = [n for n in res.report.notes if "item_id" in n]
    assert note == ("8 result rows have no item_id (null or missing) and are not counted: "
                    + ", ".join(f"results/step2/B.jsonl:{n}" for n in range(2, 7)) + " and 3 more")
    assert res.report.stages[0].items_done == 1
