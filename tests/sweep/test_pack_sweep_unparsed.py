"""``pack``'s sweep report counted an ``unparsed`` answer (the model answered, no option letter could
be read) as an error row, with its item among the example error ids, while the sweep counts it as an
answer, scored wrong: done for ``sweep dry-run``, an item of its condition in ``sweep analyze``. The
report now classifies a row by the sweep's own rule (``sweep.results.row_status``) and shows the
unparsed answers apart."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

from sweep_helpers import dry_rows, item, stored_video, sweep_cli, write_items, write_rules


def test_pack_counts_unparsed_answers_as_the_sweep_does_not_as_errors(tmp_path: Path) -> None:
    store = tmp_path / "store"
    stored_video(store, "clipA", 40, 320, 180)
    rows = [item("Own", k, "clipA", question="unsure about this one" if k in (1, 3) else "What happens?")
            for k in range(4)]
    items = write_items(tmp_path / "items", rows)
    res = tmp_path / "res"
    common = ["--items", str(items[0]), "--store", str(store), "--results", str(res), "--conds", "v_blind,v_1"]
    rules = write_rules(tmp_path / "rules.json", [{"match": "unsure", "reply": "I cannot tell from these frames."},
                                                  {"match": "", "reply": "The answer is A."}])
    run = sweep_cli("run", *common, "--engine", "scripted", "--rules", str(rules), "--decode-workers", "0",
                    "--no-progress")
    assert run.returncode == 0, run.stderr
    written = list(csv.DictReader((res / "conditions_results.csv").open()))
    assert sorted((r["condition"], r["item_id"]) for r in written if r["status"] == "unparsed") == [
        ("v_1", "Own_1"), ("v_1", "Own_3"), ("v_blind", "Own_1"), ("v_blind", "Own_3")]

    # The sweep's own counts: every cell done for the dry run, four items of each condition (two
    # of them unparsed) for the analysis.
    dry = dry_rows(common)
    sweep_done = {cond: int(dry[("Own", cond)][6]) for cond in ("v_blind", "v_1")}
    assert sweep_done == {"v_blind": 4, "v_1": 4}
    an = sweep_cli("analyze", "--results", str(res), "--out", str(tmp_path / "analysis"), "--no-plots")
    assert an.returncode == 0, an.stderr
    acc = {r["condition"]: r for r in csv.DictReader((tmp_path / "analysis" / "sweep_summary.csv").open())
           if r["kind"] == "accuracy"}
    assert {c: (int(r["n_items"]), int(r["unparsed"])) for c, r in acc.items()} == {"v_blind": (4, 2), "v_1": (4, 2)}

    r = subprocess.run([sys.executable, "-m", "benchcheck", "pack", "--results", "res", "--out", "out/r.tar.gz"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rep = json.loads((tmp_path / "out" / "r.report.json").read_text())
    st = {s["name"]: s for s in rep["stages"] if s["name"] != "all conditions"}
    assert {c: s["items_done"] for c, s in st.items()} == sweep_done
    assert {c: s["unparsed_rows"] for c, s in st.items()} == {"v_blind": 2, "v_1": 2}
    assert all(s["error_rows"] == 0 and s["error_examples"] == [] for s in st.values())
    md = (tmp_path / "out" / "r.report.md").read_text()
    assert "| condition | items done | removed | unparsed | NA rows | error rows |" in md
    assert "| v_1 | 4 | - | 2 | 0 | 0 | - | - |" in md
