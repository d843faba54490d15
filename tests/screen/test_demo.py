"""The README's first command end to end: `benchcheck demo run`, then again (it resumes)."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
from screen_helpers import cli, ok_rows

from benchcheck.demo.kinds import expected_verdicts


def test_demo_runs_every_step_matches_the_construction_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    first = cli("demo", "run", "--out", str(out), timeout=900)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "funnel matches the construction" in first.stdout
    funnel = json.loads((out / "funnel.json").read_text())
    assert funnel["match"] and funnel["observed"] == funnel["predicted"]
    assert funnel["engine"].startswith("reference:")
    assert funnel["observed"]["duplicate"] == {"0": 4}  # step 0 ran
    # The probe sees what the chain saw: step 0's duplicates are counted apart, not probed.
    probed = (out / "results" / "probe" / "probe_benchmarks.csv").read_text()
    assert "4 removed at step 0 left out" in first.stdout and probed.count(",4,") + probed.count(",4\n") >= 1
    truth = [json.loads(line) for line in (out / "truth" / "ground_truth.jsonl").read_text().splitlines()]
    assert {t["kind"] for t in truth} >= {"text_leak", "options_only", "static", "ordered", "brief", "high_res"}
    res = out / "results"
    for step in range(1, 7):
        rows = ok_rows(res / f"step{step}")
        assert rows, f"step {step} wrote no rows"
        assert {r["model"] for r in rows.values()} == {funnel["engine"]}
        assert {r["engine"] for r in rows.values()} == {"reference"}
    for step in (1, 4):
        tiny = ok_rows(out / "results_tiny_random" / f"step{step}")
        assert len(tiny) >= 90 and all("random-weights" in r["model"] for r in tiny.values())
    for name in ("pool_items.parquet", "pool.duckdb", "pool_summary.md", "pool_summary.csv", "run_accounting.csv"):
        assert (res / name).is_file(), name
    assert "reference / reference:" in (res / "pool_summary.md").read_text()
    qa = json.loads((out / "qa" / "run" / "summary.json").read_text())
    assert qa["accuracy"] == 1.0 and qa["counts"]["errors"] == 0 and qa["model_served"].startswith("reference:")
    # Each constructed benchmark's sweep verdict (the real sweep, reference engine) is the expected one.
    assert "sweep verdict per benchmark" in first.stdout and "DIFFERS" not in first.stdout
    verdicts = json.loads((out / "sweep_verdicts.json").read_text())
    assert {b: v["observed"] for b, v in verdicts.items()} == expected_verdicts()
    assert set(expected_verdicts().values()) == {"pixels", "frames", "both", "neither"}
    # The HTML report: the sweep section with the same verdicts, loud labels for what is not a model.
    report = out / "results" / "report"
    assert f"report (open in a browser): {report / 'index.html'}" in first.stdout
    index = (report / "index.html").read_text()
    assert "rule-based reference engine" in index and "RANDOM-WEIGHT" in index
    sweep_html = (report / "sweep.html").read_text()
    for bench, verdict in expected_verdicts().items():
        assert bench in sweep_html and f'class="v-{verdict}">{verdict}' in sweep_html
    audit_html = (report / "audit.html").read_text()  # the audit's null and threshold tables
    assert 'id="audit_null"' in audit_html and 'id="audit_thresholds"' in audit_html
    assert (out / "audit" / "audit_null.csv").is_file()
    # The audits checked against the ground truth: every check holds for the reference engine and
    # for the planted-prior engine, and the tiny random model's removals are nearly all chance.
    assert "DOES NOT BRACKET" not in first.stdout and "CHECK FAILS" not in first.stdout
    for folder in ("audit", "audit_prior"):
        assert "**Result: every check holds.**" in (out / folder / "audit_truth.md").read_text()
    prior_truth = (out / "audit_prior" / "audit_truth.md").read_text()
    assert "the sets are equal" in prior_truth and "flagged by the audit: 0" not in prior_truth
    assert "explain nearly all of them" in (out / "audit_tiny" / "audit.md").read_text()
    assert 'id="audit_truth"' in audit_html and 'id="audit_prior-audit_truth"' in audit_html
    assert "explain nearly all of them" in audit_html  # the tiny run's reading, on the report's audit page
    prior_rows = ok_rows(out / "results_prior" / "step1")
    assert {r["model"] for r in prior_rows.values()} == {"reference:planted-prior-v1"}
    con = duckdb.connect(str(res / "pool.duckdb"), read_only=True)
    finals = dict(con.execute("SELECT final, count(*) FROM items GROUP BY final").fetchall())
    assert finals.get("removed", 0) > 0 and finals.get("kept", 0) > 0
    con.close()
    rows_before = {s: len(ok_rows(res / f"step{s}")) for s in range(1, 7)}
    again = cli("demo", "run", "--out", str(out), timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "REMAINING_TOTAL=0" in again.stdout and " 0 screened now" in again.stdout
    assert "funnel matches the construction" in again.stdout
    assert {s: len(ok_rows(res / f"step{s}")) for s in range(1, 7)} == rows_before
