"""Gold conflicts among near duplicates: the golds compare by option text, not by letter (a near
duplicate may reorder its options), through the real command on real item files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from benchcheck.cli import main

MAN = ["a cup", "a phone", "a book", "a pen"]
DOOR = ["she sits down", "she leaves", "she waves", "she laughs"]
CAR = ["red", "blue", "green", "black"]
COUNT = ["1", "2", "3", "4"]
ANIMAL = ["a dog", "a cat", "a horse", "a cow"]

ALPHA: list[dict[str, Any]] = [
    {"item_id": "alpha_1", "question": "What is the man holding in his hand?", "options": MAN, "answer": 0,
     "video_id": "v1"},
    {"item_id": "alpha_2", "question": "What does the woman do after opening the door?", "options": DOOR,
     "answer": 1, "video_id": "v2"},
    {"item_id": "alpha_3", "question": "What color is the car that passes by?", "options": CAR, "answer": 0},
    # reworded, options as they were, another gold: a conflict within the benchmark
    {"item_id": "alpha_4", "question": "What is the color of the car passing by?", "options": CAR, "answer": 2},
    {"item_id": "alpha_5", "question": "How many people appear in the video?", "options": COUNT, "answer": 1,
     "video_id": "v3"},
    # reworded, options reordered, the same gold text ("2") at another letter: a plain near duplicate
    {"item_id": "alpha_6", "question": "How many people are shown in the video?", "options": ["4", "3", "2", "1"],
     "answer": 2, "video_id": "v3"},
    {"item_id": "alpha_7", "question": "Which animal crosses the road?", "options": ANIMAL, "answer": 0,
     "video_id": "v5"},
]
BETA: list[dict[str, Any]] = [
    # reworded, options reordered, gold B names alpha_1's gold A text: no conflict
    {"item_id": "beta_1", "question": "What does the man hold in his hand?",
     "options": ["a phone", "a cup", "a pen", "a book"], "answer": 1, "video_id": "v1"},
    # the same question, options reordered, the same letter B naming another option: a conflict
    {"item_id": "beta_2", "question": "What does the woman do after opening the door?",
     "options": ["she waves", "she laughs", "she leaves", "she sits down"], "answer": 1, "video_id": "v2"},
    {"item_id": "beta_3", "question": "What is the man holding?", "options": MAN, "answer": None, "video_id": "v4"},
    {"item_id": "beta_4", "question": "What is the man holding?", "options": MAN, "answer": 9, "video_id": "v4"},
    # the gold text in another case ("A Dog" for "a dog"), options reordered: no conflict
    {"item_id": "beta_6", "question": "Which animal crosses the road?",
     "options": ["A Cat", "A Dog", "A Horse", "A Cow"], "answer": 1, "video_id": "v5"},
]


def write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("benches", [2, 1])
def test_near_duplicate_golds_compare_by_text(tmp_path: Path, benches: int) -> None:
    if benches == 2:
        files = [write(tmp_path / "alpha.jsonl", ALPHA), write(tmp_path / "beta.jsonl", BETA)]
    else:  # one benchmark: every pair is within it (the copies' ids still rank after the originals')
        files = [write(tmp_path / "alpha.jsonl", ALPHA + BETA)]
    out = tmp_path / "step0"
    res = CliRunner().invoke(main, ["dedup", *(a for f in files for a in ("--items", str(f))), "--out", str(out),
                                    "--model", "minilm"])
    assert res.exit_code == 0, res.output
    cross = 3 if benches == 2 else 0
    assert res.stdout.splitlines()[0] == (
        f"ITEMS=10 KEPT=5 EXACT=0 NEAR=3 CROSS={cross} INVALID_ITEMS=2 GOLD_CONFLICTS=2")
    # an item without a gold, or with one out of range, is refused by the loader, one line each
    bad = [x for x in res.stderr.splitlines() if x.startswith("bad item:")]
    assert len(bad) == 2 and "beta_3: no gold answer" in bad[0] and "beta_4: gold index 9 out of range" in bad[1]
    warning = [x for x in res.stderr.splitlines() if x.startswith("warning: 2 gold conflicts")]
    assert warning == [
        "warning: 2 gold conflicts (same question and video, another gold; 2 of them near duplicates whose gold "
        'options differ in text), first: alpha_4 (alpha) gold C "green" against alpha_3 (alpha) gold A "red"; '
        "both golds are in step0_removed.jsonl"]

    rows = {r["item_id"]: r for r in pq.read_table(out / "step0_kept.parquet").to_pylist()}
    verdict = {k: (r["verdict"], r["duplicate_of"]) for k, r in rows.items()}
    assert verdict == {
        "alpha_1": ("kept", None), "alpha_2": ("kept", None), "alpha_3": ("kept", None), "alpha_5": ("kept", None),
        "alpha_7": ("kept", None),
        "alpha_4": ("gold_conflict", "alpha_3"), "beta_2": ("gold_conflict", "alpha_2"),
        "alpha_6": ("near", "alpha_5"), "beta_1": ("near", "alpha_1"), "beta_6": ("near", "alpha_7"),
    }
    assert rows["beta_2"]["kind"] == ("cross" if benches == 2 else "within")

    removed = {r["item_id"]: r for r in map(json.loads, (out / "step0_removed.jsonl").read_text().splitlines())}
    b2 = removed["beta_2"]
    assert (b2["gold"], b2["duplicate_gold"]) == (1, 1)  # one letter, two answers
    assert (b2["gold_text"], b2["duplicate_gold_text"], b2["match"]) == ("she laughs", "she leaves", "near")
    assert 0.95 <= b2["similarity"] <= 1.0 and b2["text"] != b2["duplicate_text"]
    a4 = removed["alpha_4"]
    assert (a4["gold_text"], a4["duplicate_gold_text"], a4["match"], a4["kind"]) == ("green", "red", "near", "within")
    assert all("gold" not in removed[k] for k in ("alpha_6", "beta_1", "beta_6"))

    counts = (out / "screen_counts_full.csv").read_text().splitlines()
    assert counts[0] == "bench,items,exact,near,cross_bench,kept,gold_conflict"
    assert counts[1:] == (["alpha,7,0,1,0,5,1", "beta,3,0,2,3,0,1"] if benches == 2 else ["alpha,10,0,3,0,5,2"])
    summary = (out / "step0_summary.md").read_text()
    assert '- `beta_2` (' + ("beta" if benches == 2 else "alpha") + ', gold B "she laughs") is a near duplicate of ' \
           '`alpha_2` (alpha, gold B "she leaves"), similarity' in summary
    assert "2 gold conflicts (below)" in summary


def test_exact_conflict_still_compares_by_index_in_the_same_run(tmp_path: Path) -> None:
    """An exact copy's gold is its index (the same options in the same order): with a near conflict
    beside it, the exact one is named as before, and the warning counts both."""
    alpha = write(tmp_path / "alpha.jsonl", ALPHA[:2])
    beta = write(tmp_path / "beta.jsonl", [{**ALPHA[0], "item_id": "beta_0", "answer": 2}, BETA[1]])
    out = tmp_path / "step0"
    res = CliRunner().invoke(main, ["dedup", "--items", str(alpha), "--items", str(beta), "--out", str(out),
                                    "--model", "minilm", "--quiet"])
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines()[0] == "ITEMS=4 KEPT=2 EXACT=0 NEAR=0 CROSS=2 INVALID_ITEMS=0 GOLD_CONFLICTS=2"
    assert res.stderr.splitlines() == [
        "warning: 2 gold conflicts (same question and video, another gold; 1 of them near duplicates whose gold "
        "options differ in text), first: beta_0 (beta) gold C against alpha_1 (alpha) gold A; both golds are in "
        "step0_removed.jsonl"]
    removed = {r["item_id"]: r for r in map(json.loads, (out / "step0_removed.jsonl").read_text().splitlines())}
    assert (removed["beta_0"]["match"], removed["beta_0"]["similarity"]) == ("exact", 1.0)
    assert (removed["beta_0"]["gold_text"], removed["beta_0"]["duplicate_gold_text"]) == ("a book", "a cup")
    summary = (out / "step0_summary.md").read_text()
    assert "`beta_0` (beta, gold C) has the text of `alpha_1` (alpha, gold A)" in summary
