"""The README's first command end to end: `benchcheck demo run`, then again (it resumes)."""

from __future__ import annotations

from pathlib import Path

import duckdb
from screen_helpers import cli, ok_rows


def test_demo_runs_every_step_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    first = cli("demo", "run", "--out", str(out), timeout=900)
    assert first.returncode == 0, first.stderr[-3000:]
    res = out / "results"
    for step in range(1, 7):
        assert ok_rows(res / f"step{step}"), f"step {step} wrote no rows"
    for name in ("pool_items.parquet", "pool.duckdb", "pool_summary.md", "pool_summary.csv", "run_accounting.csv"):
        assert (res / name).is_file(), name
    con = duckdb.connect(str(res / "pool.duckdb"), read_only=True)
    finals = dict(con.execute("SELECT final, count(*) FROM items GROUP BY final").fetchall())
    assert finals.get("removed", 0) > 0 and finals.get("kept", 0) > 0
    visual = con.execute("SELECT count(*) FROM step3").fetchone()
    assert visual is not None and visual[0] > 0
    con.close()
    rows_before = {s: len(ok_rows(res / f"step{s}")) for s in range(1, 7)}
    again = cli("demo", "run", "--out", str(out), timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "REMAINING_TOTAL=0" in again.stdout and " 0 screened now" in again.stdout
    assert {s: len(ok_rows(res / f"step{s}")) for s in range(1, 7)} == rows_before
