"""Item files nobody here wrote (issue 40): layouts that are not a list, pathological records, empty
files, BOMs, ids that could collide, and the messages a typo or a string of options gets (issue 38)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

from benchcheck.items import key_video_id, load_items
from benchcheck.items.report import bad_share_lines

# Two videos of TempCompass's questions/multi-choice.json as released: {video: {dimension: [...]}},
# the options written into the question as "A. ..." lines, the gold as "B. text".
TEMPCOMPASS = {
    "1034419625": {
        "action": [
            {"question": "What is the man doing in the video?\nA. dunking a basketball\n"
                         "B. dribbling a basketball\nC. passing a basketball",
             "answer": "A. dunking a basketball"},
            {"question": "Which activity is the man engaged in?\nA. passing a basketball\n"
                         "B. dribbling a basketball\nC. dunking a basketball",
             "answer": "C. dunking a basketball"},
        ],
        "direction": [
            {"question": "What is the direction of the man?\nA. moving towards the camera\n"
                         "B. moving from left to right\nC. moving away from the camera",
             "answer": "B. moving from left to right"},
        ],
    },
    "1034419625_reverse": {
        "direction": [
            {"question": "What is the direction of the man?\nA. moving towards the camera\n"
                         "B. moving from right to left\nC. moving away from the camera\nD. moving from left to right",
             "answer": "B. moving from right to left"},
        ],
    },
}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from benchcheck.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=120)


def item(iid: str | None = None, **kw: object) -> dict[str, object]:
    row: dict[str, object] = {"question": "Q?", "options": ["x", "y"], "answer": 0, **kw}
    if iid is not None:
        row["item_id"] = iid
    return row


def jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# -- 4: a .json whose top level is not a list ------------------------------------------------------

def test_json_keyed_by_video_reads_tempcompass_layout(tmp_path: Path) -> None:
    p = tmp_path / "TempCompass.json"
    p.write_text(json.dumps(TEMPCOMPASS, indent=4), encoding="utf-8")
    r = load_items([p])
    assert not r.errors, r.errors
    assert len(r.items) == 4
    first = r.items[0]
    assert first.question == "What is the man doing in the video?"
    assert first.options == ("dunking a basketball", "dribbling a basketball", "passing a basketball")
    assert first.answer == 0 and first.task == "action"
    assert first.video_id == key_video_id("1034419625") and first.meta["video_key"] == "1034419625"
    assert r.items[1].answer == 2 and r.items[2].task == "direction" and r.items[2].answer == 1
    last = r.items[3]
    assert last.video_id == key_video_id("1034419625_reverse") and len(last.options) == 4 and last.answer == 1
    assert len({i.item_id for i in r.items}) == 4


def test_json_dict_of_lists_keyed_by_video(tmp_path: Path) -> None:
    p = tmp_path / "B.json"
    p.write_text(json.dumps({"v1": [item("a"), item("b")], "v2": [item("c", video="own.mp4")]}), encoding="utf-8")
    r = load_items([p])
    assert not r.errors and [i.item_id for i in r.items] == ["a", "b", "c"]
    assert r.items[0].video_id == key_video_id("v1") and r.items[2].video_id == key_video_id("own.mp4")


def test_json_items_keyed_by_id(tmp_path: Path) -> None:
    p = tmp_path / "K.json"
    rows = {"q1": item(None), "q2": item(None, video="v.mp4"), "q3": item("own")}
    p.write_text(json.dumps(rows), encoding="utf-8")
    r = load_items([p])
    assert not r.errors and [i.item_id for i in r.items] == ["q1", "q2", "own"]
    assert r.items[1].video_id == key_video_id("v.mp4")


def test_json_one_item_object_is_one_item(tmp_path: Path) -> None:
    p = tmp_path / "One.json"
    p.write_text(json.dumps(item("only")), encoding="utf-8")
    r = load_items([p])
    assert not r.errors and [i.item_id for i in r.items] == ["only"]


def test_json_answer_key_is_refused_naming_what_it_found(tmp_path: Path) -> None:
    # EgoSchema's subset_answers.json: {question uuid: gold index}, no questions in it.
    p = tmp_path / "subset_answers.json"
    p.write_text(json.dumps({"0074f737-11cb-497d-8d07-77c3a8127391": 0,
                             "00b9a0de-c59e-49cb-a127-6081e2fb8c8e": 3}), encoding="utf-8")
    r = load_items([p])
    assert not r.items and len(r.errors) == 1
    msg = str(r.errors[0])
    assert str(p) in msg and "an object of 2 numbers" in msg and "not a list of items" in msg
    assert "\n" not in msg


def test_json_scalar_or_list_of_scalars_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "S.json"
    p.write_text('"hello"', encoding="utf-8")
    [err] = load_items([p]).errors
    assert "top level is text" in err.message


def test_plan_only_on_a_dict_file_is_not_silent(tmp_path: Path) -> None:
    p = tmp_path / "subset_answers.json"
    p.write_text(json.dumps({"a": 1, "b": 2}), encoding="utf-8")
    out = cli("screen", "--items", str(p), "--step", "1", "--results", str(tmp_path / "res"), "--plan-only")
    assert out.returncode != 0 and "REMAINING_TOTAL" not in out.stdout
    assert "subset_answers.json" in out.stderr and "no items" in out.stderr


# -- 6: one pathological record is one bad line ----------------------------------------------------

def test_jsonl_line_nested_too_deep_is_one_bad_line(tmp_path: Path) -> None:
    p = tmp_path / "D.jsonl"
    deep = '{"question": ' + "[" * 200_000 + "]" * 200_000 + "}"
    p.write_text(json.dumps(item("a")) + "\n" + deep + "\n" + json.dumps(item("b")) + "\n", encoding="utf-8")
    r = load_items([p])
    assert [i.item_id for i in r.items] == ["a", "b"]
    [err] = r.errors
    assert err.where == "2" and "nested too deep" in err.message


def test_csv_cell_over_the_field_limit_is_one_bad_row(tmp_path: Path) -> None:
    p = tmp_path / "L.csv"
    with p.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["item_id", "question", "a0", "a1", "answer"])
        w.writerow(["a", "Q?", "x", "y", "0"])
        w.writerow(["big", "Q" * 140_000, "x", "y", "0"])
        w.writerow(["b", "Q?", "x", "y", "0"])
    r = load_items([p])
    assert [i.item_id for i in r.items] == ["a", "b"]
    [err] = r.errors
    assert err.where == "3" and "131,072" in err.message


def test_csv_whose_only_row_is_over_the_limit_is_that_row_not_header_only(tmp_path: Path) -> None:
    p = tmp_path / "L1.csv"
    p.write_text("item_id,question,a0,a1,answer\nbig," + "Q" * 140_000 + ",x,y,0\n", encoding="utf-8")
    r = load_items([p])
    [err] = r.errors
    assert err.where == "2" and "131,072" in err.message


# -- 11: empty item files ---------------------------------------------------------------------------

def test_empty_item_files_are_named(tmp_path: Path) -> None:
    empty_jsonl = tmp_path / "E1.jsonl"
    empty_jsonl.write_bytes(b"")
    empty_csv = tmp_path / "E2.csv"
    empty_csv.write_bytes(b"")
    header_only = tmp_path / "E3.csv"
    header_only.write_text("item_id,question,a0,a1,answer\n", encoding="utf-8")
    empty_list = tmp_path / "E4.json"
    empty_list.write_text("[]", encoding="utf-8")
    blank_lines = tmp_path / "E5.jsonl"
    blank_lines.write_text("\n\n  \n", encoding="utf-8")
    files = [empty_jsonl, empty_csv, header_only, empty_list, blank_lines]
    r = load_items(files)
    assert not r.items
    by_path = {e.path: e.message for e in r.errors}
    assert set(by_path) == {str(f) for f in files}
    assert "empty file" in by_path[str(empty_jsonl)] and "header only" in by_path[str(header_only)]
    assert "empty list" in by_path[str(empty_list)]


def test_a_command_with_no_items_exits_nonzero_with_the_reason(tmp_path: Path) -> None:
    p = tmp_path / "E.jsonl"
    p.write_bytes(b"")
    for args in (["items", "stats", str(p)],
                 ["screen", "--items", str(p), "--step", "1", "--results", str(tmp_path / "r"), "--plan-only"]):
        out = cli(*args)
        assert out.returncode != 0, args
        assert "no items" in out.stderr and "E.jsonl" in out.stderr and "empty file" in out.stderr
        assert "Traceback" not in out.stderr
    out = cli("items", "validate", str(p))
    assert out.returncode == 1 and "E.jsonl" in out.stderr and "empty file" in out.stderr
    good = jsonl(tmp_path / "G.jsonl", [item("g")])
    out = cli("items", "stats", str(p), str(good))  # one file with items: the command runs
    assert out.returncode == 0 and "G: 1 items" in out.stdout


# -- 12: generated ids never collide with given ones ------------------------------------------------

def test_generated_id_never_takes_a_given_one(tmp_path: Path) -> None:
    p = jsonl(tmp_path / "C.jsonl", [item(None, question="no id"), item("C_0", question="given C_0")])
    r = load_items([p])
    assert not r.errors, r.errors
    by_q = {i.question: i.item_id for i in r.items}
    assert by_q["given C_0"] == "C_0" and by_q["no id"] != "C_0"
    assert [i.question for i in r.items] == ["no id", "given C_0"]  # file order kept


def test_generated_id_never_takes_a_given_one_in_a_later_file(tmp_path: Path) -> None:
    a = jsonl(tmp_path / "C.jsonl", [item(None, question="no id")])
    b = jsonl(tmp_path / "D.jsonl", [item("C_0", question="given C_0", bench="C")])
    r = load_items([a, b])
    assert not r.errors, r.errors
    ids = [i.item_id for i in r.items]
    assert len(set(ids)) == 2 and "C_0" in ids
    assert {i.question for i in r.items if i.item_id == "C_0"} == {"given C_0"}


def test_generated_ids_stay_as_before_without_a_collision(tmp_path: Path) -> None:
    p = jsonl(tmp_path / "C.jsonl", [item(None), item(None), item("x")])
    assert [i.item_id for i in load_items([p]).items] == ["C_0", "C_1", "x"]


def test_real_duplicates_are_still_refused(tmp_path: Path) -> None:
    p = jsonl(tmp_path / "C.jsonl", [item("a"), item("a")])
    r = load_items([p])
    assert len(r.items) == 1 and "duplicate item_id" in r.errors[0].message and r.errors[0].where == "2"


# -- 13: a UTF-8 BOM -------------------------------------------------------------------------------

def test_jsonl_with_a_bom_keeps_its_first_record(tmp_path: Path) -> None:
    p = tmp_path / "B.jsonl"
    p.write_bytes(b"\xef\xbb\xbf" + (json.dumps(item("first")) + "\n" + json.dumps(item("second")) + "\n").encode())
    r = load_items([p])
    assert not r.errors and [i.item_id for i in r.items] == ["first", "second"]
    j = tmp_path / "B2.json"
    j.write_bytes(b"\xef\xbb\xbf" + json.dumps([item("one")]).encode())
    r = load_items([j])
    assert not r.errors and [i.item_id for i in r.items] == ["one"]


# -- 14: the per-file warning keeps names whole -----------------------------------------------------

def test_bad_share_line_keeps_names_and_words_whole(tmp_path: Path) -> None:
    p = tmp_path / "U.csv"
    with p.open("wb") as f:
        f.write(b"item_id,question,a0,a1,answer\n")
        for i in range(10):
            q = b"bad \xff byte" if i < 4 else b"fine"
            f.write(b"i%d,%s,x,y,0\n" % (i, q))
    [line] = bad_share_lines(load_items([p]))
    assert "most often: field 'question' is not UTF-8 (4)" in line, line
    # values that differ per item are still elided, whole
    q = jsonl(tmp_path / "G.jsonl", [item(f"g{i}", answer=f"gold{i}") for i in range(4)])
    [line] = bad_share_lines(load_items([q]))
    assert "most often: gold … matches no option (4)" in line, line


# -- issue 38 point 6: the messages for options given as text and a typo'd key ----------------------

def test_options_as_a_string_say_not_a_list(tmp_path: Path) -> None:
    p = jsonl(tmp_path / "S.jsonl", [item("s", options="a, b, c")])
    [err] = load_items([p]).errors
    assert "not a list" in err.message and "a, b, c" in err.message and "fewer than" not in err.message


def test_typo_key_is_named(tmp_path: Path) -> None:
    row = item("t")
    row["qestion"] = row.pop("question")
    p = jsonl(tmp_path / "T.jsonl", [row])
    [err] = load_items([p]).errors
    assert "'qestion'" in err.message and "question" in err.message and "empty question" not in err.message
    row = item("u")
    row["anwser"] = row.pop("answer")
    [err] = load_items([jsonl(tmp_path / "U.jsonl", [row])]).errors
    assert "'anwser'" in err.message
