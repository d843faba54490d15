"""JSON lines of item text that holds a file name not UTF-8 (a lone surrogate, as Python decodes it)."""

from __future__ import annotations

import json

import pytest

from benchcheck.atomic import jsonl_bytes


def test_rows_with_a_lone_surrogate_are_written_and_read_back_unchanged() -> None:
    rows = [{"item_id": "a", "video": "caf\udce9.mp4"}, {"item_id": "b", "video": "café.mp4"}]
    with pytest.raises(UnicodeEncodeError):  # the way export and items import wrote them
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")
    data = jsonl_bytes(rows)
    assert [json.loads(line) for line in data.decode("utf-8").splitlines()] == rows
    assert "café".encode() in data  # rows that have a UTF-8 form keep their text as it is


def test_line_breaks_json_leaves_raw_are_escaped_so_every_line_is_one_record() -> None:
    # U+2028, U+2029 and U+0085 are legal raw in a JSON string, but str.splitlines (and readers built
    # on it) cut a line there: the lmms-eval export's data file broke such readers mid-record.
    rows = [{"question": "First\u2028second\u2029third\u0085fourth, café"}, {"question": "plain"}]
    data = jsonl_bytes(rows)
    lines = data.decode("utf-8").splitlines()
    assert len(lines) == 2 and [json.loads(line) for line in lines] == rows
    assert "\\u2028" in lines[0] and "café" in lines[0]
