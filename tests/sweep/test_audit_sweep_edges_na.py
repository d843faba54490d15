"""A condition where no item applies (every row NA, e.g. v_128_s224 on short videos): its accuracy
line in sweep_summary.md says so. Before, it printed an empty accuracy and an interval of '[, ]'."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

from sweep_helpers import item, stored_video, write_items, write_rules


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "benchcheck", "sweep", *args], capture_output=True, text=True,
                          timeout=300)


def test_a_condition_without_applicable_items_reads_n_a(tmp_path: Path) -> None:
    store = tmp_path / "store"
    rows = [item("Short", n, stored_video(store, f"s{n}", 20, 320, 240)) for n in range(3)]
    items = write_items(tmp_path / "items", rows)
    res = tmp_path / "res"
    rules = write_rules(tmp_path / "rules.json", [{"match": "", "reply": "The answer is A."}])
    run = _cli("run", "--items", str(items[0]), "--store", str(store), "--results", str(res), "--conds",
               "v_8_s224,v_128_s224", "--engine", "scripted", "--rules", str(rules), "--decode-workers", "0",
               "--no-progress")
    assert run.returncode == 0, run.stderr
    an = _cli("analyze", "--results", str(res), "--out", str(tmp_path / "an"))
    assert an.returncode == 0, an.stderr
    md = (tmp_path / "an" / "sweep_summary.md").read_text()
    assert "[, ]" not in md
    line = next(x for x in md.splitlines() if x.startswith("| Short | v_128_s224 |"))
    assert line == "| Short | v_128_s224 | n/a | no item applies | 0 | 0 | 0 | 3 | 0 |", line
    assert "| Short | v_8_s224 | 1.0000 | [" in md
    summary = {r["condition"]: r for r in csv.DictReader((tmp_path / "an" / "sweep_summary.csv").open())
               if r["kind"] == "accuracy"}
    assert (summary["v_128_s224"]["estimate"], summary["v_128_s224"]["na"]) == ("", "3")
