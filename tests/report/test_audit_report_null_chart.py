"""The audit page's null chart draws the conditioned null, the one the headline states and the
calls use. It drew the permutation null as "the null": at a step run on an earlier step's
survivors that null expects the lucky guesses the earlier step removed, so the bar stood well
above the headline's number. A table written before the conditioned null existed is drawn with
its permutation null, named as such."""

from __future__ import annotations

import csv
import re
from pathlib import Path

from benchcheck.report.audit import read_audit

HEADER = ["bench", "step", "items", "removed", "observed_rate", "null_rate", "null_lo", "null_hi",
          "cond_null_rate", "cond_null_lo", "cond_null_hi"]
# step 4 screens step 1's survivors: the permutation null overstates chance there
ROWS = [["B", 1, 100, 20, 0.2, 0.21, 0.13, 0.29, 0.2, 0.13, 0.28],
        ["B", 4, 80, 8, 0.1, 0.3, 0.2, 0.4, 0.11, 0.05, 0.18]]


def _write(folder: Path, header: list[str], rows: list[list[object]]) -> None:
    folder.mkdir(parents=True)
    with (folder / "audit_null.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def _tips(chart: str) -> dict[str, float]:
    return {m[1]: float(m[2]) for m in re.finditer(r"<title>([^<:]+): ([-\d.e]+)</title>", chart)}


def test_the_null_chart_draws_the_conditioned_null(tmp_path: Path) -> None:
    _write(tmp_path / "audit", HEADER, ROWS)
    data = read_audit(tmp_path / "audit")
    step4 = next(c for c in data.charts if "Step 4: observed vs the null (95 %)" in c)
    tips = _tips(step4)
    assert tips["null B"] == 0.11 and tips["observed B"] == 0.1, tips
    assert "permutation" not in step4
    assert data.tables[0].title.startswith("Removal rule against the null (conditioned")


def test_a_table_without_the_conditioned_null_names_its_permutation_null(tmp_path: Path) -> None:
    old = HEADER[:8]
    _write(tmp_path / "audit", old, [r[:8] for r in ROWS])
    data = read_audit(tmp_path / "audit")
    step4 = next(c for c in data.charts if "Step 4: observed vs the permutation null (95 %)" in c)
    assert _tips(step4)["permutation null B"] == 0.3
