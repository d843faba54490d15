"""A CSV without ``status`` and ``correct`` columns (another tool's file: letters only) reads every row as
``ok`` for the whole analysis, yet ``sweep analyze`` scored each of them wrong, a right answer too
(its scorer asked the raw ``status`` cell for ``ok``), while the report's sweep page scored the same rows
by their letters. Scoring is one rule (``sweep.results.row_correct``), under ``row_status``: such a
row is ``ok`` and scored by its letters."""

from __future__ import annotations

import csv
from pathlib import Path

from sweep_helpers import every_readers_counts, item, stored_video, sweep_cli, write_items, write_rules

LETTERS_ONLY = ("bench", "item_id", "condition", "pred", "gold", "video_id")


def test_a_row_without_status_or_correct_is_scored_by_its_letters_everywhere(tmp_path: Path) -> None:
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
    # Own_0 and Own_3 right, Own_1 unparsed (wrong), Own_2 answered A where the gold is B.
    ours = every_readers_counts(res, common, "ours")
    assert {c: v["acc"] for c, v in ours["analyze"].items()} == {"v_blind": 0.5, "v_1": 0.5}

    path = res / "conditions_results.csv"
    written = list(csv.DictReader(path.open(newline="")))
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=LETTERS_ONLY, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        w.writerows(written)
    got = every_readers_counts(res, common, "letters")
    assert {c: v["done"] for c, v in got["dry"].items()} == {"v_blind": 4, "v_1": 4}
    for reader in ("analyze", "pack", "page"):
        assert {c: v["n"] for c, v in got[reader].items()} == {"v_blind": 4, "v_1": 4}, reader
    for reader in ("analyze", "page"):
        assert {c: v["acc"] for c, v in got[reader].items()} == {"v_blind": 0.5, "v_1": 0.5}, reader
