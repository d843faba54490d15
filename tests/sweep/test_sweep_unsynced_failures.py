"""A folder made by an older sweep holds failures in its own records only: the error rows of
``sweep_rows/`` (decode and engine failures; no CSV row of them was written then) and the
``no_video`` lines of ``failures.jsonl`` (no row at all). ``sweep analyze`` counts the CSV, as every
reader of it does, so those cells counted nowhere and nothing said so until the next ``sweep run``
wrote them. ``sweep analyze`` and the dry run now name how many there are, where, and which run
writes them; after that run the CSV holds them and the line is gone. Real mp4 files, the CLI, the
scripted engine."""

from __future__ import annotations

import json
from pathlib import Path

from sweep_helpers import every_readers_counts, item, stored_video, sweep_cli, write_items, write_rules

from benchcheck.video.meta import video_dir

RULES = [{"match": "broken", "images": {"count_min": 1}, "error": {"status": 500, "message": "model crashed"}},
         {"match": "", "reply": "The answer is A."}]


def _warnings(res: Path, tag: str) -> list[str]:
    an = sweep_cli("analyze", "--results", str(res), "--out", str(res.parent / f"an_{tag}"), "--no-plots")
    assert an.returncode == 0, an.stderr
    return [x for x in an.stderr.splitlines() if "not in conditions_results.csv yet" in x]


def test_failures_an_older_run_kept_out_of_the_csv_are_named_until_a_run_writes_them(tmp_path: Path) -> None:
    store = tmp_path / "store"
    stored_video(store, "clipA", 40, 320, 180)
    stored_video(store, "clipBad", 40, 320, 180)
    (video_dir(store, "clipBad") / "video.mp4").write_bytes(b"not an mp4")
    items = write_items(tmp_path / "items", [item("Own", 0, "clipA"), item("Own", 1, "clipBad"),
                                             item("Own", 2, "clipA", question="broken one"), item("Own", 3, None)])
    res = tmp_path / "res"
    common = ["--items", str(items[0]), "--store", str(store), "--results", str(res), "--conds", "v_blind,v_1",
              "--engine", "scripted"]
    run = [*common, "--rules", str(write_rules(tmp_path / "r.json", RULES)), "--decode-workers", "0", "--no-progress"]
    assert sweep_cli("run", *run).returncode == 0
    assert not _warnings(res, "synced")
    whole = every_readers_counts(res, common, "whole")

    # The folder as an older sweep left it: no error row in the CSV, the no-video cell in failures.jsonl only.
    csv_path, typed = res / "conditions_results.csv", res / "sweep_rows" / "v_1" / "Own.jsonl"
    csv_path.write_text("".join(x for x in csv_path.read_text().splitlines(keepends=True) if ",error," not in x))
    typed.write_text("".join(x for x in typed.read_text().splitlines(keepends=True)
                             if json.loads(x).get("item_id") != "Own_3"))
    old = every_readers_counts(res, common, "old")
    for reader in ("analyze", "pack", "page"):
        assert old[reader]["v_1"]["n"] == 1 and old[reader]["v_1"]["errors"] == 0, reader

    lines = _warnings(res, "old")
    assert len(lines) == 1, lines
    assert lines[0].startswith("warning: 3 cells failed by earlier runs are not in conditions_results.csv yet (2 in ")
    assert f"1 in {res / 'data' / 'logs' / 'failures.jsonl'}; first: Own Own_1 v_1)" in lines[0]
    assert "the next `sweep run` on this folder writes them" in lines[0]
    dry = sweep_cli("dry-run", *common)
    assert [x for x in dry.stdout.splitlines() if x.startswith("csv: 3 cells failed by earlier runs")], dry.stdout

    # The next run writes them (before it asks anything); every reader then counts them, as before.
    caught = sweep_cli("run", *run)
    assert caught.returncode == 0, caught.stdout + caught.stderr
    assert "csv: 2 rows caught up" in (res / "logs" / "runner.log").read_text()
    assert not _warnings(res, "caught")
    again = every_readers_counts(res, common, "again")
    for reader in ("analyze", "pack", "page"):
        assert again[reader] == whole[reader], reader
        assert again[reader]["v_1"]["errors"] == 3, reader


def test_a_records_standing_is_that_of_its_csv_row() -> None:
    """``unsynced`` judges a typed row by the few columns that decide which row of a key counts
    (``rows.csv_standing``), not its whole CSV row: they must be those of the row ``csv_of`` writes."""
    from benchcheck.records import error_record, gen_row
    from benchcheck.sweep.results import standing
    from benchcheck.sweep.rows import csv_of, csv_standing

    base = {"item_id": "i1", "bench": "B", "step": "v_1", "condition": "v_1", "config_hash": "abc",
            "written_at": "2026-01-01T00:00:00Z"}
    recs = [gen_row({**base, "status": "ok", "text": "A", "parse_status": "unparsed", "item_hash": "0f1e",
                     "meta": {"parser": "mc-text-v1"}}),
            gen_row({**base, "status": "ok", "text": "", "parse_status": "NA", "meta": {"reason": "too_short"}}),
            error_record({**base, "status": "error", "error_kind": "internal", "error": "internal: no video: gone",
                          "item_hash": "0f1e", "retry_free": True})]
    for rec in recs:
        whole = {k: str(v) for k, v in csv_of(rec).items()}
        light = csv_standing(rec)
        assert {k: whole[k] for k in ("bench", "item_id", "condition", "status", "config_hash")} == \
            {k: light[k] for k in ("bench", "item_id", "condition", "status", "config_hash")}
        assert standing(light) == standing(whole), rec
