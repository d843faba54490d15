"""audit.md on a pool at the edges: a benchmark of one item (one video) has a profile value but no
interval, and rows without ``lp_exact`` have no floor shift. audit.md printed ``+0.792 [, ]`` and
``| ,  |`` there, empty brackets that read as a broken table; it now says why no interval is given.
A benchmark of the items given whose every row is an error was in no table and named nowhere."""

from __future__ import annotations

from pathlib import Path

from scripted_pool import RULES, cli, screened


def test_a_one_item_benchmark_says_it_has_no_interval(tmp_path: Path) -> None:
    one = [{"item_id": "One_0", "question": "Which is right?", "options": ["RIGHT", "w1", "w2", "w3"], "answer": 0}]
    many = [{"item_id": f"Many_{i}", "question": f"Plain {i}?", "options": ["a", "b", "c", "d"], "answer": i % 4}
            for i in range(8)]
    items, res, _ = screened(tmp_path, {"One": one, "Many": many})
    r = cli("audit", "--results", str(res), "--items", str(items), "--out", str(tmp_path / "audit"),
            "--rounds", "50", "--chain", "1")
    assert r.returncode == 0, r.stderr
    md = (tmp_path / "audit" / "audit.md").read_text()
    assert "[, ]" not in md and "| ,  |" not in md
    profile = md[md.index("## Shortcut profile"):]
    one = next(line for line in profile.splitlines() if line.startswith("| One | blind_gap |"))
    assert one.endswith("(no interval: 1 video, too few) |"), one
    assert one.split("|")[-2].strip().startswith("+")  # the value itself is still shown
    many = next(line for line in profile.splitlines() if line.startswith("| Many | blind_gap |"))
    assert "[" in many and "no interval" not in many  # 8 videos: an interval
    floor = md[md.index("## Exact letter scores"):md.index("## Shortcut profile")]
    assert all(line.endswith("| n/a |") for line in floor.splitlines() if line.startswith("| One |"))


def test_a_benchmark_with_only_error_rows_is_named_as_not_audited(tmp_path: Path) -> None:
    errs = [{"item_id": f"Errs_{i}", "question": f"ERRORME {i}?", "options": ["a", "b", "c", "d"], "answer": 0}
            for i in range(3)]
    fine = [{"item_id": f"Fine_{i}", "question": f"Plain {i}?", "options": ["a", "b", "c", "d"], "answer": i % 4}
            for i in range(4)]
    rules = [{"match": "ERRORME", "error": {"status": 500, "message": "boom"}}, *RULES]
    items, res, r = screened(tmp_path, {"Errs": errs, "Fine": fine}, rules)
    assert "Errs: done=0" in r.stdout, r.stdout
    r = cli("audit", "--results", str(res), "--items", str(items), "--out", str(tmp_path / "audit"),
            "--rounds", "50", "--chain", "1")
    assert r.returncode == 0, r.stderr
    assert "note: not audited: 1 benchmark of the items given has no ok row" in r.stderr and "Errs" in r.stderr
    md = (tmp_path / "audit" / "audit.md").read_text()
    said = next(line for line in md.splitlines() if line.startswith("Not audited:"))
    assert said.endswith(": Errs.")
    assert "Fine" not in said and "| Fine | 1 blind |" in md
