"""A folder of item files whose suffixes are upper case (``MyBench.JSONL``) is read as the files are."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from benchcheck.cli import main

ROW = {"item_id": "q1", "question": "What falls?", "options": ["a cup", "a ball"], "answer": "a ball",
       "video": "clip0.mp4"}


def test_folder_with_upper_case_suffixes_is_read(tmp_path: Path) -> None:
    folder = tmp_path / "items"
    folder.mkdir()
    (folder / "MyBench.JSONL").write_text(json.dumps(ROW) + "\n")
    (folder / "Other.CSV").write_text("item_id,question,options,answer\nc1,Why?,\"[\"\"x\"\", \"\"y\"\"]\",x\n")
    res = CliRunner().invoke(main, ["items", "validate", str(folder)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "no item files" not in res.output
    rows = {line.split()[0]: line.split()[1] for line in res.output.splitlines()[1:]}
    assert rows["MyBench"] == "1"
    assert rows["Other"] == "1"
