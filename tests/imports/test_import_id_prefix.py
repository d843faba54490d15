"""Two benchmarks that number their items alike (both ``q0``..``q5``): loaded together, the second's
items are duplicates, and the one line that says so names the way through, ``items import
--id-prefix bench`` (ids written once as ``BENCH/ID``); taken, every item of both loads and screens."""

from __future__ import annotations

import json
from pathlib import Path

from benchcheck.items import load_items
from scripted_pool import cli

FLAT = [{"match": "", "letters": {"A": -1.2, "B": -1.5, "C": -1.4, "D": -1.3}}]
FIX = ("two benchmarks number their items alike; write each benchmark's ids as BENCH/ID with benchcheck items "
       "import FILE --from hf-folder --id-prefix bench --out DIR for each item file (docs/items.md, \"Ids\")")


def _bench(path: Path, bench: str, with_column: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"item_id": f"q{i}", **({"bench": bench} if with_column else {}), "question": f"{bench}: which colour "
             f"is object {i}?", "options": ["red", "blue", "green", "white"], "answer": i % 4} for i in range(6)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _plan(items: Path, root: Path) -> str:
    rules = root / "rules.json"
    rules.write_text(json.dumps(FLAT))
    r = cli("screen", "--items", str(items), "--step", "1", "--results", str(root / "results"), "--engine",
            "scripted", "--rules", str(rules), "--plan-only", "--no-progress")
    assert r.returncode == 0, r.stderr
    return r.stdout + r.stderr


def test_overlapping_ids_are_refused_with_the_fix_and_screen_whole_through_it(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    _bench(raw / "A.jsonl", "A", True)
    _bench(raw / "B.jsonl", "B", False)  # the benchmark from the file name, as an item file may leave it
    out = _plan(raw, tmp_path)
    assert "REMAINING_TOTAL=6" in out.splitlines() and "INVALID_ITEMS=6" in out.splitlines(), out
    line = next(x for x in out.splitlines() if x.startswith(f"bad item: {raw / 'B.jsonl'}:1: q0: "))
    assert line.endswith(f"duplicate item_id (first in {raw / 'A.jsonl'}:1, benchmark A): {FIX}"), line

    items = tmp_path / "items"
    for f in ("A.jsonl", "B.jsonl"):
        r = cli("items", "import", str(raw / f), "--from", "hf-folder", "--id-prefix", "bench", "--out", str(items))
        assert r.returncode == 0, r.stderr
        assert "6 items of 1 benchmark imported, 0 refused" in r.stderr, r.stderr
    loaded = load_items([items])
    assert not loaded.problems
    assert {(it.bench, it.item_id) for it in loaded.items} == {(b, f"{b}/q{i}") for b in "AB" for i in range(6)}
    out = _plan(items, tmp_path)
    assert "REMAINING_TOTAL=12" in out.splitlines() and "INVALID_ITEMS=0" in out.splitlines(), out
    assert "duplicate" not in out

    # imported again (an export read back, or a second import): the prefix is not doubled
    again = tmp_path / "again"
    r = cli("items", "import", str(items / "A.jsonl"), "--from", "hf-folder", "--id-prefix", "bench", "--out",
            str(again))
    assert r.returncode == 0, r.stderr
    assert [it.item_id for it in load_items([again]).items] == [f"A/q{i}" for i in range(6)]


def test_a_duplicate_within_one_benchmark_names_no_prefix(tmp_path: Path) -> None:
    """The same id twice in one benchmark is a duplicate a prefix would not part: no fix named."""
    _bench(tmp_path / "A.jsonl", "A", True)
    (tmp_path / "A.jsonl").write_text((tmp_path / "A.jsonl").read_text() * 2)
    loaded = load_items([tmp_path / "A.jsonl"])
    assert [p.message for p in loaded.errors] == [f"duplicate item_id (first in {tmp_path / 'A.jsonl'}:{n})"
                                                  for n in range(1, 7)]


def test_the_quiet_summary_of_a_file_of_duplicates_names_the_fix(tmp_path: Path) -> None:
    """--quiet leaves out the per-item lines, not the file's summary: B, whose every id A took,
    would vanish without a word; the summary groups by kind (the first file is no part of it) but
    shows one message whole, so the fix the duplicate-id line names is there."""
    from benchcheck.items.report import bad_share_lines

    raw = tmp_path / "raw"
    _bench(raw / "A.jsonl", "A", True)
    _bench(raw / "B.jsonl", "B", True)
    [line] = bad_share_lines(load_items([raw]))
    assert line.startswith(f"B: 6 of 6 records are bad (100.0%) in {raw / 'B.jsonl'}; most often: duplicate item_id "
                           f"(6), e.g. duplicate item_id (first in {raw / 'A.jsonl'}:1, benchmark A): {FIX}"), line
    r = cli("probe", "--items", str(raw), "--out", str(tmp_path / "probe"), "--model", "none", "--permutations", "0",
            "--no-ibp", "--min-items", "4", "--quiet")
    assert "Traceback" not in r.stderr, r.stderr
    assert f"warning: {line}" in r.stderr.splitlines(), r.stderr
    assert "bad item:" not in r.stderr  # still no per-item line
