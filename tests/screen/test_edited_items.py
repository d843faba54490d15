"""An item edited after it was screened (its gold fixed, an option dropped, its question reworded)
is asked again: its old rows describe another question, so they are stale, never done, for the
planner, ``assemble``, the report, ``export`` and the audit alike. Rows carry the item's
fingerprint (``item_hash``); a row without one (written before rows carried it) is not judged.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from benchcheck.items import Item, fingerprints
from benchcheck.records import parse_row
from benchcheck.verdicts import StepState
from scripted_pool import cli, screened


def _items() -> list[dict[str, Any]]:
    """q0: the model's confident pick (RIGHT) is the gold, so step 1 removes it; q1-q5 are kept."""
    rows = [{"item_id": "q0", "question": "Which one?", "options": ["RIGHT", "no", "maybe"], "answer": 0}]
    rows += [{"item_id": f"q{i}", "question": f"What is {i}?", "options": ["a", "b", "c", "d"], "answer": i % 4}
             for i in range(1, 6)]
    return rows


def _rows(res: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (res / "step1" / "mine.jsonl").read_text().splitlines()]


def _edit(items: Path) -> None:
    """q0's gold fixed (RIGHT is no longer the answer), q1 loses an option, q2 is reworded."""
    rows = _items()
    rows[0]["answer"] = 1
    rows[1]["options"] = ["a", "b", "c"]
    rows[1]["answer"] = 1
    rows[2]["question"] = "What is two, really?"
    (items / "mine.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _summary(res: Path) -> dict[str, str]:
    with (res / "pool_summary.csv").open() as f:
        return next(csv.DictReader(f))


def test_an_edited_item_is_pending_everywhere_until_asked_again(tmp_path: Path) -> None:
    items, res, _ = screened(tmp_path, {"mine": _items()})
    first = _rows(res)
    assert len(first) == 6 and all(r["item_hash"] for r in first)
    assert [r["item_id"] for r in first if r["removed"]] == ["q0"]

    _edit(items)
    r = cli("assemble", "--items", str(items), "--results", str(res), "--chain", "1")
    assert r.returncode == 0, r.stderr
    s = _summary(res)
    assert (s["done"], s["removed"], s["pending"]) == ("3", "0", "3")  # q0's removal no longer stands

    out = tmp_path / "export"
    r = cli("export", "--results", str(res), "--items", str(items), "--chain", "1", "--format", "lmms-eval",
            "--out", str(out))
    assert r.returncode == 0, r.stderr
    kept = {json.loads(line)["item_id"] for line in (out / "mine_kept.jsonl").read_text().splitlines()}
    assert kept == {"q3", "q4", "q5"}  # the edited three were never asked as they are now
    assert "3 pending" in r.stderr

    r = cli("report", "--results", str(res), "--items", str(items), "--chain", "1", "--out", str(tmp_path / "rep"))
    assert r.returncode == 0, r.stderr
    index = (tmp_path / "rep" / "data" / "mine" / "l0.js").read_text()
    finals = {row[0]: row[2] for row in json.loads(index[index.index(",") + 1: index.rindex(")")])}
    assert finals == {"q0": "p", "q1": "p", "q2": "p", "q3": "k", "q4": "k", "q5": "k"}

    # The rerun asks the three edited items again, and only them.
    r = cli("screen", "--items", str(items), "--step", "1", "--results", str(res), "--engine", "scripted",
            "--rules", str(tmp_path / "rules.json"), "--no-progress")
    assert r.returncode == 0, r.stderr
    assert "3 asked again (stale rows)" in r.stdout + r.stderr
    rows = _rows(res)
    assert rows[:6] == first  # nothing written is lost or rewritten
    assert sorted(x["item_id"] for x in rows[6:]) == ["q0", "q1", "q2"]
    again = {x["item_id"]: x for x in rows[6:]}
    assert again["q0"]["removed"] is False and again["q1"]["n_options"] == 3
    r = cli("assemble", "--items", str(items), "--results", str(res), "--chain", "1")
    assert r.returncode == 0, r.stderr
    s = _summary(res)
    assert (s["done"], s["removed"], s["pending"]) == ("6", "0", "0")

    # A second rerun has nothing left to ask.
    r = cli("screen", "--items", str(items), "--step", "1", "--results", str(res), "--engine", "scripted",
            "--rules", str(tmp_path / "rules.json"), "--no-progress")
    assert r.returncode == 0, r.stderr
    assert len(_rows(res)) == 9


def test_the_audit_reads_no_row_of_an_edited_item(tmp_path: Path) -> None:
    items, res, _ = screened(tmp_path, {"mine": _items()})
    _edit(items)
    r = cli("audit", "--results", str(res), "--items", str(items), "--chain", "1", "--rounds", "50",
            "--out", str(tmp_path / "audit"))
    assert r.returncode == 0, r.stderr
    assert "mine step 1: removed 0/3" in r.stdout  # q0's removal was of the question as it was


def _row(item: Item, chash: str = "h", removed: bool = False, with_hash: bool = True) -> dict[str, Any]:
    row: dict[str, Any] = {"item_id": item.item_id, "bench": item.bench, "step": 1, "config_hash": chash,
                           "removed": removed, "margin": 1.0}
    if with_hash:
        row["item_hash"] = item.fingerprint
    return row


def test_the_reducer_judges_rows_by_the_item_they_asked() -> None:
    old = Item("a", "B", "Q?", ("x", "y"), 0, "v1")
    # What the model is not asked does not count, nor the video id: it changes from a ``k:``
    # placeholder to the content hash when the video is normalized.
    same = Item("a", "B", "Q?", ("x", "y"), 0, "k:0123456789abcdef", task="another task", duration_s=9.0)
    assert same.fingerprint == old.fingerprint
    edits = [Item("a", "B", "Q!", ("x", "y"), 0, "v1"), Item("a", "B", "Q?", ("x", "z"), 0, "v1"),
             Item("a", "B", "Q?", ("y", "x"), 0, "v1"), Item("a", "B", "Q?", ("x", "y"), 1, "v1"),
             Item("a", "B", "Q?", ("x", "y", "w"), 0, "v1")]
    assert len({e.fingerprint for e in [old, *edits]}) == len(edits) + 1

    for now in edits:
        st = StepState(expect_hash="h", expect_items=fingerprints([now])).add_all([_row(old, removed=True)])
        v = st.verdict("a")
        assert (v.status, v.stale, st.edited) == ("pending", True, {"a"})
        st.add(_row(now))  # asked again: the new row decides
        assert st.verdict("a").status == "kept"
    # A row without a fingerprint (an older benchcheck's), an item the reader does not know, and a
    # reader without items: not judged by it.
    now = fingerprints([edits[0]])
    assert StepState(expect_items=now).add_all([_row(old, with_hash=False)]).verdict("a").done
    assert StepState(expect_items=fingerprints([Item("b", "B", "", ("x", "y"), 0)])).add_all(
        [_row(old)]).verdict("a").done
    assert StepState().add_all([_row(old)]).verdict("a").done
    # Another benchmark's item of the same id is another item.
    assert StepState(expect_items={("C", "a"): "0" * 16}).add_all([_row(old)]).verdict("a").done
    # The config hash is judged first: a row of another spec is stale for that reason.
    st = StepState(expect_hash="h2", expect_items=now).add_all([_row(old)])
    assert st.verdict("a").stale and st.stale_hash == {"a": "h"} and not st.edited
    assert parse_row(_row(old)) is not None and parse_row(_row(old)).item_hash == old.fingerprint  # type: ignore[union-attr]


def test_an_item_with_a_lone_surrogate_is_screened_and_read_back(tmp_path: Path) -> None:
    # A JSON escape of half an emoji: the loader keeps it, and its fingerprint must not stop the run.
    rows = [{"item_id": "s0", "question": "Which face? \ud83d", "options": ["a", "b\udc80"], "answer": 0},
            {"item_id": "s1", "question": "Plain?", "options": ["a", "b"], "answer": 1}]
    items, res, _ = screened(tmp_path, {"mine": rows})
    assert {r["item_id"] for r in _rows(res)} == {"s0", "s1"}
    halves = [Item("s0", "mine", q, ("a", "b"), 0).fingerprint for q in ("\ud83d", "\ud83e")]
    assert halves[0] != halves[1]
    r = cli("screen", "--items", str(items), "--step", "1", "--results", str(res), "--engine", "scripted",
            "--rules", str(tmp_path / "rules.json"), "--plan-only")
    assert r.returncode == 0, r.stderr
    assert "REMAINING_TOTAL=0" in r.stdout and "STALE=0" in r.stdout
