"""The demo's sweep function: a few items per benchmark, then the analysis files."""

from __future__ import annotations

from pathlib import Path

from sweep_helpers import item, write_items

from benchcheck.engines.rules.scripted import ScriptedEngine
from benchcheck.sweep.demo import DEMO_CONDS, run_demo_sweep
from benchcheck.sweep.engine import SweepEngine
from benchcheck.sweep.results import read_csv


def test_demo_sweep_writes_rows_and_analysis(tmp_path: Path, store: Path) -> None:
    items = write_items(tmp_path / "items", [item("Demo", k, "mid100") for k in range(4)])
    engine = ScriptedEngine([{"match": "", "reply": "A"}])
    out = run_demo_sweep(items, store, tmp_path / "sweep", SweepEngine("scripted"), lambda s: None, limit=2,
                         instance=engine).files
    rows = read_csv(tmp_path / "sweep" / "results" / "conditions_results.csv")
    assert {r["item_id"] for r in rows} == {"Demo_0", "Demo_1"}
    assert len({r["condition"] for r in rows}) == len(DEMO_CONDS.split(","))
    md = out["markdown"].read_text()
    assert "| Demo |" in md and "Verdict rule" in md
