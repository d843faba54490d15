"""Our own runs' failures (a clip that does not decode, an engine error) were typed error rows in
``sweep_rows/`` and lines in ``failures.jsonl`` only: ``conditions_results.csv`` held no row of such
a cell, so ``sweep analyze`` (CSV, Markdown, warnings), ``pack`` and the report's sweep page counted
no error, and an accuracy resting on part of a condition's items looked whole. The sweep now writes
an ``error`` row of each such cell into the CSV (once per key and spec, from the typed rows, caught
up after a kill), which every reader counts as it counts another tool's error row; an answer that
follows (asked again within the run or by the next one) replaces it, a given-up item stays an error
and a rerun adds nothing."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from sweep_helpers import every_readers_counts, item, stored_video, sweep_cli, write_items, write_rules

from benchcheck.records import ErrorRow
from benchcheck.store import read_records
from benchcheck.video.meta import video_dir

# Gold is A everywhere. "broken": the engine fails every request with frames (v_1, not v_blind);
# "flaky": it fails the first request with frames, the run asks again and gets the answer.
RULES = [{"match": "broken", "images": {"count_min": 1}, "error": {"status": 500, "message": "model crashed"}},
         {"match": "flaky", "images": {"count_min": 1}, "error": {"status": 500, "message": "overloaded"}, "times": 1},
         {"match": "", "reply": "The answer is A."}]


def _csv_rows(res: Path) -> list[dict[str, str]]:
    return list(csv.DictReader((res / "conditions_results.csv").open(newline="")))


def _analyze_warnings(res: Path, tag: str) -> list[str]:
    an = sweep_cli("analyze", "--results", str(res), "--out", str(res.parent / f"warn_{tag}"), "--no-plots")
    assert an.returncode == 0, an.stderr
    return [x for x in an.stderr.splitlines() if x.startswith("warning: ")]


def test_decode_and_engine_failures_are_counted_by_every_reader(tmp_path: Path) -> None:
    store = tmp_path / "store"
    stored_video(store, "clipA", 40, 320, 180)
    stored_video(store, "clipBad", 40, 320, 180)
    (video_dir(store, "clipBad") / "video.mp4").write_bytes(b"not an mp4")
    rows = [item("Own", k, "clipA") for k in range(4)]
    rows += [item("Own", 4, "clipBad"), item("Own", 5, "clipA", question="flaky one"),
             item("Own", 6, "clipA", question="broken one")]
    items = write_items(tmp_path / "items", rows)
    res = tmp_path / "res"
    common = ["--items", str(items[0]), "--store", str(store), "--results", str(res), "--conds", "v_blind,v_1"]
    rules = write_rules(tmp_path / "rules.json", RULES)
    run = [*common, "--engine", "scripted", "--rules", str(rules), "--decode-workers", "0", "--no-progress"]
    first = sweep_cli("run", *run)
    assert first.returncode == 0 and "Traceback" not in first.stderr, first.stdout + first.stderr

    # Own_4's clip and Own_6's engine failed three times in v_1 (given up); Own_5 failed once, then answered.
    typed = [r for r in read_records(res / "sweep_rows" / "v_1" / "Own.jsonl") if isinstance(r, ErrorRow)]
    assert sorted(r.item_id for r in typed) == ["Own_4"] * 3 + ["Own_5"] + ["Own_6"] * 3
    fails = [json.loads(x) for x in (res / "data" / "logs" / "failures.jsonl").read_text().splitlines()]
    assert {(f["item_id"], f["kind"]) for f in fails} == {("Own_4", "decode"), ("Own_5", "http"), ("Own_6", "http")}

    # One error row per failed key in the CSV (not one per attempt); Own_5's answer follows its error row.
    written = [(r["item_id"], r["condition"], r["status"]) for r in _csv_rows(res)]
    assert sorted(k for k in written if k[2] == "error") == [("Own_4", "v_1", "error"), ("Own_5", "v_1", "error"),
                                                             ("Own_6", "v_1", "error")]
    assert written.index(("Own_5", "v_1", "ok")) > written.index(("Own_5", "v_1", "error"))
    meta = {r["item_id"]: json.loads(r["meta"]) for r in _csv_rows(res) if r["status"] == "error"}
    assert meta["Own_4"]["error_kind"] == "decode" and meta["Own_6"]["error_kind"] == "http 500"
    assert meta["Own_6"]["error"] == "model crashed"

    want = {"v_blind": {"n": 7, "errors": 0}, "v_1": {"n": 5, "errors": 2}}
    got = every_readers_counts(res, common, "first")
    assert got["dry"] == {"v_blind": {"todo": 0, "done": 7}, "v_1": {"todo": 0, "done": 5}}
    for reader in ("analyze", "pack", "page"):
        assert {c: {k: v[k] for k in ("n", "errors")} for c, v in got[reader].items()} == want, reader
    assert got["analyze"]["v_1"]["acc"] == 1.0 and got["page"]["v_1"]["acc"] == 1.0
    warnings = _analyze_warnings(res, "first")
    assert any("2 error rows (no answer) in 1 benchmark x condition cell" in w for w in warnings), warnings
    page = (tmp_path / "readers_first" / "report" / "sweep.html").read_text(encoding="utf-8")
    assert "<b>2 (error 2)</b>" in page

    # Given up: a rerun asks nothing and writes nothing; the errors stay counted.
    before = (res / "conditions_results.csv").read_bytes()
    again = sweep_cli("run", *run)
    assert again.returncode == 0 and "nothing to do" in again.stdout, again.stdout + again.stderr
    assert (res / "conditions_results.csv").read_bytes() == before
    got = every_readers_counts(res, common, "again")
    for reader in ("analyze", "pack", "page"):
        assert {c: {k: v[k] for k in ("n", "errors")} for c, v in got[reader].items()} == want, reader

    # A run killed between an error's typed row and its CSV row: the next run writes the CSV row.
    lines = before.decode().splitlines(keepends=True)
    cut = "".join(x for x in lines if not x.startswith("Own,Own_6,v_1,error,"))
    (res / "conditions_results.csv").write_text(cut)
    caught = sweep_cli("run", *run)
    assert caught.returncode == 0 and "1 rows caught up" in caught.stdout, caught.stdout + caught.stderr
    after = (res / "conditions_results.csv").read_text()
    assert after.startswith(cut) and after[len(cut):].startswith("Own,Own_6,v_1,error,")
    assert len(after.splitlines()) == len(lines)
    got = every_readers_counts(res, common, "caught")
    for reader in ("analyze", "pack", "page"):
        assert {c: {k: v[k] for k in ("n", "errors")} for c, v in got[reader].items()} == want, reader


def test_an_error_a_later_run_answers_is_replaced_and_counted_once(tmp_path: Path) -> None:
    store = tmp_path / "store"
    stored_video(store, "clipA", 40, 320, 180)
    items = write_items(tmp_path / "items", [item("Own", 0, "clipA"), item("Own", 1, "clipA", question="refused")])
    res = tmp_path / "res"
    common = ["--items", str(items[0]), "--store", str(store), "--results", str(res), "--conds", "v_blind"]
    tail = ["--engine", "scripted", "--decode-workers", "0", "--no-progress", "--workers", "1"]
    # The server refuses the run at Own_1 (403): the run stops, the item's retries untouched, for the next run.
    refuse = write_rules(tmp_path / "refuse.json", [{"match": "refused", "error": {"status": 403, "message": "no key"}},
                                                    {"match": "", "reply": "The answer is A."}])
    stopped = sweep_cli("run", *common, *tail, "--rules", str(refuse))
    assert "Traceback" not in stopped.stderr
    assert [(r["item_id"], r["status"]) for r in _csv_rows(res)] == [("Own_0", "ok"), ("Own_1", "error")]
    got = every_readers_counts(res, common, "stopped")
    assert got["dry"] == {"v_blind": {"todo": 1, "done": 1}}
    for reader in ("analyze", "pack", "page"):
        assert {c: (v["n"], v["errors"]) for c, v in got[reader].items()} == {"v_blind": (1, 1)}, reader

    answer = write_rules(tmp_path / "answer.json", [{"match": "", "reply": "The answer is A."}])
    done = sweep_cli("run", *common, *tail, "--rules", str(answer))
    assert done.returncode == 0, done.stdout + done.stderr
    assert [(r["item_id"], r["status"]) for r in _csv_rows(res)] == [("Own_0", "ok"), ("Own_1", "error"),
                                                                     ("Own_1", "ok")]
    got = every_readers_counts(res, common, "answered")
    assert got["dry"] == {"v_blind": {"todo": 0, "done": 2}}
    for reader in ("analyze", "pack", "page"):
        assert {c: (v["n"], v["errors"]) for c, v in got[reader].items()} == {"v_blind": (2, 0)}, reader
    assert not [w for w in _analyze_warnings(res, "answered") if "error row" in w]


def test_an_error_row_in_the_csv_does_not_count_again_toward_giving_up(tmp_path: Path) -> None:
    """Two errors of a cell (as a run stopped after them leaves its rows): one error row in the CSV,
    two counted errors, so the next run asks the cell a third time, as screening does; the CSV's
    copy of a typed error row counted again gave it up one error early."""
    from benchcheck.engines.base import Failure
    from benchcheck.items import load_items
    from benchcheck.sweep.cli_run import SweepArgs, plan
    from benchcheck.sweep.engine import SweepEngine
    from benchcheck.sweep.results import SweepPaths
    from benchcheck.sweep.rows import engine_error
    from benchcheck.sweep.runner import write_records

    store = tmp_path / "store"
    stored_video(store, "clipA", 40, 320, 180)
    items = load_items(write_items(tmp_path / "items", [item("Own", 0, "clipA"), item("Own", 1, "clipA")])).items
    rules = write_rules(tmp_path / "rules.json", [{"match": "", "reply": "The answer is A."}])
    a = SweepArgs(items, str(store), SweepPaths.under(tmp_path / "res"), "v_blind",
                  engine=SweepEngine("scripted", rules=str(rules)), progress=False, decode_workers=0)
    cells, specs, _ = plan(a)
    cell = next(c for c in cells if c.item.item_id == "Own_1")
    for n in range(2):
        err = engine_error(cell, specs["v_blind"], Failure("Own_1", "http", f"overloaded {n}", status=500))
        write_records(a.paths, "Own", "v_blind", [err])
    assert [(r["item_id"], r["status"]) for r in _csv_rows(a.paths.results)] == [("Own_1", "error")]
    kinds = {c.item.item_id: c.kind for c in plan(a)[0]}
    assert kinds == {"Own_0": "todo", "Own_1": "todo"}
