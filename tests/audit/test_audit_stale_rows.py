"""The audit reads only the rows of the step's current spec (its run_spec.json's config_hash).

Step 1 screened whole with one engine, then again with another for part of the items: the first
engine's rows are stale. The audit counted them as the run's removals (``removed 2/10`` of a rule
program that no longer stood for the step), where the planner and ``assemble`` count them pending.
"""

from __future__ import annotations

import csv
from pathlib import Path

from scripted_pool import cli, rescreened_in_part


def test_audit_leaves_rows_of_a_replaced_spec_out(tmp_path: Path) -> None:
    items, res = rescreened_in_part(tmp_path)
    r = cli("audit", "--results", str(res), "--items", str(items), "--out", str(tmp_path / "audit"))
    assert r.returncode == 0, r.stderr
    with (tmp_path / "audit" / "audit_items.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert sorted(row["item_id"] for row in rows) == ["q0", "q1", "q2"]
    assert {row["model"] for row in rows} == {"scripted"}
    assert "removed 0/3" in r.stdout
