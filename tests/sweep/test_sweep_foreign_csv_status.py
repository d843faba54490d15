"""A conditions CSV made by another tool without a ``status`` column (``bench,item_id,condition,
pred,gold,video_id``) takes our rows in its own columns, so an ``error`` or ``NA`` row went in
without its status: every reader read it as ``ok`` and scored it as a wrong answer, and on a rerun
the file's copy was taken for the key's answer, so the real answer was never appended. Rows that are
no answer stay out of such a file (they are in ``sweep_rows/`` and ``failures.jsonl``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchcheck.records import NA
from benchcheck.sweep import results
from benchcheck.sweep.results import append_csv_fresh, read_csv, row_correct, row_status

HEADER = "bench,item_id,condition,pred,gold,video_id\n"


def _row(item: str, status: str, pred: str) -> dict[str, str]:
    return {"bench": "B", "item_id": item, "condition": "v_8_s224", "status": status, "pred": pred,
            "gold": "B", "correct": "", "video_id": "vid2", "config_hash": "h1", "meta": "{}",
            "written_at": "2026-01-01T00:00:00Z"}


@pytest.mark.parametrize("status", ["error", NA])
def test_a_row_that_is_no_answer_stays_out_of_a_csv_without_status(tmp_path: Path, status: str) -> None:
    p = tmp_path / "conditions_results.csv"
    p.write_text(HEADER + "B,q1,v_8_s224,B,B,vid1\n")
    before = p.read_bytes()
    assert append_csv_fresh(p, [_row("q2", status, "")]) == []
    assert p.read_bytes() == before  # nothing a reader would score as a wrong answer
    assert "q2" not in {r["item_id"] for r in read_csv(p)}

    results._SEEN.clear()  # a rerun: a fresh process reads the file again
    assert len(append_csv_fresh(p, [_row("q2", "ok", "B")])) == 1
    got = {r["item_id"]: (row_status(r), row_correct(r)) for r in read_csv(p)}
    assert got == {"q1": ("ok", 1), "q2": ("ok", 1)}


def test_a_csv_with_status_still_takes_the_error_row_then_its_answer(tmp_path: Path) -> None:
    p = tmp_path / "conditions_results.csv"
    assert len(append_csv_fresh(p, [_row("q2", "error", "")])) == 1
    results._SEEN.clear()
    assert len(append_csv_fresh(p, [_row("q2", "ok", "B")])) == 1
    assert [(row_status(r), row_correct(r)) for r in read_csv(p)] == [("ok", 1)]
