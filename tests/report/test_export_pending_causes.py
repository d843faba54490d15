"""``export``'s note says why each pending item is pending (``screen.fates.pending_cause``): not
reached by a later step, stale after an edit, never screened by any step. The ``--keep`` hint comes
only where an item no step ever screened is pending (the only items a --keep run leaves out); a
chain re-run only in part after an edit and an added item is not blamed on --keep."""

from __future__ import annotations

import json
from pathlib import Path

from scripted_pool import cli, screened


def screen(items: Path, res: Path, step: int, root: Path) -> None:
    r = cli("screen", "--items", str(items), "--step", str(step), "--results", str(res), "--engine", "scripted",
            "--rules", str(root / "rules.json"), "--chain", "1,4", "--no-progress")
    assert r.returncode == 0, r.stderr


def export(items: Path, res: Path, out: Path) -> str:
    r = cli("export", "--results", str(res), "--items", str(items), "--chain", "1,4", "--format", "inspect",
            "--out", str(out))
    assert r.returncode == 0, r.stderr
    return r.stderr


def test_pending_note_names_each_cause_and_blames_keep_only_for_unscreened(tmp_path: Path) -> None:
    rows = [{"item_id": f"m{i}", "question": f"Plain {i}?", "options": ["a", "b", "c", "d"], "answer": i % 4}
            for i in range(5)]
    items, res, _ = screened(tmp_path, {"Mine": rows})
    screen(items, res, 4, tmp_path)
    assert "neither kept nor removed" not in export(items, res, tmp_path / "o1")
    # one gold edited, one item added, and only step 1 run again: both wait on step 4
    rows[1]["answer"] = 3
    rows.append({"item_id": "m9", "question": "Added?", "options": ["a", "b", "c", "d"], "answer": 0})
    (items / "Mine.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    screen(items, res, 1, tmp_path)
    err = export(items, res, tmp_path / "o2")
    assert ("note: 2 items are neither kept nor removed (2 pending); pending: 1 stale after an edit at step 4 "
            "(their rows there are of the item before it): m1; 1 not reached by step 4 yet: m9") in err
    assert "--keep" not in err and "--step0" not in err
    # an item no step has screened yet: it may be one screen --keep left out, so the hint comes
    rows.append({"item_id": "m10", "question": "Added late?", "options": ["a", "b", "c", "d"], "answer": 0})
    (items / "Mine.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    err = export(items, res, tmp_path / "o3")
    assert "(3 pending); pending: 1 stale after an edit at step 4" in err
    assert "1 never screened by any step (added since, or left out by screen --keep, --bench or --limit): m10" in err
    assert "an item screen --keep left out is removed at step 0 once --step0 names the step-0 outcome" in err
