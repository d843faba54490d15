"""The lmms-eval task an export writes scores a reply written in another form of the gold letter."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def _cli(*args: str) -> None:
    r = subprocess.run([sys.executable, "-m", "benchcheck", *args], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr


def _utils(folder: Path) -> Any:
    spec = importlib.util.spec_from_file_location("exported_utils", folder / "utils.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_exported_process_results_reads_bold_and_full_width_letters(tmp_path: Path) -> None:
    items = tmp_path / "Forms.jsonl"
    items.write_text("".join(json.dumps({"item_id": f"f{i}", "question": f"Which colour is thing {i}?",
                                         "options": ["red", "blue", "green"], "answer": 1}) + "\n"
                             for i in range(3)), encoding="utf-8")
    _cli("screen", "--step", "1", "--items", str(items), "--results", str(tmp_path / "res"), "--engine", "reference")
    _cli("export", "--results", str(tmp_path / "res"), "--items", str(items), "--chain", "1",
         "--format", "lmms-eval", "--out", str(tmp_path / "lmms"))
    utils = _utils(tmp_path / "lmms")
    docs = [json.loads(line) for line in (tmp_path / "lmms" / "Forms_kept.jsonl").read_text().splitlines()]
    assert docs
    for reply in ["B", "**B**", "Ｂ", "（B）", "Ｂ．", "\u200bB", "\ufeff(B) blue", "`B`"]:
        assert utils.process_results(docs[0], [reply]) == {"accuracy": 1.0}, reply
    for reply in ["A", "**A**", "Ａ", "no letter"]:
        assert utils.process_results(docs[0], [reply]) == {"accuracy": 0.0}, reply
