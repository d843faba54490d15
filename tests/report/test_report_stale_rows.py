"""Rows under another config_hash are stale for the report and the export, as for assemble.

Step 1 screened whole with one engine, then again with another (a new config_hash) for part of
the items only: the first engine's rows are stale. The report and the export read them as done
(the report's funnel showed every item screened and the export wrote items as kept that the
current spec never asked), while ``assemble`` counted them pending.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from scripted_pool import cli, rescreened_in_part


def test_report_and_export_leave_stale_rows_out_as_assemble_does(tmp_path: Path) -> None:
    items, res = rescreened_in_part(tmp_path)
    r = cli("assemble", "--items", str(items), "--results", str(res), "--chain", "1")
    assert r.returncode == 0, r.stderr
    with (res / "pool_summary.csv").open() as f:
        summary = next(csv.DictReader(f))
    assert (summary["done"], summary["pending"]) == ("3", "5")

    r = cli("export", "--results", str(res), "--items", str(items), "--chain", "1", "--format", "lmms-eval",
            "--out", str(tmp_path / "export"))
    assert r.returncode == 0, r.stderr
    lines = (tmp_path / "export" / "mine_kept.jsonl").read_text().splitlines()
    exported = {json.loads(line)["item_id"] for line in lines}
    assert exported == {"q0", "q1", "q2"}  # the three the current spec asked (none removed)
    assert "5 pending" in r.stderr

    r = cli("report", "--results", str(res), "--items", str(items), "--chain", "1", "--out", str(tmp_path / "report"))
    assert r.returncode == 0, r.stderr
    index = (tmp_path / "report" / "data" / "mine" / "l0.js").read_text()
    rows = json.loads(index[index.index(",") + 1: index.rindex(")")])
    finals = {row[0]: row[2] for row in rows}
    assert finals == {**dict.fromkeys(["q0", "q1", "q2"], "k"), **dict.fromkeys(["q3", "q4", "q5", "q6", "q7"], "p")}
    # the reference engine's rows are no longer current: the page does not call the run its work
    assert "reference engine" not in (tmp_path / "report" / "index.html").read_text()
