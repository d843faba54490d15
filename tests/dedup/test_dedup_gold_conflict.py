"""Same question, same options, same video, different golds: a label conflict, not a duplicate."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
from click.testing import CliRunner

from benchcheck.cli import main

CUP = ["a cup", "a phone", "a book", "a pen"]
DOOR = ["she sits down", "she leaves", "she waves", "she laughs"]


def write(path: Path, rows: list[tuple[str, str, list[str], int, str | None]]) -> Path:
    path.write_text("".join(json.dumps({"item_id": i, "question": q, "options": o, "answer": a, "video_id": v}) + "\n"
                            for i, q, o, a, v in rows))
    return path


def test_same_text_other_gold_is_a_gold_conflict(tmp_path: Path) -> None:
    alpha = write(tmp_path / "alpha.jsonl", [
        ("alpha_1", "What is the man holding in his hand?", CUP, 0, "v1"),
        ("alpha_2", "What is the man holding in his hand?", CUP, 0, "v1"),  # same gold: a plain copy
        ("alpha_3", "What does the woman do after opening the door?", DOOR, 1, "v2"),
    ])
    beta = write(tmp_path / "beta.jsonl", [
        ("beta_1", "What is the man holding in his hand?", CUP, 2, "v1"),  # gold C against alpha_1's A
        ("beta_2", "What does the woman do after opening the door?", DOOR, 3, "v2"),
    ])
    out = tmp_path / "step0"
    res = CliRunner().invoke(main, ["dedup", "--items", str(alpha), "--items", str(beta), "--out", str(out),
                                    "--model", "minilm", "--quiet"])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0] == "ITEMS=5 KEPT=2 EXACT=1 NEAR=0 CROSS=2 INVALID_ITEMS=0 GOLD_CONFLICTS=2"
    assert lines[1].startswith("model=minilm ")  # the line scripts read second stays second
    # one line even with --quiet: a label conflict is not a per-item progress note
    assert res.stderr.splitlines() == [
        "warning: 2 gold conflicts (same question, options and video, another gold), first: beta_1 (beta) "
        "gold C against alpha_1 (alpha) gold A; both golds are in step0_removed.jsonl"]

    removed = {r["item_id"]: r for r in map(json.loads, (out / "step0_removed.jsonl").read_text().splitlines())}
    assert removed["alpha_2"]["verdict"] == "exact" and "gold" not in removed["alpha_2"]
    conflict = removed["beta_1"]
    assert (conflict["verdict"], conflict["kind"], conflict["duplicate_of"]) == ("gold_conflict", "cross", "alpha_1")
    assert (conflict["gold"], conflict["duplicate_gold"], conflict["similarity"]) == (2, 0, 1.0)
    assert removed["beta_2"]["verdict"] == "gold_conflict" and removed["beta_2"]["duplicate_of"] == "alpha_3"

    rows = {r["item_id"]: r for r in pq.read_table(out / "step0_kept.parquet").to_pylist()}
    assert rows["beta_1"]["kept"] is False and rows["beta_1"]["verdict"] == "gold_conflict"
    assert rows["alpha_1"]["kept"] is True
    assert (out / "screen_counts_full.csv").read_text().splitlines() == [
        "bench,items,exact,near,cross_bench,kept,gold_conflict", "alpha,3,1,0,0,2,0", "beta,2,0,0,2,0,2"]
    summary = (out / "step0_summary.md").read_text()
    assert "## Gold conflicts" in summary
    assert "`beta_1` (beta, gold C) has the text of `alpha_1` (alpha, gold A)" in summary
