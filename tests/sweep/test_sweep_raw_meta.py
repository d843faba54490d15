"""Seed gap 5: a conditions_results.csv made elsewhere may have no ``meta`` column; the reused rows'
``reused_from`` and the NA rows' reasons must then still be kept, in p1_raw."""

from __future__ import annotations

import csv
from pathlib import Path

from sweep_helpers import item, write_items, write_rules

from benchcheck.items import load_items
from benchcheck.store import read_rows
from benchcheck.sweep.cli_run import SweepArgs, run
from benchcheck.sweep.engine import SweepEngine
from benchcheck.sweep.results import SweepPaths

ORIGIN_HEADER = ["bench", "item_id", "condition", "status", "pred", "gold", "correct", "video_id", "n_frames", "model"]


def test_reuse_and_na_details_are_kept_in_p1_raw_without_a_meta_column(tmp_path: Path, store: Path) -> None:
    results = tmp_path / "fp" / "results"
    results.mkdir(parents=True)
    with (results / "conditions_results.csv").open("w", newline="") as f:
        csv.writer(f).writerow(ORIGIN_HEADER)  # the origin cluster's file: no meta, no written_at
    items = write_items(tmp_path / "items", [item("Alpha", 1, "short20"), item("Alpha", 2, "s480")])
    rules = write_rules(tmp_path / "rules.json", [{"match": "", "reply": "The answer is A."}])
    a = SweepArgs(load_items(items).items, str(store), SweepPaths.under(results),
                  "v_32,v_32_s448,v_128_s224", engine=SweepEngine("scripted", rules=str(rules)), progress=False,
                  decode_workers=0)
    summary = run(a, lambda s: None)
    assert summary.written["NA"] == 1 and summary.written["reuse"] == 2  # both stored at or below 448
    with (results / "conditions_results.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ORIGIN_HEADER  # the file keeps its own columns
    by = {(r["item_id"], r["condition"]): r for r in rows}
    assert by[("Alpha_1", "v_128_s224")]["status"] == "NA"
    assert by[("Alpha_2", "v_32_s448")]["pred"] == by[("Alpha_2", "v_32")]["pred"]

    reused = list(read_rows(results / "p1_raw" / "v_32_s448" / "Alpha__DIAG_V.jsonl"))
    assert sorted((r["item_id"], r["meta"]["reused_from"]) for r in reused) == [("Alpha_1", "v_32"),
                                                                               ("Alpha_2", "v_32")]
    na = [r for r in read_rows(results / "p1_raw" / "v_128_s224" / "Alpha__DIAG_V.jsonl") if r["status"] == "NA"]
    assert [r["item_id"] for r in na] == ["Alpha_1"]
    assert na[0]["meta"]["reason"]  # why it is NA (too_short), not lost

    again = run(a, lambda s: None)  # nothing left: no raw line is written twice
    assert sum(again.written.values()) == 0
    assert len(list(read_rows(results / "p1_raw" / "v_32_s448" / "Alpha__DIAG_V.jsonl"))) == 2
