"""The report's sweep page read a row's status by a rule of its own: it scored any status outside its
list of failures (another tool's ``timeout``), dropped an answer it could not score by its letters
(an ``unparsed`` one without ``correct``), and analyzed every row of a file without ``correct`` and
``video_id`` columns, a key's earlier rows too; ``sweep analyze`` on the same folder counted other
numbers. The page now asks the sweep's rules (``sweep.results.row_status``, ``row_correct``, the rows
``read_csv`` counts), so its numbers are those of ``sweep analyze``, ``pack`` and the dry run."""

from __future__ import annotations

import csv
from pathlib import Path

from sweep_helpers import every_readers_counts, item, stored_video, sweep_cli, write_items, write_rules

# Another tool's export of the sweep: no video, meta or provenance columns.
EXPORT = ("bench", "item_id", "condition", "status", "pred", "gold", "correct", "parse")


def test_the_sweep_page_counts_what_sweep_analyze_counts(tmp_path: Path) -> None:
    store = tmp_path / "store"
    stored_video(store, "clipA", 40, 320, 180)
    rows = [item("Own", k, "clipA", question="unsure about this one" if k == 1 else "What happens?",
                 answer=1 if k == 2 else 0) for k in range(4)]
    items = write_items(tmp_path / "items", rows)
    res = tmp_path / "res"
    common = ["--items", str(items[0]), "--store", str(store), "--results", str(res), "--conds", "v_blind,v_1",
              "--engine", "scripted"]
    rules = write_rules(tmp_path / "rules.json", [{"match": "unsure", "reply": "I cannot tell from these frames."},
                                                  {"match": "", "reply": "The answer is A."}])
    assert sweep_cli("run", *common, "--rules", str(rules), "--decode-workers", "0", "--no-progress").returncode == 0

    # The folder as another tool left it: its rows in its own export only, Own_3 under v_1 a timeout
    # (its letters still there), Own_0 under v_blind a lower-case na, Own_2 under v_1 answered twice
    # (first A, then B: the last row of a key counts).
    path = res / "conditions_results.csv"
    written = list(csv.DictReader(path.open(newline="")))
    for r in written:
        if (r["condition"], r["item_id"]) == ("v_1", "Own_3"):
            r["status"] = "timeout"
        if (r["condition"], r["item_id"]) == ("v_blind", "Own_0"):
            r.update(status="na", pred="", correct="")
    again = next(r for r in written if (r["condition"], r["item_id"]) == ("v_1", "Own_2"))
    written.append({**again, "pred": "B", "correct": "1"})
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=EXPORT, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        w.writerows(written)
    for cond in ("v_blind", "v_1"):
        (res / "sweep_rows" / cond / "Own.jsonl").unlink()

    got = every_readers_counts(res, common, "export")
    assert got["dry"] == {"v_blind": {"todo": 0, "done": 4}, "v_1": {"todo": 1, "done": 3}}
    expect = {"v_blind": {"n": 3, "unparsed": 1, "na": 1}, "v_1": {"n": 3, "unparsed": 1, "na": 0}}
    for reader in ("analyze", "pack", "page"):
        assert {c: {k: v[k] for k in ("n", "unparsed", "na")} for c, v in got[reader].items()} == expect, reader
    for reader in ("analyze", "pack", "page"):  # Own_3's timeout under v_1: no answer, counted as an error row
        assert {c: v["errors"] for c, v in got[reader].items()} == {"v_blind": 0, "v_1": 1}, reader
    acc = {c: v["acc"] for c, v in got["analyze"].items()}
    assert acc == {"v_blind": 0.333, "v_1": 0.667}
    assert {c: v["acc"] for c, v in got["page"].items()} == acc
