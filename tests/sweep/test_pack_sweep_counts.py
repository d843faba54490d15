"""``pack``'s sweep counts are the sweep's own: its report read ``conditions_results.csv`` with a loop
of its own that took each key's last row whatever its spec and whether it was whole, so a cell with
rows of an earlier spec only (stale: the dry run redoes it, the analysis leaves it out) and the torn
last line of a killed writer counted as done, and the returns report disagreed with ``sweep`` itself."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sweep_helpers import dry_rows, item, stored_video, sweep_cli, write_items

from benchcheck.sweep.results import read_csv


def test_pack_counts_what_the_sweep_counts_not_stale_rows_or_a_torn_line(tmp_path: Path) -> None:
    store = tmp_path / "store"
    stored_video(store, "clipA", 40, 320, 180)
    stored_video(store, "clipB", 36, 240, 180)
    items = write_items(tmp_path / "items", [item("Own", k, "clipA" if k % 2 else "clipB") for k in range(4)])
    res = tmp_path / "res"
    common = ["--items", str(items[0]), "--store", str(store), "--results", str(res)]
    # v_blind: four answers of one engine, then one of another (a new spec): three cells stale.
    for engine, conds, extra in (("reference", "v_blind", []), ("reference-prior", "v_blind,v_1", ["--limit", "1"])):
        run = sweep_cli("run", *common, "--conds", conds, *extra, "--engine", engine, "--decode-workers", "0",
                        "--no-progress")
        assert run.returncode == 0, run.stderr
    # v_1: a writer killed in the middle of its next row (a current-spec row of another item).
    csv_path = res / "conditions_results.csv"
    last = csv_path.read_text().splitlines()[-1]
    assert ",Own_0,v_1," in last
    with csv_path.open("a") as f:
        f.write(last.replace("Own_0", "Own_2")[:-8])

    dry = dry_rows([*common, "--conds", "v_blind,v_1", "--engine", "reference-prior"])
    sweep_done = {cond: int(dry[("Own", cond)][6]) for cond in ("v_blind", "v_1")}
    assert sweep_done == {"v_blind": 1, "v_1": 1}
    assert sorted((r["condition"], r["item_id"]) for r in read_csv(csv_path)) == [("v_1", "Own_0"),
                                                                                   ("v_blind", "Own_0")]

    r = subprocess.run([sys.executable, "-m", "benchcheck", "pack", "--results", "res", "--out", "out/r.tar.gz"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rep = json.loads((tmp_path / "out" / "r.report.json").read_text())
    pack_done = {s["name"]: s["items_done"] for s in rep["stages"] if s["name"] != "all conditions"}
    assert pack_done == sweep_done
    note = ("3 cells have rows of an earlier spec only and are not counted (first: Own Own_1 v_blind); "
            "`sweep dry-run` lists them as stale, `sweep run` redoes them")
    assert f"note: {note}" in r.stderr.splitlines() and note in rep["notes"]


def test_a_csv_the_sweep_cannot_read_is_a_note_and_the_pack_goes_on(tmp_path: Path) -> None:
    (tmp_path / "res").mkdir()
    (tmp_path / "res" / "conditions_results.csv").write_text("condition,item_id,status\nv_1,Own_0,ok\n")
    r = subprocess.run([sys.executable, "-m", "benchcheck", "pack", "--results", "res", "--out", "out/r.tar.gz"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "note: res/conditions_results.csv: header lacks bench: its rows are not counted" in r.stderr.splitlines()
    assert (tmp_path / "out" / "r.tar.gz").is_file()
