"""The row adapter: a malformed row is skipped, never a crash; the last ok row of an item wins."""

from __future__ import annotations

from pathlib import Path

from benchcheck.stats.source import forwards_of, read_forwards
from benchcheck.store import append_rows

GOOD = {"item_id": "a", "bench": "B", "step": 4, "model": "m", "answer": 1, "perm": [0, 1, 2],
        "lp": [-1.0, -0.5, -3.0], "removed": False, "status": "ok"}


def test_malformed_rows_are_skipped() -> None:
    assert forwards_of(GOOD) is not None
    bad = [
        {**GOOD, "lp": "x"}, {**GOOD, "lp": [-1.0, -2.0]}, {**GOOD, "perm": [0, 0, 2]}, {**GOOD, "answer": 3},
        {**GOOD, "answer": None}, {k: v for k, v in GOOD.items() if k != "bench"},
        {**GOOD, "perms": [[0, 1, 2]], "lp": [[-1.0, -2.0, -3.0], [-1.0, -2.0, -3.0]]},
        {**GOOD, "extra_perms": [[0, 1, 2]], "extra_lp": []},
    ]
    assert all(forwards_of(r) is None for r in bad)
    f = forwards_of({**GOOD, "lp_exact": [-1.0, -2.0]})  # a wrong-length lp_exact is dropped alone
    assert f is not None and f.lps_exact is None


def test_read_forwards_last_ok_row_wins(tmp_path: Path) -> None:
    rows = [GOOD, {**GOOD, "removed": True, "lp": [-3.0, -0.1, -3.0]}, {**GOOD, "status": "error"},
            {**GOOD, "item_id": "b", "lp": "broken"}]
    append_rows(tmp_path / "step4" / "B.jsonl", rows)
    (f,) = read_forwards(tmp_path)[4]
    assert f.item_id == "a" and f.removed and f.lps == ((-3.0, -0.1, -3.0),)
    assert read_forwards(tmp_path, item_ids=["zzz"]) == {}
