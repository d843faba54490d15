"""An item edited after the sweep answered it (its question changed) whose cell then failed (the
engine refused the new question; its video was gone) still counted its old answer: the CSV's
readers kept an answer over any later error row of its spec, so ``sweep analyze``, ``pack`` and the
report's sweep page scored the answer to a question no longer asked while the dry run called it
stale. An error row of the item as it is now replaces the answer to the item as it was; the edit
undone makes the first answer count again (its row appended once more), and an edit made again
brings its error row back. Real mp4 files, the CLI, the scripted engine."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

from sweep_helpers import every_readers_counts, item, stored_video, sweep_cli, write_items, write_rules

from benchcheck.sweep.results import read_csv
from benchcheck.video.meta import video_dir

RULES = [{"match": "reworded", "error": {"status": 500, "message": "model crashed"}},
         {"match": "", "reply": "The answer is A."}]


def _rows(res: Path) -> list[tuple[str, str, str]]:
    return [(r["item_id"], r["condition"], r["status"])
            for r in csv.DictReader((res / "conditions_results.csv").open(newline=""))]


def _counts(res: Path, common: list[str], tag: str) -> dict[str, dict[str, tuple[int, int]]]:
    got = every_readers_counts(res, common, tag)
    return {reader: {c: (v["n"], v["errors"]) for c, v in got[reader].items()} for reader in ("analyze", "pack",
                                                                                               "page")}


def test_an_edited_item_whose_cell_then_fails_counts_as_an_error_not_its_old_answer(tmp_path: Path) -> None:
    store = tmp_path / "store"
    stored_video(store, "clipA", 40, 320, 180)
    stored_video(store, "clipB", 40, 320, 180)
    res = tmp_path / "res"
    items = tmp_path / "items"

    def pool(edited: bool) -> list[str]:
        write_items(items, [item("Own", 0, "clipA"), item("Own", 1, "clipA", question="What happens, reworded?"
                                                              if edited else "What happens?"),
                            item("Own", 2, "clipB", question="Which one, edited?" if edited else "Which one?")])
        return ["--items", str(items / "Own.jsonl"), "--store", str(store), "--results", str(res),
                "--conds", "v_blind,v_1", "--engine", "scripted"]

    rules = write_rules(tmp_path / "rules.json", RULES)
    tail = ["--rules", str(rules), "--decode-workers", "0", "--no-progress"]
    first = sweep_cli("run", *pool(edited=False), *tail)
    assert first.returncode == 0, first.stdout + first.stderr
    whole = {c: (3, 0) for c in ("v_blind", "v_1")}
    assert all(v == whole for v in _counts(res, pool(False), "first").values())

    # Own_1 reworded: the engine fails it (given up in the run); Own_2 edited and its video gone.
    common = pool(edited=True)
    shutil.move(video_dir(store, "clipB"), tmp_path / "clipB_away")
    edited = sweep_cli("run", *common, *tail)
    assert edited.returncode == 0, edited.stdout + edited.stderr
    assert sorted(_rows(res)[6:]) == [("Own_1", "v_1", "error"), ("Own_1", "v_blind", "error"),
                                      ("Own_2", "v_1", "error"), ("Own_2", "v_blind", "ok")]
    failed = {"v_blind": (2, 1), "v_1": (1, 2)}  # the old answers of Own_1 (both) and Own_2 (v_1) count nowhere
    assert _counts(res, common, "edited") == {"analyze": failed, "pack": failed, "page": failed}
    assert {(r["item_id"], r["condition"], r["status"]) for r in read_csv(res / "conditions_results.csv")} >= {
        ("Own_1", "v_blind", "error"), ("Own_1", "v_1", "error"), ("Own_2", "v_1", "error")}
    before = (res / "conditions_results.csv").read_bytes()
    assert sweep_cli("run", *common, *tail).returncode == 0  # failing the same way: nothing added
    assert (res / "conditions_results.csv").read_bytes() == before

    # The edits undone: the first answers stand again, and their rows follow the error rows.
    shutil.move(tmp_path / "clipB_away", video_dir(store, "clipB"))
    undone = sweep_cli("run", *pool(edited=False), *tail)
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert _rows(res)[10:] == [("Own_1", "v_blind", "ok"), ("Own_2", "v_blind", "ok"), ("Own_1", "v_1", "ok"),
                               ("Own_2", "v_1", "ok")]  # caught up from the typed rows, in plan order
    assert _counts(res, pool(False), "undone") == {"analyze": whole, "pack": whole, "page": whole}

    # Edited again: Own_1 was given up under its edit; its error row comes back after the answer.
    again = sweep_cli("run", *pool(edited=True), *tail)
    assert again.returncode == 0, again.stdout + again.stderr
    # caught up first (Own_2's v_1 cell has its no-video error under this edit, no answer yet), then answered
    assert _rows(res)[14:] == [("Own_1", "v_blind", "error"), ("Own_2", "v_blind", "ok"), ("Own_1", "v_1", "error"),
                               ("Own_2", "v_1", "error"), ("Own_2", "v_1", "ok")]
    both = {"v_blind": (2, 1), "v_1": (2, 1)}  # Own_2's video is back: answered again under its edit
    assert _counts(res, pool(True), "again") == {"analyze": both, "pack": both, "page": both}
