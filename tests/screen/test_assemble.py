"""`assemble` on a scripted run whose outcomes are known by construction: every number it writes.

Three benchmarks, no videos, chain 1,2,4. Each item's kind is in its question and gold option:
- ``easy``: the model picks the gold option wherever it is shown -> removed at step 1;
- ``optonly``: picked only when the question is hidden (step 4) -> kept at 1, removed at 4;
- ``hard``: a flat letter prior, margin below log 2 -> kept everywhere;
- ``broken``: step 1 answers HTTP 500 -> 3 error rows, permanently failed.
Step 2 is visual and the items have no video: not screened. Step 4 runs only on Alpha and Beta,
so Gamma stays pending there.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest
from screen_helpers import cli, popen

from benchcheck.store import read_rows

KINDS = {"Alpha": [*["easy"] * 20, *["optonly"] * 8, *["hard"] * 10, *["broken"] * 2],
         "Beta": ["hard"] * 25, "Gamma": ["hard"] * 5}
OTHER = {L: -5.0 for L in "ABCD"}


def rules() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"match": "Question: broken", "error": {"status": 500, "message": "boom"}}]
    for L in "ABCD":
        out.append({"match": rf"\n{L}\. gold-easy", "letters": {**OTHER, L: -0.05}})
        out.append({"match": rf"\A(?![\s\S]*Question:)[\s\S]*\n{L}\. gold-optonly", "letters": {**OTHER, L: -0.05}})
    out.append({"match": "", "letters": {"A": -1.2, "B": -1.4, "C": -1.5, "D": -1.6}})
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    tmp = tmp_path_factory.mktemp("assemble")
    items = tmp / "items"
    items.mkdir()
    for bench, kinds in KINDS.items():
        with (items / f"{bench}.jsonl").open("w") as f:
            for i, k in enumerate(kinds):
                f.write(json.dumps({"item_id": f"{bench}_{i}", "question": f"{k} question {i}?",
                                    "options": [f"gold-{k}", "red", "blue", "green"], "answer": 0}) + "\n")
    (tmp / "rules.json").write_text(json.dumps(rules()))
    res = tmp / "res"
    common = ["--items", str(items), "--results", str(res), "--chain", "1,2,4", "--engine", "scripted",
              "--rules", str(tmp / "rules.json"), "--no-progress"]
    for step, extra in (("1", []), ("2", []), ("4", ["--bench", "Alpha,Beta"])):
        r = cli("screen", "--step", step, *common, *extra)
        assert r.returncode == 0, r.stderr
    a = cli("assemble", "--items", str(items), "--results", str(res), "--chain", "1,2,4")
    assert a.returncode == 0, a.stderr
    return items, res, a.stdout


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_pool_summary_numbers(run: tuple[Path, Path, str]) -> None:
    _, res, _ = run
    got = {(r["bench"], r["step"]): {k: r[k] for k in ("done", "removed", "error_rows", "failed", "removal_rate",
                                                       "pending", "not_screened", "forwards")}
           for r in _csv(res / "pool_summary.csv")}

    def row(done: int, removed: int, errors: int, failed: int, pending: int, not_screened: int,
            forwards: int) -> dict[str, str]:
        rate = "" if not done else str(round(removed / done, 4))
        return {"done": str(done), "removed": str(removed), "error_rows": str(errors), "failed": str(failed),
                "removal_rate": rate, "pending": str(pending), "not_screened": str(not_screened),
                "forwards": str(forwards)}

    assert got == {
        # 38 answered x 4 permutations + 3 error rows for each of the 2 broken items
        ("Alpha", "1"): row(38, 20, 6, 2, 0, 0, 38 * 4 + 6),
        ("Alpha", "2"): row(0, 0, 0, 0, 0, 18, 0),
        ("Alpha", "4"): row(18, 8, 0, 0, 0, 0, 18),
        ("Beta", "1"): row(25, 0, 0, 0, 0, 0, 100),
        ("Beta", "2"): row(0, 0, 0, 0, 0, 25, 0),
        ("Beta", "4"): row(25, 0, 0, 0, 0, 0, 25),
        ("Gamma", "1"): row(5, 0, 0, 0, 0, 0, 20),
        ("Gamma", "2"): row(0, 0, 0, 0, 0, 5, 0),
        ("Gamma", "4"): row(0, 0, 0, 0, 5, 0, 0),
    }
    md = (res / "pool_summary.md").read_text()
    assert ("Items: 70; failed: 2, kept: 35, pending: 5, removed: 28 "
            "(35 of the kept skipped a visual step: no frames)") in md
    assert "| Alpha | 1 | 38 | 20 | 52.6% | 6 | 2 | 0 | 0 |" in md
    assert "| Alpha | 4 | 18 | 8 | 44.4% | 0 | 0 | 0 | 0 |" in md
    assert "| Gamma | 4 | 0 | 0 |  | 0 | 0 | 5 | 0 |" in md


def test_flags(run: tuple[Path, Path, str]) -> None:
    _, res, out = run
    flags = sorted(x[len("FLAG: "):] for x in out.splitlines() if x.startswith("FLAG: "))
    # Beta: 0 % removal of >= 20 items at steps 1 and 4; Alpha: 2 permanent errors in 158 forwards > 1e-3.
    # Gamma (5 items) is too small for a removal flag.
    assert flags == ["Alpha step 1: 2 permanent errors in 158 forwards", "Beta step 1: removal 0% of 25 items",
                     "Beta step 4: removal 0% of 25 items"]
    md = (res / "pool_summary.md").read_text()
    assert all(f"- {f}" in md for f in flags)


def test_run_accounting(run: tuple[Path, Path, str]) -> None:
    _, res, _ = run
    acc = {r["step"]: r for r in _csv(res / "run_accounting.csv")}
    assert sorted(acc) == ["1", "2", "4"]
    assert [(acc[s]["runs"], acc[s]["items_ok"], acc[s]["error_rows"]) for s in ("1", "2", "4")] == [
        ("1", "68", "6"), ("1", "0", "0"), ("1", "43", "0")]
    log = {r["step"]: r for r in read_rows(res / "run_log.jsonl")}  # one run per step here
    for s in ("1", "4"):
        run_row, ok = log[int(s)], int(acc[s]["items_ok"])
        span = run_row["ended"] - run_row["started"]
        assert float(acc[s]["wall_s"]) == round(span, 2) and float(acc[s]["busy_s"]) == round(run_row["wall_s"], 2)
        assert float(acc[s]["items_per_s"]) == round(ok / span, 3)
        assert float(acc[s]["items_per_s_per_gpu"]) == round(ok / run_row["wall_s"], 3)


def test_pool_items_carry_the_item_text_and_source(run: tuple[Path, Path, str]) -> None:
    items, res, _ = run
    rows = {r["item_id"]: r for r in pq.read_table(res / "pool_items.parquet").to_pylist()}
    assert len(rows) == 70
    a0 = rows["Alpha_0"]
    assert a0["question"] == "easy question 0?" and a0["options"] == ["gold-easy", "red", "blue", "green"]
    assert (a0["answer"], a0["answer_letter"], a0["answer_text"]) == (0, "A", "gold-easy")
    assert a0["item_file"] == str(items / "Alpha.jsonl") and a0["item_line"] == "1"
    assert (a0["final"], a0["removed_at"], a0["s1_fate"], a0["s2_fate"]) == ("removed", 1, "removed", "not_reached")
    assert rows["Alpha_25"]["s4_fate"] == "removed" and rows["Alpha_25"]["s2_fate"] == "not_screened"
    assert rows["Alpha_39"]["final"] == "failed" and rows["Alpha_39"]["item_line"] == "40"
    con = duckdb.connect(str(res / "pool.duckdb"), read_only=True)
    try:
        got = con.execute("SELECT i.question, i.answer_text, i.item_file, i.item_line, s.removed, s.margin "
                          "FROM items i JOIN step4 s USING (item_id) WHERE item_id = 'Alpha_20'").fetchall()
    finally:
        con.close()
    [(question, gold, file, line, removed, margin)] = got
    assert (question, gold, file, line, removed) == ("optonly question 20?", "gold-optonly",
                                                    str(items / "Alpha.jsonl"), "21", True)
    assert margin > 0.69


def _tables(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        names = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
        return {n: sorted(map(repr, con.execute(f"SELECT * FROM {n}").fetchall())) for n in names}
    finally:
        con.close()


def test_two_assembles_at_once_both_finish_with_the_same_database(run: tuple[Path, Path, str],
                                                                  tmp_path: Path) -> None:
    """Two ``assemble`` processes on one results folder (a second launch by mistake): both exit 0,
    ``pool.duckdb`` opens with the tables of a run alone, and no temporary file is left. With one
    fixed temporary name, one process deleted the other's file while it was written and then
    stopped on a FileNotFoundError."""
    items, res, _ = run
    reference = _tables(res / "pool.duckdb")
    for attempt in range(3):  # the race needs both in the write at once: a few tries
        folder = tmp_path / f"res{attempt}"
        shutil.copytree(res, folder)
        args = ("assemble", "--items", str(items), "--results", str(folder), "--chain", "1,2,4")
        procs = [popen(*args), popen(*args)]
        for p in procs:
            _, err = p.communicate(timeout=300)
            assert p.returncode == 0, err
        assert _tables(folder / "pool.duckdb") == reference
        assert not [p.name for p in folder.iterdir() if p.name.endswith((".tmp", ".wal"))]
