"""A conditions CSV whose last row lost only its newline (a crash after the row's bytes): readers
count that row, so the appender must too, or the next run appends it again."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from sweep_helpers import item, sweep_cli, write_items, write_rules

from benchcheck.sweep.results import append_csv, read_csv, read_csv_all


def _row(i: int) -> dict[str, object]:
    return {"bench": "B", "item_id": f"i{i}", "condition": "v_1", "status": "ok", "meta": "{}",
            "config_hash": "h", "written_at": "2026-01-01T00:00:00Z"}


def test_a_complete_last_row_without_its_newline_is_not_appended_again(tmp_path: Path) -> None:
    p = tmp_path / "conditions_results.csv"
    append_csv(p, [_row(0), _row(1)])
    p.write_bytes(p.read_bytes()[:-1])  # the last row whole, its newline lost
    cut = p.read_bytes()
    assert sorted(r["item_id"] for r in read_csv(p)) == ["i0", "i1"]
    assert append_csv(p, [_row(1)]) == 0
    assert append_csv(p, [_row(2), _row(1)]) == 1
    assert p.read_bytes().startswith(cut)
    assert [r["item_id"] for r in read_csv_all(p)] == ["i0", "i1", "i2"]


def test_cli_rerun_after_a_lost_final_newline_adds_no_duplicate_row(tmp_path: Path, store: Path) -> None:
    items = write_items(tmp_path / "items", [item("Alpha", 1, "short20"), item("Alpha", 2, "s480")])
    rules = write_rules(tmp_path / "r.json", [{"match": "", "reply": "The answer is A."}])
    res = tmp_path / "res"
    common = ["--items", str(items[0]), "--store", str(store), "--results", str(res), "--conds", "v_blind,v_1",
              "--engine", "scripted", "--rules", str(rules), "--decode-workers", "0", "--no-progress"]
    assert sweep_cli("run", *common).returncode == 0
    csv = res / "conditions_results.csv"
    whole = csv.read_bytes()
    csv.write_bytes(whole[:-1])
    again = sweep_cli("run", *common)
    assert again.returncode == 0, again.stderr
    keys = Counter((r["item_id"], r["condition"], r["config_hash"]) for r in read_csv_all(csv))
    assert len(keys) == 4 and max(keys.values()) == 1, keys
