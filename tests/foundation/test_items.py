"""Item loaders and validation on real JSONL, CSV and Parquet files."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchcheck.items import ColumnMap, key_video_id, load_items
from benchcheck.items.load import resolve_answer


def write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_jsonl_items_strip_prefixes_and_read_every_gold_encoding(tmp_path: Path) -> None:
    p = write_jsonl(tmp_path / "B.jsonl", [
        {"item_id": "b1", "question": "Q1", "options": ["A. red", "B. blue"], "answer": 1},
        {"item_id": "b2", "question": "Q2", "options": ["(A) red", "(B) blue"], "answer": "B"},
        {"item_id": "b3", "question": "Q3", "options": ["red", "blue", "green"], "answer": "green"},
        {"id": "b4", "question": "Q4", "options": ["A: 1", "B: 2", "C: 3"], "answer": "3", "video_id": "abc"},
        {"question": "Q5", "options": ["x", "y"], "answer": 0},
    ])
    r = load_items([p])
    assert not r.problems
    assert [i.item_id for i in r.items] == ["b1", "b2", "b3", "b4", "B_4"]
    assert r.items[0].options == ("red", "blue") and r.items[0].answer == 1
    assert r.items[1].answer == 1
    assert r.items[2].answer == 2
    assert r.items[3].options == ("1", "2", "3") and r.items[3].answer == 2  # numeric text gold
    assert r.items[3].video_id == "abc" and r.items[0].bench == "B"


def test_each_bad_item_gets_one_line_naming_it(tmp_path: Path) -> None:
    p = write_jsonl(tmp_path / "Bad.jsonl", [
        {"item_id": "e1", "question": " ", "options": ["x", "y"], "answer": 0},
        {"item_id": "e2", "question": "Q", "options": ["x"], "answer": 0},
        {"item_id": "e3", "question": "Q", "options": ["x", "y"], "answer": 5},
        {"item_id": "e4", "question": "Q", "options": ["x", "y"], "answer": "D"},
        {"item_id": "e5", "question": "Q", "options": ["x", "y"], "answer": "zebra"},
        {"item_id": "ok", "question": "Q", "options": ["x", "y"], "answer": 0},
        {"item_id": "ok", "question": "Q", "options": ["x", "y"], "answer": 1},
        '{"item_id": "torn", "quest',
        {"item_id": "big", "question": "Q", "options": [str(i) for i in range(30)], "answer": 4},
    ])
    r = load_items([p])
    msgs = {(e.item_id, e.message) for e in r.errors}
    assert ("e1", "empty question") in msgs
    assert ("e2", "fewer than 2 options (1)") in msgs
    assert ("e3", "gold index 5 out of range for 2 options") in msgs
    assert ("e4", "gold letter 'D' matches no option (2 options)") in msgs
    assert ("e5", "gold 'zebra' matches no option") in msgs
    assert any(e.item_id == "ok" and e.message.startswith("duplicate item_id") for e in r.errors)
    assert any(e.item_id is None and "not JSON" in e.message and e.where == "8" for e in r.errors)
    assert len(r.errors) == 7
    assert [i.item_id for i in r.items] == ["ok", "big"]
    big = r.items[1]
    assert big.format == "open"
    assert [p.severity for p in r.problems if p.item_id == "big"] == ["note"]
    assert all(str(e).startswith(str(p)) for e in r.errors)


def test_duplicate_ids_across_files(tmp_path: Path) -> None:
    a = write_jsonl(tmp_path / "A.jsonl", [{"item_id": "x", "question": "Q", "options": ["a", "b"], "answer": 0}])
    b = write_jsonl(tmp_path / "B.jsonl", [{"item_id": "x", "question": "Q", "options": ["a", "b"], "answer": 0}])
    r = load_items([a, b])
    assert len(r.items) == 1 and r.items[0].bench == "A"
    assert "duplicate item_id (first in" in r.errors[0].message and r.errors[0].path == str(b)


NEXTQA_COLS = ["video", "frame_count", "width", "height", "question", "answer", "qid", "type",
               "a0", "a1", "a2", "a3", "a4"]


def write_nextqa(path: Path, n: int) -> Path:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(NEXTQA_COLS)
        for i in range(n):
            # as in NExT-QA's release, qid numbers the questions within each video (restarts at 0)
            w.writerow([f"{1000 + i // 5}", 300, 640, 480, f"why did the boy {i} run?", i % 5, i % 5, "CW",
                        "to play", "to eat", "to hide", "to sleep", "to swim"])
    return path


def test_csv_nextqa_layout_auto_detected(tmp_path: Path) -> None:
    r = load_items([write_nextqa(tmp_path / "NExTQA.csv", 12)])
    assert not r.problems
    it = r.items[7]
    assert it.item_id == "1001_2" and it.answer == 2 and len(it.options) == 5 and it.bench == "NExTQA"
    assert it.video_id == key_video_id("1001") and it.meta["video_key"] == "1001"
    assert not it.has_frames_source
    assert it.task == "CW"  # NExT-QA's question type is its task breakdown (the report's task filter)


def test_a_type_column_is_a_task_only_in_the_nextqa_layout(tmp_path: Path) -> None:
    p = tmp_path / "other.csv"
    p.write_text("id,question,options,answer,type\nq1,What?,\"[\"\"a\"\",\"\"b\"\"]\",a,single-choice\n")
    r = load_items([p])
    assert not r.problems and r.items[0].task is None and r.items[0].item_id == "q1"
    named = tmp_path / "named.csv"
    named.write_text(p.read_text().replace(",type\n", ",task\n"))
    assert load_items([named]).items[0].task == "single-choice"


def test_csv_column_map(tmp_path: Path) -> None:
    p = tmp_path / "m.csv"
    p.write_text("ident,text,o1,o2,o3,gold,vid\nk1,Which?,1,2,3,2,h1\nk2,Which?,4,5,,0,h2\n")
    cmap = ColumnMap.parse("item_id=ident,question=text,options=o1|o2|o3,answer=gold,video_id=vid,"
                           "answer_kind=index")
    r = load_items([p], cmap)
    assert not r.problems
    assert r.items[0].answer == 2 and r.items[0].options == ("1", "2", "3") and r.items[0].video_id == "h1"
    assert r.items[1].options == ("4", "5")  # trailing empty option cell dropped
    with pytest.raises(ValueError):
        ColumnMap.parse("nonsense=1")


def test_parquet_items(tmp_path: Path) -> None:
    p = tmp_path / "P.parquet"
    pq.write_table(pa.Table.from_pylist([
        {"item_id": "p1", "question": "Q", "options": ["A. a", "B. b"], "answer": "b", "video_id": None},
        {"item_id": "p2", "question": "Q", "options": ["a", "b"], "answer": "9", "video_id": "v"},
    ]), p)
    r = load_items([p])
    assert [i.item_id for i in r.items] == ["p1"] and r.items[0].answer == 1
    assert r.errors[0].item_id == "p2" and "out of range" in r.errors[0].message


def test_unreadable_file_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    bad = tmp_path / "broken.parquet"
    bad.write_bytes(b"not parquet")
    r = load_items([bad, write_nextqa(tmp_path / "ok.csv", 3)])
    assert len(r.items) == 3
    assert r.errors[0].path == str(bad) and "cannot read file" in r.errors[0].message


def test_answer_kinds() -> None:
    assert resolve_answer("2", ["1", "2", "3"], ["1", "2", "3"], "auto") == 1
    assert resolve_answer("2", ["1", "2", "3"], ["1", "2", "3"], "index") == 2
    assert resolve_answer("b", ["x", "y"], ["x", "y"], "auto") == 1
    assert resolve_answer(True, ["x", "y"], ["x", "y"], "auto").startswith("gold is a boolean (true)")


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from benchcheck.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=120)


def test_validate_5000_item_nextqa_csv_under_5s(tmp_path: Path) -> None:
    p = write_nextqa(tmp_path / "NExTQA.csv", 5000)
    t0 = time.perf_counter()
    r = run_cli("items", "validate", str(p))
    elapsed = time.perf_counter() - t0
    assert r.returncode == 0, r.stderr
    assert "NExTQA" in r.stdout and "5000" in r.stdout
    assert elapsed < 5.0, f"validate took {elapsed:.2f}s"


def test_validate_exit_code_and_stats(tmp_path: Path) -> None:
    p = write_jsonl(tmp_path / "V.jsonl", [
        {"item_id": "a", "question": "Q", "options": ["x", "y"], "answer": 0},
        {"item_id": "b", "question": "", "options": ["x", "y"], "answer": 0},
    ])
    r = run_cli("items", "validate", str(p))
    assert r.returncode == 1
    assert f"{p}:2: b: empty question" in r.stderr
    s = run_cli("items", "stats", str(p))
    assert s.returncode == 0 and "V: 1 items" in s.stdout and "A:1 (100%)" in s.stdout


def test_bench_names_cannot_leave_the_results_folder(tmp_path: Path) -> None:
    p = write_jsonl(tmp_path / "ok.jsonl", [
        {"item_id": "a", "bench": "../../etc/evil", "question": "Q", "options": ["x", "y"], "answer": 0},
        {"item_id": "b", "bench": ".hidden", "question": "Q", "options": ["x", "y"], "answer": 0},
        {"item_id": "c", "bench": "Fine-Bench_1", "question": "Q", "options": ["x", "y"], "answer": 0},
    ])
    r = load_items([p])
    assert [i.item_id for i in r.items] == ["c"]
    assert {e.item_id for e in r.errors} == {"a", "b"}
    assert all("not a safe file name" in e.message for e in r.errors)


def test_a_malformed_field_costs_only_its_row(tmp_path: Path) -> None:
    p = write_jsonl(tmp_path / "M.jsonl", [
        {"item_id": "a", "question": "Q", "options": ["x", "y"], "answer": 0},
        {"item_id": "b", "question": "Q", "options": 5, "answer": 0},
        {"item_id": "c", "question": "Q", "options": ["x", "y"], "answer": 0, "duration_s": "n/a"},
        {"item_id": "d", "question": "Q", "options": ["x", "y"], "answer": 1},
    ])
    with p.open("ab") as f:
        f.write(b'{"item_id": "e", "question": "\xff\xfe", "options": ["x", "y"], "answer": 0}\n')
        f.write(b'{"item_id": "f", "question": "Q", "options": ["x", "y"], "answer": 0}\n')
    r = load_items([p])
    assert [i.item_id for i in r.items] == ["a", "d", "f"]
    assert {e.item_id for e in r.errors} == {"b", "c", None}
    assert any(e.message == "line is not UTF-8" and e.where == "5" for e in r.errors)


def test_part_like_bench_names_and_files_named_twice(tmp_path: Path) -> None:
    p = write_jsonl(tmp_path / "mv.p1.jsonl", [{"item_id": "a", "question": "Q", "options": ["x", "y"], "answer": 0}])
    r = load_items([p])
    assert not r.items and "not a safe file name" in r.errors[0].message
    q = write_jsonl(tmp_path / "ok.jsonl", [{"item_id": "z", "question": "Q", "options": ["x", "y"], "answer": 0}])
    again = load_items([q, tmp_path, q])
    assert [i.item_id for i in again.items] == ["z"]
    assert not [e for e in again.errors if "duplicate" in e.message]


def test_spread_numeric_options_read_a_digit_gold_as_an_index(tmp_path: Path) -> None:
    p = tmp_path / "count.csv"
    p.write_text("qid,question,a0,a1,a2,a3,a4,answer\nq1,How many?,1,2,3,4,5,2\n")
    r = load_items([p])
    assert r.items[0].answer == 2 and r.items[0].options[2] == "3"
