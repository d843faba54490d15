"""An item edited after the sweep answered it (its gold fixed) is answered again: its rows, typed
and in the CSV, carry the item's fingerprint, so they are stale under the edited item; the CSV
gets the new answer, and its readers take it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from sweep_helpers import RULES, mixed_items, write_rules

from benchcheck.items import load_items
from benchcheck.report.sweep import read_sweep
from benchcheck.sweep.cli_run import SweepArgs, plan, run
from benchcheck.sweep.engine import SweepEngine
from benchcheck.sweep.plan import EDITED
from benchcheck.sweep.results import SweepPaths, read_csv, read_csv_all

CONDS = "v_blind,v_1"


def _args(tmp: Path, store: Path, gold_of_beta0: int | None = None, edit_all: bool = False) -> SweepArgs:
    r = write_rules(tmp / "rules.json", RULES)
    items = load_items(mixed_items(tmp)).items
    if gold_of_beta0 is not None:
        items = [replace(i, answer=gold_of_beta0) if i.item_id == "Beta_0" else i for i in items]
    if edit_all:
        items = [replace(i, question=i.question + " (reworded)") for i in items]
    return SweepArgs(items, str(store), SweepPaths.under(tmp / "fp" / "results"), CONDS,
                     engine=SweepEngine("scripted", rules=str(r)), progress=False, decode_workers=0)


def _quiet(_: str) -> None:
    pass


def _beta0(csv: Path) -> dict[str, str]:
    return {r["condition"]: r["correct"] for r in read_csv(csv) if r["item_id"] == "Beta_0"}


def test_an_item_edited_after_its_answer_is_answered_again(tmp_path: Path, store: Path) -> None:
    first = _args(tmp_path, store)
    run(first, _quiet)
    assert _beta0(first.paths.csv) == {"v_blind": "0", "v_1": "0"}  # the engine says A; the gold is B
    n_rows = len(read_csv_all(first.paths.csv))

    fixed = _args(tmp_path, store, gold_of_beta0=0)  # the gold fixed to A
    cells, _, _ = plan(fixed)
    redo = [c for c in cells if c.kind != "done" and c.kind != "failure" and c.kind != "na"]
    assert sorted((c.item.item_id, c.condition) for c in redo) == [("Beta_0", "v_1"), ("Beta_0", "v_blind")]
    assert all(c.stale == EDITED for c in redo)

    run(fixed, _quiet)
    assert _beta0(fixed.paths.csv) == {"v_blind": "1", "v_1": "1"}  # the CSV's readers take the new answer
    assert len(read_csv_all(fixed.paths.csv)) == n_rows + 2  # the old rows stay, nothing else is added
    before = fixed.paths.csv.read_bytes()
    cells, _, _ = plan(fixed)
    assert not [c for c in cells if c.stale]
    run(fixed, _quiet)
    assert fixed.paths.csv.read_bytes() == before  # nothing left to answer


def test_the_dry_run_says_an_item_answered_under_an_earlier_spec_too_was_edited(tmp_path: Path, store: Path) -> None:
    # Answered by one model, then by another (the first model's rows are stale), then edited: it is
    # redone because of the edit, not because of the model the current spec already answered with.
    first = _args(tmp_path, store)
    run(replace(first, engine=replace(first.engine, model="m1")), _quiet)
    run(replace(first, engine=replace(first.engine, model="m2")), _quiet)
    fixed = _args(tmp_path, store, gold_of_beta0=0)
    cells, _, _ = plan(replace(fixed, engine=replace(fixed.engine, model="m2")))
    redo = sorted((c.item.item_id, c.condition, c.stale) for c in cells if c.stale)
    assert redo == [("Beta_0", "v_1", EDITED), ("Beta_0", "v_blind", EDITED)]


def test_an_edit_undone_puts_the_answer_to_the_item_as_it_is_last_in_the_csv(tmp_path: Path, store: Path) -> None:
    # A gold fixed, answered again, then the fix undone: the planner's answer is the first one
    # again (its row is of the item as it is), and the CSV's readers must take that one too, not
    # the answer to the edit that no longer exists.
    first = _args(tmp_path, store)
    run(first, _quiet)
    run(_args(tmp_path, store, gold_of_beta0=0), _quiet)
    assert _beta0(first.paths.csv) == {"v_blind": "1", "v_1": "1"}
    n_rows = len(read_csv_all(first.paths.csv))

    undone = _args(tmp_path, store)
    cells, _, _ = plan(undone)
    assert not [c for c in cells if c.stale]  # its first answers stand
    run(undone, _quiet)
    assert _beta0(undone.paths.csv) == {"v_blind": "0", "v_1": "0"}  # the gold is B again: "A" is wrong
    assert len(read_csv_all(undone.paths.csv)) == n_rows + 2
    before = undone.paths.csv.read_bytes()
    run(undone, _quiet)
    assert undone.paths.csv.read_bytes() == before


def test_the_reports_sweep_page_shows_and_counts_each_edited_item_once(tmp_path: Path, store: Path) -> None:
    # Every item reworded and answered again: its first answers (an unreadable reply, an NA, a
    # wrong letter) are of another question; the page counts and shows the answers that count.
    first = _args(tmp_path, store)
    run(first, _quiet)
    before = read_sweep(first.paths.results)
    edited = _args(tmp_path, store, gold_of_beta0=0, edit_all=True)
    run(edited, _quiet)
    after = read_sweep(edited.paths.results)
    assert after.rows > before.rows  # the file's rows, old ones included
    assert after.unparsed == before.unparsed and after.unparsed  # Alpha_3's reply, once per condition
    assert after.na == before.na
    beta0 = after.answers["Beta"]["Beta_0"]
    assert sorted((a.condition, a.correct) for a in beta0) == [("v_1", True), ("v_blind", True)]
    assert {b: {i: len(a) for i, a in its.items()} for b, its in after.answers.items()} == \
        {b: {i: len(a) for i, a in its.items()} for b, its in before.answers.items()}
