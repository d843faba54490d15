"""A benchmark whose every item was refused (two files numbering their items 1, 2: each of the
second's ids a duplicate) no longer drops out of `screen` without a word: the run goes on with the
others (exit 0, as bad items never stop a run), and its summary names the benchmark, the reason
and the fix (`items import --id-prefix bench`). The summary listed only the benchmarks it worked."""

from __future__ import annotations

import json
from pathlib import Path

from screen_helpers import cli

from benchcheck.items.load import load_items


def _items(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def _numbered(n: int = 2) -> str:
    return "".join(json.dumps({"item_id": str(i), "question": f"What falls {i}?", "options": ["a cup", "a ball"],
                               "answer": 1}) + "\n" for i in range(1, n + 1))


def test_the_summary_names_a_benchmark_whose_every_item_was_refused(tmp_path: Path) -> None:
    raw = _items(tmp_path / "raw6", {"A.jsonl": _numbered(), "B.jsonl": _numbered()})
    r = cli("screen", "--items", str(raw), "--results", str(tmp_path / "r6"), "--step", "1", "--engine", "reference",
            "--no-progress")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "A: done=2 removed=2 errors=0"
    (b,) = [line for line in lines if line.startswith("B:")]
    assert b.startswith(f"B: not screened: every one of its 2 records in {raw / 'B.jsonl'} was refused; most often: "
                        "duplicate item_id (2), e.g. duplicate item_id (first in "), b
    assert "--id-prefix bench" in b, b
    assert lines[-1].startswith("step 1 shard 0/1: 2 ok")

    plan = cli("screen", "--items", str(raw), "--results", str(tmp_path / "r6"), "--step", "1", "--engine",
               "reference", "--plan-only")
    assert plan.returncode == 0
    assert f"why: {b}" in plan.stderr.splitlines()
    assert "REMAINING_TOTAL=0" in plan.stdout.splitlines()  # the KEY=VALUE lines stay as they were

    only_a = cli("screen", "--items", str(raw), "--results", str(tmp_path / "r6a"), "--step", "1", "--engine",
                 "reference", "--no-progress", "--bench", "A")
    assert only_a.returncode == 0 and "B:" not in only_a.stdout  # not asked for: not named


def test_which_files_count_as_refused_whole(tmp_path: Path) -> None:
    from benchcheck.items.report import refused_benchmarks

    raw = _items(tmp_path / "raw", {
        "A.jsonl": _numbered(),
        "B.jsonl": _numbered(),  # every id taken by A
        "C.jsonl": "not json\n",
        "D.jsonl": "",  # the file itself refused
        "E.jsonl": _numbered(3),  # ids 1, 2 taken, 3 loads: E is screened
    })
    lines = refused_benchmarks(load_items([str(raw)]))
    assert [line.split(":", 1)[0] for line in lines] == ["B", "C", "D"]
    assert lines[1] == f"C: not screened: every one of its 1 records in {raw / 'C.jsonl'} was refused; most often: " \
                       "line is not JSON (Expecting value) (1)"
    assert lines[2] == f"D: not screened: {raw / 'D.jsonl'} was refused: empty file (0 bytes): no items"
