"""Pilot selection, the timing table, and the CSV appender's edge cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchcheck.sweep.pilot import pilot_benches, timing_table
from benchcheck.sweep.results import COLUMNS, append_csv, read_csv


def test_pilot_prefers_the_seed_benchmarks_else_the_first_three() -> None:
    assert pilot_benches(["TimeScope", "A", "MVBench", "LVBench", "Z"]) == ["MVBench", "LVBench", "TimeScope"]
    assert pilot_benches(["d", "c", "b", "a"]) == ["a", "b", "c"]


def test_timing_table_sums_per_condition(tmp_path: Path) -> None:
    p = tmp_path / "p1_timing.jsonl"
    rows = [{"bench": "A", "condition": "v_1", "infer": 2, "infer_s": 1.0, "decode_s": 0.5, "prompt_tokens": 200},
            {"bench": "B", "condition": "v_1", "infer": 2, "infer_s": 3.0, "decode_s": 0.5, "prompt_tokens": 600}]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"torn": ')
    (line,) = timing_table(p)
    assert "infer=    4" in line and "infer_s/item=  1.00" in line and "prompt_tok/item=     200" in line
    assert "infer_s/item=  0.50" in timing_table(p, ["A"])[0]


def _row(i: int, meta: str = "{}") -> dict[str, object]:
    return {"bench": "B", "item_id": f"i{i}", "condition": "v_1", "status": "ok", "meta": meta,
            "written_at": "2026-01-01T00:00:00Z"}


def test_torn_row_with_an_open_quote_is_skipped_and_redone(tmp_path: Path) -> None:
    p = tmp_path / "conditions_results.csv"
    append_csv(p, [_row(0, '{"a": 1}')])
    with p.open("a") as f:
        f.write('B,i1,v_1,ok,,,,,,,,,,,,,,"{""a')  # a writer killed inside the quoted meta field
    torn = p.read_bytes()
    assert [r["item_id"] for r in read_csv(p)] == ["i0"]
    assert append_csv(p, [_row(1), _row(0)]) == 1
    assert p.read_bytes().startswith(torn)
    assert sorted(r["item_id"] for r in read_csv(p)) == ["i0", "i1"]


def test_foreign_csv_keeps_its_header_and_rows(tmp_path: Path) -> None:
    p = tmp_path / "conditions_results.csv"
    p.write_text("bench,item_id,condition,pred,correct\nB,i0,v_1,A,1\n")
    before = p.read_bytes()
    assert append_csv(p, [_row(0), {**_row(1), "pred": "C", "correct": 0}]) == 1
    assert p.read_bytes() == before + b"B,i1,v_1,C,0\n"
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="header lacks"):
        read_csv(bad)
    assert COLUMNS[-1] == "written_at"


def test_cli_usage_errors_are_one_line_exit_2(tmp_path: Path) -> None:
    from click.testing import CliRunner
    from sweep_helpers import item, write_items

    from benchcheck.cli import main

    (items,) = write_items(tmp_path / "items", [item("A", 0, None)])
    base = ["sweep", "dry-run", "--items", str(items), "--results", str(tmp_path / "r")]
    for extra, msg in ((["--conds", "v_nope"], "--conds"), (["--bench", "Zed"], "--bench: no items for Zed")):
        res = CliRunner().invoke(main, [*base, *extra])
        assert res.exit_code == 2 and msg in res.output and "Traceback" not in res.output
    ok = CliRunner().invoke(main, [*base, "--conds", "v_blind,v_1", "--pilot"])
    assert ok.exit_code == 0 and "TOTAL todo=1 NA=0 reuse=0 failures=1" in ok.output
