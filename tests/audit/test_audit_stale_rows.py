"""The audit reads only the rows of the step's current spec (its run_spec.json's config_hash).

Step 1 screened whole with one engine, then again with another for part of the items: the first
engine's rows are stale. The audit counted them as the run's removals (``removed 2/10`` of a rule
program that no longer stood for the step), where the planner and ``assemble`` count them pending.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "benchcheck", *args], capture_output=True, text=True, timeout=300)


def test_audit_leaves_rows_of_a_replaced_spec_out(tmp_path: Path) -> None:
    items, res = tmp_path / "items", tmp_path / "results"
    items.mkdir()
    with (items / "mine.jsonl").open("w") as f:
        for i in range(8):
            f.write(json.dumps({"item_id": f"q{i}", "question": f"What is {i}?", "options": ["a", "b", "c"],
                                "answer": i % 3}) + "\n")
    r = _cli("screen", "--step", "1", "--items", str(items), "--results", str(res), "--engine", "reference",
             "--no-progress")
    assert r.returncode == 0, r.stderr
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"match": "", "letters": {"A": -1.1, "B": -1.2, "C": -1.0}}]))
    r = _cli("screen", "--step", "1", "--items", str(items), "--results", str(res), "--engine", "scripted",
             "--rules", str(rules), "--limit", "3", "--no-progress")
    assert r.returncode == 0, r.stderr

    r = _cli("audit", "--results", str(res), "--items", str(items), "--out", str(tmp_path / "audit"))
    assert r.returncode == 0, r.stderr
    with (tmp_path / "audit" / "audit_items.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert sorted(row["item_id"] for row in rows) == ["q0", "q1", "q2"]
    assert {row["model"] for row in rows} == {"scripted"}
    assert "removed 0/3" in r.stdout
