"""A cell that fails before any clip is decoded (its item has no usable video; its frame plan cannot
be made) was a line in ``failures.jsonl`` and nothing else: ``conditions_results.csv`` had no row of
it, so ``sweep analyze``, ``pack`` and the report's sweep page counted no error and an accuracy
resting on part of a condition's items looked whole. Such a cell now gets an ``error`` row with its
reason, as a decode failure does (typed in ``sweep_rows/`` and in the CSV), once per key, spec and
item version however many runs plan it; it never gives the item up, so a run after the video is
stored answers it, and that answer replaces the error row. Real mp4 files, the CLI, the scripted
engine."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

from sweep_helpers import every_readers_counts, item, stored_video, sweep_cli, write_items, write_rules

from benchcheck.items import load_items
from benchcheck.records import ErrorRow
from benchcheck.store import read_records
from benchcheck.sweep.cli_run import SweepArgs, planned, run_local
from benchcheck.sweep.engine import SweepEngine
from benchcheck.sweep.results import SweepPaths, read_csv_all


def _csv(res: Path) -> list[dict[str, str]]:
    return list(csv.DictReader((res / "conditions_results.csv").open(newline="")))


def _errors(res: Path, condition: str) -> list[ErrorRow]:
    return [r for r in read_records(res / "sweep_rows" / condition / "Own.jsonl") if isinstance(r, ErrorRow)]


def test_a_cell_without_its_video_gets_an_error_row_until_the_video_comes(tmp_path: Path) -> None:
    store = tmp_path / "store"
    stored_video(store, "clipA", 40, 320, 180)
    items = write_items(tmp_path / "items", [item("Own", 0, "clipA"), item("Own", 1, "clipLate"),
                                             item("Own", 2, None)])
    res = tmp_path / "res"
    common = ["--items", str(items[0]), "--store", str(store), "--results", str(res), "--conds", "v_blind,v_1",
              "--engine", "scripted"]
    rules = write_rules(tmp_path / "rules.json", [{"match": "", "reply": "The answer is A."}])
    run = [*common, "--rules", str(rules), "--decode-workers", "0", "--no-progress"]
    first = sweep_cli("run", *run)
    assert first.returncode == 0 and "Traceback" not in first.stderr, first.stdout + first.stderr
    assert "2 of 6 cells failed; most often no video (2 cells" in first.stdout.splitlines()[-1]

    errors = [r for r in _csv(res) if r["status"] == "error"]
    assert [(r["item_id"], r["condition"]) for r in errors] == [("Own_1", "v_1"), ("Own_2", "v_1")]
    meta = {r["item_id"]: json.loads(r["meta"]) for r in errors}
    assert meta["Own_1"]["error_kind"] == "no video" and "clipLate" in meta["Own_1"]["error"]
    assert meta["Own_2"]["error"] == "no normalized video (video_id None)"
    assert all(m["retry_free"] for m in meta.values())  # never gives the item up
    assert [(r.item_id, r.retry_free) for r in _errors(res, "v_1")] == [("Own_1", True), ("Own_2", True)]

    want = {"v_blind": (3, 0), "v_1": (1, 2)}
    got = every_readers_counts(res, common, "first")
    assert {c: (v["todo"], v["done"]) for c, v in got["dry"].items()} == {"v_blind": (0, 3), "v_1": (0, 1)}
    for reader in ("analyze", "pack", "page"):
        assert {c: (v["n"], v["errors"]) for c, v in got[reader].items()} == want, reader

    # Reruns plan both cells again: no second row, typed or in the CSV, while they fail the same way.
    before = (res / "conditions_results.csv").read_bytes()
    for _ in range(3):
        again = sweep_cli("run", *run)
        assert again.returncode == 0, again.stdout + again.stderr
    assert (res / "conditions_results.csv").read_bytes() == before
    assert len(_errors(res, "v_1")) == 2

    # The video stored: the rerun answers the cell (three runs did not give it up) after its error row.
    stored_video(store, "clipLate", 40, 320, 180)
    dry = every_readers_counts(res, common, "stored")["dry"]
    assert dry["v_1"] == {"todo": 1, "done": 1}
    late = sweep_cli("run", *run)
    assert late.returncode == 0, late.stdout + late.stderr
    after = (res / "conditions_results.csv").read_bytes()
    assert after.startswith(before)
    assert after[len(before):].decode().startswith("Own,Own_1,v_1,ok,A,A,1,")
    got = every_readers_counts(res, common, "answered")
    for reader in ("analyze", "pack", "page"):
        assert {c: (v["n"], v["errors"]) for c, v in got[reader].items()} == {"v_blind": (3, 0), "v_1": (2, 1)}, reader


def test_a_kill_between_the_typed_error_row_and_its_csv_row_is_caught_up(tmp_path: Path) -> None:
    store = tmp_path / "store"
    stored_video(store, "clipA", 40, 320, 180)
    items = write_items(tmp_path / "items", [item("Own", 0, "clipA"), item("Own", 1, None)])
    res = tmp_path / "res"
    rules = write_rules(tmp_path / "rules.json", [{"match": "", "reply": "The answer is A."}])
    run = ["--items", str(items[0]), "--store", str(store), "--results", str(res), "--conds", "v_1",
           "--engine", "scripted", "--rules", str(rules), "--decode-workers", "0", "--no-progress"]
    assert sweep_cli("run", *run).returncode == 0
    whole = (res / "conditions_results.csv").read_text()
    lines = whole.splitlines(keepends=True)
    (res / "conditions_results.csv").write_text("".join(x for x in lines if ",error," not in x))
    caught = sweep_cli("run", *run)
    assert caught.returncode == 0, caught.stdout + caught.stderr
    assert "csv: 1 rows caught up" in (res / "logs" / "runner.log").read_text()
    assert sorted((res / "conditions_results.csv").read_text().splitlines()) == sorted(whole.splitlines())
    assert len(_errors(res, "v_1")) == 1


def test_two_runs_planned_together_write_each_error_row_once(tmp_path: Path) -> None:
    store = tmp_path / "store"
    stored_video(store, "clipA", 40, 320, 180)
    paths = write_items(tmp_path / "items", [item("Own", 0, "clipA"), item("Own", 1, "gone"), item("Own", 2, None)])
    rules = write_rules(tmp_path / "rules.json", [{"match": "", "reply": "The answer is A."}])
    a = SweepArgs(load_items(paths).items, str(store), SweepPaths.under(tmp_path / "res"), "v_blind,v_1",
                  engine=SweepEngine("scripted", rules=str(rules)), progress=False, decode_workers=0)
    echo = lambda s: None  # noqa: E731
    first, second = planned(a, echo), planned(a, echo)
    assert first is not None and second is not None
    run_local(a, *first, echo)
    run_local(a, *second, echo)
    assert sorted(r.item_id for r in _errors(a.paths.results, "v_1")) == ["Own_1", "Own_2"]
    keys = Counter((r["item_id"], r["condition"], r["status"]) for r in read_csv_all(a.paths.csv))
    assert keys[("Own_1", "v_1", "error")] == 1 and keys[("Own_2", "v_1", "error")] == 1
    assert max(keys.values()) == 1


def test_a_tiny_model_run_writes_the_error_row_of_a_cell_without_its_video(tmp_path: Path, tiny_model: Path) -> None:
    store = tmp_path / "store"
    stored_video(store, "clipA", 40, 320, 180)
    items = write_items(tmp_path / "items", [item("Own", 0, "clipA"), item("Own", 1, "gone")])
    res = tmp_path / "res"
    run = ["--items", str(items[0]), "--store", str(store), "--results", str(res), "--conds", "v_1",
           "--engine", "hf", "--model", str(tiny_model), "--device", "cpu", "--decode-workers", "0", "--no-progress"]
    first = sweep_cli("run", *run)
    assert first.returncode == 0 and "Traceback" not in first.stderr, first.stdout + first.stderr
    rows = {r["item_id"]: r for r in _csv(res)}
    assert rows["Own_0"]["status"] in ("ok", "unparsed")  # the tiny model answered its clip
    assert rows["Own_1"]["status"] == "error" and json.loads(rows["Own_1"]["meta"])["error_kind"] == "no video"
    assert len(_csv(res)) == 2
