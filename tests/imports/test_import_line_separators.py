"""JSON lines are split on newlines alone: U+2028, U+2029 and U+0085 are legal inside a JSON string
(the lmms-eval export writes them raw), and ``str.splitlines`` cut such a record in two, so importing
this project's own lmms-eval export of an item holding one stopped with a JSONDecodeError."""

from __future__ import annotations

from pathlib import Path

from import_helpers import export, invoke, screen_step1, write_jsonl

from benchcheck.items import load_items


def test_lmms_eval_export_with_unicode_line_separators_imports_back(tmp_path: Path) -> None:
    rows = [{"item_id": f"q{i}", "question": f"First\u2028second {i}\u2029third\u0085?",
             "options": ["a\u2028b", "c", "d"], "answer": i % 3} for i in range(3)]
    write_jsonl(tmp_path / "items" / "Sep.jsonl", rows)
    screen_step1(tmp_path / "items", tmp_path / "results", tmp_path)
    export(tmp_path / "results", tmp_path / "items", "lmms-eval", tmp_path / "lm")
    r = invoke("items", "import", str(tmp_path / "lm" / "_benchcheck_kept.yaml"), "--from", "lmms-eval",
               "--out", str(tmp_path / "back"))
    assert r.exit_code == 0, r.output
    got = {it.item_id: it for it in load_items([tmp_path / "back"]).items}
    want = {it.item_id: it for it in load_items([tmp_path / "items"]).items}
    assert set(got) == set(want)
    for k, it in got.items():
        assert (it.question, it.options, it.answer) == (want[k].question, want[k].options, want[k].answer)
