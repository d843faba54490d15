"""Item files as real releases ship them: ids numbered per video, bad bytes, wrong types, odd names."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from benchcheck.items import ColumnMap, Item, key_video_id, load_items
from benchcheck.items.checks import LONGEST_SUFFIX, MAX_BENCH_BYTES, NAME_MAX_BYTES
from benchcheck.items.report import bad_share_lines, stats_table, validation_table

NEXTQA_HEADER = ["video", "frame_count", "width", "height", "question", "answer", "qid", "type",
                 "a0", "a1", "a2", "a3", "a4"]


def write_release_csv(path: Path, n_videos: int, per_video: int = 4, bad: int = 0) -> Path:
    """A NExT-QA-shaped CSV as released: numeric video names, qid restarting at 0 per video."""
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(NEXTQA_HEADER)
        for v in range(n_videos):
            for q in range(per_video):
                question = "" if v * per_video + q < bad else f"why did the man {q} wave in clip {v}"
                w.writerow([4010341788 + v, 1800, 640, 360, question, (v + q) % 5, q, "CW",
                            "greet", "leave", "point", "dance", "sit"])
    return path


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from benchcheck.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=120)


def jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def item(iid: str, **kw: object) -> dict[str, object]:
    return {"item_id": iid, "question": "Q?", "options": ["x", "y"], "answer": 0, **kw}


def test_release_csv_numbered_per_video_validates_without_a_map(tmp_path: Path) -> None:
    p = write_release_csv(tmp_path / "NExTQA.csv", 1250, bad=3)  # 5,000 items, 3 truly bad
    r = load_items([p])
    assert len(r.items) == 4997 and len(r.errors) == 3
    assert all(e.message == "empty question" for e in r.errors)
    assert r.items[0].item_id == "4010341788_3" and r.items[-1].item_id == "4010343037_3"
    assert r.items[0].video_id == key_video_id("4010341788")
    out = run_cli("items", "validate", str(p))
    assert out.returncode == 1 and "4997" in out.stdout and "duplicate" not in out.stderr


def test_composite_id_map_joins_columns(tmp_path: Path) -> None:
    p = tmp_path / "T.csv"
    p.write_text("clip,n,question,options,answer\nv1,0,Q,\"[\"\"a\"\",\"\"b\"\"]\",0\nv2,0,Q,\"[\"\"a\"\",\"\"b\"\"]\",1\n"
                 "v2,,Q,\"[\"\"a\"\",\"\"b\"\"]\",1\n")
    r = load_items([p], ColumnMap.parse("item_id=clip+n,video_key=clip"))
    assert [i.item_id for i in r.items] == ["v1_0", "v2_0"]
    assert [(e.where, e.message) for e in r.errors] == [("4", "item id column 'n' (of 'clip+n') is empty or missing")]
    missing = load_items([p], ColumnMap.parse("item_id=clip+qid"))
    assert not missing.items and len(missing.errors) == 1
    assert "item_id column 'qid' is not in this file" in missing.errors[0].message
    pq_path = tmp_path / "P.parquet"
    pq.write_table(pa.Table.from_pylist([{"video": "a", "qid": 0, "question": "Q", "options": ["x", "y"],
                                          "answer": 0}, {"video": "b", "qid": 0, "question": "Q",
                                                         "options": ["x", "y"], "answer": 0}]), pq_path)
    assert [i.item_id for i in load_items([pq_path], ColumnMap.parse("item_id=video+qid")).items] == ["a_0", "b_0"]


def test_repeating_id_column_gets_one_hint_and_the_bad_share_comes_first(tmp_path: Path) -> None:
    p = tmp_path / "PerVideo.csv"
    with p.open("w", newline="") as f:  # not the NExT-QA layout: the default id stays 'question_id'
        w = csv.writer(f)
        w.writerow(["video_path", "question_id", "question", "options", "answer"])
        for v in range(50):
            for q in range(3):
                w.writerow([f"clips/{v}.mp4", q, f"Q{v}-{q}", json.dumps(["a", "b", "c"]), "a"])
    r = load_items([p])
    assert len(r.items) == 3 and len(r.errors) == 147
    hints = [x for x in r.problems if x.severity == "note"]
    assert len(hints) == 1 and hints[0].where == "5"  # v1's q0, the first id given twice (v0's q0 is line 2)
    assert f"'0' here is the id of {p}:2 too (147 duplicates in this file)" in hints[0].message
    assert "--columns 'item_id=video_path+question_id'" in hints[0].message
    [share] = bad_share_lines(r)
    assert share.startswith("PerVideo: 147 of 150 records are bad (98.0%)") and "duplicate item_id (147)" in share
    assert validation_table(r).splitlines()[0] == share
    out = run_cli("items", "validate", str(p))
    err = out.stderr.splitlines()
    assert err[0] == f"warning: {share}" and "item_id=video_path+question_id" in err[1]
    fixed = load_items([p], ColumnMap.parse("item_id=video_path+question_id"))
    assert len(fixed.items) == 150 and not fixed.problems and not bad_share_lines(fixed)


def test_a_few_bad_items_do_not_warn(tmp_path: Path) -> None:
    r = load_items([write_release_csv(tmp_path / "N.csv", 100, bad=4)])  # 1 % bad
    assert len(r.errors) == 4 and not bad_share_lines(r)


def test_csv_bytes_that_are_not_utf8_are_a_line_error(tmp_path: Path) -> None:
    p = tmp_path / "Enc.csv"
    p.write_bytes(b"\xef\xbb\xbfitem_id,question,options,answer\n"
                  b'a,Q,"[""x"",""y""]",0\n'
                  b'b,h\xff\xfew,"[""x"",""y""]",0\n'
                  b'c,"two\nlines","[""x"",""y""]",0\n'
                  b'd,Q,"[""x"",""y\xe9""]",0\n'
                  b'e,Q,"[""x"",""y""]",1\n')
    r = load_items([p])
    assert [i.item_id for i in r.items] == ["a", "c", "e"]
    assert [(e.where, e.message) for e in r.errors] == [("3", "field 'question' is not UTF-8"),
                                                         ("6", "field 'options' is not UTF-8")]
    assert r.items[1].source_line == "4" and r.items[2].source_line == "7"  # a quoted newline counts


def test_options_of_the_wrong_type_are_errors(tmp_path: Path) -> None:
    p = jsonl(tmp_path / "Types.jsonl", [
        item("nested", options=[["a"], {"x": 1}]),
        item("null", options=[None, "b"]),
        item("bool", options=[True, "b"]),
        item("obj", options={"a": 1, "b": 2}),
        item("num", options=[1, 2.5], answer=1),
        item("qlist", question=["what?"]),
        item("ok"),
    ])
    r = load_items([p])
    assert [i.item_id for i in r.items] == ["num", "ok"] and r.items[0].options == ("1", "2.5")
    got = {(e.item_id, e.message) for e in r.errors}
    assert got == {("nested", "option 0 is a list, not text"), ("null", "option 0 is null, not text"),
                   ("bool", "option 0 is a boolean, not text"), ("obj", "options is an object, not a list"),
                   (None, "field 'question' is a list, not text")}
    assert all(str(e).startswith(f"{p}:") for e in r.errors)
    spread = tmp_path / "S.parquet"
    pq.write_table(pa.Table.from_pylist([{"qid": "s1", "question": "Q", "a0": "x", "a1": None, "a2": "z",
                                          "answer": 0}]), spread)
    [e] = load_items([spread]).errors
    assert e.message == "option 1 (column 'a1') is null, not text" and e.item_id == "s1"


def test_bench_names_longer_than_a_file_name_are_refused(tmp_path: Path) -> None:
    assert MAX_BENCH_BYTES + len(LONGEST_SUFFIX) == NAME_MAX_BYTES
    longest = "B" * MAX_BENCH_BYTES
    p = jsonl(tmp_path / "L.jsonl", [item("a", bench="x" * 300), item("b", bench=longest + "B"),
                                     item("c", bench="é" * (MAX_BENCH_BYTES // 2 + 1)), item("d", bench=longest)])
    r = load_items([p])
    assert [i.item_id for i in r.items] == ["d"]
    assert {e.item_id for e in r.errors} == {"a", "b", "c"}
    assert all("too long for a file name" in e.message for e in r.errors)
    (tmp_path / "res").mkdir()
    (tmp_path / "res" / f"{longest}.p123456789.jsonl.lock").write_text("")  # the longest suffix fits


def test_video_ids_with_path_characters_are_flagged(tmp_path: Path) -> None:
    p = jsonl(tmp_path / "V.jsonl", [item("up", video_id="../normalized/abc"), item("abs", video_id="/etc/passwd"),
                                     item("dot", video_id=".."), item("back", video_id="a\\b"),
                                     item("hash", video_id="0f3c9a"), item("key", video_id="k:0123456789abcdef")])
    r = load_items([p])
    assert [i.item_id for i in r.items] == ["hash", "key"]
    assert {e.item_id for e in r.errors} == {"up", "abs", "dot", "back"}
    assert all("is not a plain name" in e.message for e in r.errors)


def test_stats_tell_normalized_videos_from_placeholders() -> None:
    items = [Item("a", "S", "Q", ("x", "y"), 0, "0f3c9a"), Item("b", "S", "Q", ("x", "y"), 0, key_video_id("k")),
             Item("c", "S", "Q", ("x", "y"), 0, key_video_id("j")), Item("d", "S", "Q", ("x", "y"), 0)]
    first = stats_table(items).splitlines()[0]
    assert first == "S: 4 items, 1 with a video found, 2 not normalized yet, 0 not found, 1 without a video"
