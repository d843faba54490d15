"""CSV item files as spreadsheets and hand-written scripts really write them."""

from __future__ import annotations

import csv
from pathlib import Path

from tests.own.own_helpers import bc

from benchcheck.items.load import ColumnMap, load_items


def test_row_with_an_unquoted_comma_is_refused_not_shifted(tmp_path: Path) -> None:
    # "Which one, first?" unquoted: every later cell moves one column right, so the row would read
    # as options " first?", a, b, c with gold "d" (letter D: option c) and video "0".
    path = tmp_path / "mine.csv"
    path.write_text("item_id,question,a0,a1,a2,a3,answer,video\n"
                    "q1,What is it?,a,b,c,d,0,a.mp4\n"
                    "q2,Which one, first?,a,b,c,d,0,a.mp4\n")
    r = bc("items", "validate", path)
    assert r.exit_code == 1
    assert f"{path}:3: row has 9 cells but the header has 8 (a separator" in r.stderr
    assert "valid      mc" in r.stdout and " 1       1      0     1" in r.stdout


def test_tab_separated_rows_with_commas_are_one_line_each(tmp_path: Path) -> None:
    path = tmp_path / "tabbed.csv"
    with path.open("w", newline="", encoding="utf-8-sig") as f:
        csv.writer(f, delimiter="\t", lineterminator="\r\n").writerows(
            [["item_id", "question", "options", "answer"], ["q1", "Q?", '["a", "b"]', "1"]])
    r = bc("items", "validate", path)
    assert "TypeError" not in r.stderr
    assert "cannot read file" not in r.stderr


def test_import_of_a_csv_with_a_shifted_row_is_one_error_line(tmp_path: Path) -> None:
    path = tmp_path / "mine.csv"
    path.write_text("item_id,question,a0,a1,answer,video\n"
                    "q1,What is it?,a,b,0,a.mp4\n"
                    "q2,Which one, first?,a,b,0,a.mp4\n")
    r = bc("items", "import", path, "--from", "hf-folder", "--out", tmp_path / "out")
    assert r.exit_code == 2
    assert r.stderr.strip() == (f"error: {path}:3: row has 7 cells but the header has 6 "
                                "(a separator inside a cell that is not quoted?)")
    assert not (tmp_path / "out" / "mine.jsonl").exists()


ROWS = [["item_id", "question", "options", "answer", "video"],
        ["q1", "What colour?\nSay it, then go", '["red", "blue; dark"]', "blue; dark", "a.mp4"],
        ["q2", "Which, one?", '["x", "y", "z"]', "C", "sub dir/café.mp4"]]


def test_semicolon_and_tab_csv_as_spreadsheets_save_them(tmp_path: Path) -> None:
    for sep, name in ((";", "semi.csv"), ("\t", "tabs.csv")):
        path = tmp_path / name
        with path.open("w", newline="", encoding="utf-8-sig") as f:  # Excel: BOM, CRLF, quoted newlines
            csv.writer(f, delimiter=sep, lineterminator="\r\n").writerows(ROWS)
        r = bc("items", "validate", path)
        assert r.exit_code == 0, r.stderr
        loaded = load_items([path])
        assert [(i.item_id, i.question, i.options, i.answer, i.meta["video_key"]) for i in loaded.items] == [
            ("q1", "What colour?\nSay it, then go", ("red", "blue; dark"), 1, "a.mp4"),
            ("q2", "Which, one?", ("x", "y", "z"), 2, "sub dir/café.mp4")]
        out = tmp_path / f"out_{name}"
        r = bc("items", "import", path, "--from", "hf-folder", "--out", out)
        assert r.exit_code == 0, r.stderr
        assert [i.answer for i in load_items([out]).items] == [1, 2]


def test_options_in_letter_columns_are_read_as_vlmevalkit_and_mmlu_write_them(tmp_path: Path) -> None:
    # A lab's CSV with one column per option letter (A, B, C, D; E empty where fewer) was refused
    # as having no options field.
    path = tmp_path / "mine.csv"
    path.write_text("item_id,video,question,A,B,C,D,E,answer\n"
                    "q1,a.mp4,What color?,red,blue,green,black,,B\n"
                    "q2,a.mp4,Which one?,x,y,z,w,v,E\n")
    r = bc("items", "validate", path)
    assert r.exit_code == 0, r.stderr
    items = load_items([path]).items
    assert [it.options for it in items] == [("red", "blue", "green", "black"), ("x", "y", "z", "w", "v")]
    assert [it.answer for it in items] == [1, 4]
    # One column named A is no list of options: still refused, naming the key.
    lone = tmp_path / "lone.csv"
    lone.write_text("item_id,video,question,A,answer\nq1,a.mp4,Q?,red,A\n")
    r = bc("items", "validate", lone)
    assert r.exit_code == 1 and "no options field" in r.stderr


def test_a_map_naming_a_column_the_csv_lacks_is_one_file_line_naming_it(tmp_path: Path) -> None:
    # `--columns answer=ans` on a file whose gold column is `gold`: each row was refused as
    # "no gold answer", and nothing named the map.
    path = tmp_path / "mine.csv"
    path.write_text("item_id,video,question,a0,a1,a2,a3,a4,gold\n"
                    "q1,a.mp4,What color?,red,blue,green,black,,1\n"
                    "q2,a.mp4,Which one?,x,y,z,w,,0\n")
    r = bc("items", "validate", path, "--columns", "answer=ans")
    assert r.exit_code == 1
    bad = [line for line in r.stderr.splitlines() if line.startswith("bad item:")]
    assert bad == [f"bad item: {path}:0: column map: answer column 'ans' is not in this file "
                   "(columns: item_id, video, question, a0, a1, a2, a3, a4, gold)"], r.stderr
    # A map written for five options reads a file of four, as before.
    four = tmp_path / "four.csv"
    four.write_text("item_id,video,question,a0,a1,a2,a3,gold\nq1,a.mp4,What?,red,blue,green,black,1\n")
    r = bc("items", "validate", four, "--columns", "options=a0|a1|a2|a3|a4,answer=gold")
    assert r.exit_code == 0, r.stderr
    assert load_items([four]).items[0].options == ("red", "blue", "green", "black")
    # One map over files that differ in an optional column, or that give the video by id or by
    # key: the file without it loads, and a note names the map's column.
    r = bc("items", "validate", four, "--columns", "answer=gold,task=category,video_id=vid,video_key=video")
    assert r.exit_code == 0, r.stderr
    assert (f"note: {four}:0: column map: task column 'category' is not in this file (columns: item_id, video, "
            "question, a0, a1, a2, a3, gold); its items have no task") in r.stderr, r.stderr
    (item,) = load_items([four], ColumnMap.parse("answer=gold,task=category")).items
    assert item.task is None and item.answer == 1


def test_a_misspelt_field_in_the_column_map_is_named(tmp_path: Path) -> None:
    path = tmp_path / "mine.csv"
    path.write_text("item_id,question,a,b,gold\nq1,What?,red,blue,1\n")
    r = bc("items", "validate", path, "--columns", "optons=a|b,answer=gold")
    assert r.exit_code == 2
    assert "column map: unknown field 'optons' in 'optons=a|b' (fields: item_id, bench, question, options," in r.stderr
