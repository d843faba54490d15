"""Stale rows are never answers: after a run under a new spec that covers only some items
(``--limit``, ``--bench``), the analysis (and the report's sweep page, the same reader) counted the
other items' rows of the old spec in the condition's accuracy, mixing two models' answers in one
number while the dry run called those rows stale, to redo."""

from __future__ import annotations

import csv
from pathlib import Path

from sweep_helpers import dry_rows, item, stored_video, sweep_cli, write_items

from benchcheck.sweep.results import read_csv


def test_a_partial_rerun_under_a_new_spec_leaves_the_old_rows_out_of_the_accuracy(tmp_path: Path) -> None:
    store = tmp_path / "store"
    stored_video(store, "clipA", 40, 320, 180)
    stored_video(store, "clipB", 36, 240, 180)
    items = write_items(tmp_path / "items", [item("Own", k, "clipA" if k % 2 else "clipB") for k in range(4)])
    res = tmp_path / "res"
    common = ["--items", str(items[0]), "--store", str(store), "--results", str(res), "--conds", "v_blind"]
    for engine, extra in (("reference", []), ("reference-prior", ["--limit", "1"])):
        run = sweep_cli("run", *common, *extra, "--engine", engine, "--decode-workers", "0", "--no-progress")
        assert run.returncode == 0, run.stderr
    # the planner: 1 done under the current spec, 3 stale to redo
    counts = dry_rows([*common, "--engine", "reference-prior"])[("Own", "v_blind")]
    assert (counts[5], counts[6]) == ("3", "1")
    assert len(read_csv(res / "conditions_results.csv")) == 1
    out = tmp_path / "analysis"
    ana = sweep_cli("analyze", "--results", str(res), "--out", str(out), "--n-perm", "50")
    assert ana.returncode == 0, ana.stderr
    assert "warning: 3 cells have rows of an earlier spec only and are left out of the analysis" in ana.stderr
    with (out / "sweep_summary.csv").open() as f:
        acc = [r for r in csv.DictReader(f) if r["kind"] == "accuracy" and r["condition"] == "v_blind"]
    assert [r["n_items"] for r in acc] == ["1"]


def test_conditions_answered_by_different_models_are_named_in_a_warning(tmp_path: Path) -> None:
    store = tmp_path / "store"
    stored_video(store, "clipA", 40, 320, 180)
    items = write_items(tmp_path / "items", [item("Own", k, "clipA") for k in range(2)])
    res = tmp_path / "res"
    common = ["--items", str(items[0]), "--store", str(store), "--results", str(res)]
    for engine, cond in (("reference", "v_blind"), ("reference-prior", "v_1")):
        run = sweep_cli("run", *common, "--conds", cond, "--engine", engine, "--decode-workers", "0", "--no-progress")
        assert run.returncode == 0, run.stderr
    ana = sweep_cli("analyze", "--results", str(res), "--out", str(tmp_path / "analysis"), "--n-perm", "50")
    assert ana.returncode == 0, ana.stderr
    line = next(ln for ln in ana.stderr.splitlines() if "different models" in ln)
    assert "v_1: reference:planted-prior-v1" in line and "v_blind: reference:deterministic-rules-v1" in line, line
    # One engine for every condition: no such warning.
    one = sweep_cli("run", *common, "--conds", "v_blind", "--engine", "reference-prior", "--decode-workers", "0",
                    "--no-progress")
    assert one.returncode == 0, one.stderr
    ana = sweep_cli("analyze", "--results", str(res), "--out", str(tmp_path / "analysis"), "--n-perm", "50")
    assert "different models" not in ana.stderr, ana.stderr
