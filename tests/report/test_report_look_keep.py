"""Step 0 told the same way by `assemble` however it is called, and by the report: items left out of
the kept list never enter the chain, so `assemble` (the CLI, and the demo, which calls
``screen.assemble.assemble`` with the kept list in its context) counts none of them pending, and the
report built with that list as ``--step0`` screens at step 1 exactly the items pool_summary counts.
Before, the demo's pool_summary.md said "pending: 4" for its 4 duplicates while its report said
they were removed at step 0."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from report_helpers import RULES, cli

from benchcheck.items import load_items
from benchcheck.screen.assemble import assemble
from benchcheck.screen.context import make_context


def summary(res: Path) -> tuple[str, list[dict[str, str]]]:
    md = (res / "pool_summary.md").read_text()
    with (res / "pool_summary.csv").open(newline="") as f:
        return md, list(csv.DictReader(f))


def test_left_out_items_are_not_pending_in_assemble_or_the_report(tmp_path: Path) -> None:
    items, res = tmp_path / "items", tmp_path / "results"
    assert cli("demo", "items", "--out", str(items)).returncode == 0
    pool = load_items([items]).items
    dropped = {it.item_id for it in pool[:3]}
    keep = tmp_path / "kept.txt"
    keep.write_text("".join(f"{it.item_id}\n" for it in pool if it.item_id not in dropped))
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps(RULES))
    r = cli("screen", "--items", str(items), "--step", "1", "--results", str(res), "--engine", "scripted",
            "--rules", str(rules), "--keep", str(keep), "--no-progress")
    assert r.returncode == 0, r.stderr

    assemble(make_context(pool, res, (1,), None, keep))  # as the demo calls it
    md_fn, rows_fn = summary(res)
    r = cli("assemble", "--items", str(items), "--results", str(res), "--chain", "1", "--keep", str(keep))
    assert r.returncode == 0, r.stderr
    md_cli, rows_cli = summary(res)
    assert md_fn == md_cli
    assert rows_fn == rows_cli
    assert f"Items: {len(pool) - len(dropped)};" in md_cli
    assert all(row["pending"] == "0" for row in rows_cli), rows_cli
    done = sum(int(row["done"]) for row in rows_cli)

    out = tmp_path / "report"
    r = cli("report", "--results", str(res), "--items", str(items), "--out", str(out), "--chain", "1",
            "--step0", str(keep), "--no-progress", "--no-plots")
    assert r.returncode == 0, r.stderr
    html = (out / "index.html").read_text()
    step0 = f"<tr><td>0 duplicates</td><td>{len(pool)}</td><td>{len(dropped)}</td><td>{len(pool) - len(dropped)}</td>"
    step1 = f"<tr><td>1 blind</td><td>{done}</td>"
    assert step0 in html and step1 in html, html[html.index('id="funnel"'):][:800]
