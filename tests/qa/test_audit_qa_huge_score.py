"""A judge's JSON verdict whose ``score`` is an integer too large for a float is no verdict.

Before, ``{"score": 1000...0}`` (over 308 digits, what a degenerate judge can emit) raised
``OverflowError`` in the parser: the whole judge stage died with a traceback, exit 1, and no
``summary.json`` was written. It is now out of range like ``SCORE: 1e999``: that item is a
judge error after its retries, and every other item is scored.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from qa_servers import qa_entry, read_json, run_cli, scripted_server, vlm_cmd


def test_huge_integer_score_is_a_judge_error_not_a_crash(tmp_path: Path, clips: Path,
                                                         write_dataset: Callable[[list[Any]], Path]) -> None:
    ds = write_dataset([qa_entry("huge", "Is it red? [say:no]"), qa_entry("fine", "Is it blue? [say:yes]")])
    rules = [
        {"match": "Is it red", "reply": '{"score": 1' + "0" * 400 + ', "reasoning": "x"}'},
        {"match": "Is it blue", "reply": '{"score": 1, "reasoning": "same"}'},
    ]
    with scripted_server(tmp_path, "judge", rules) as url:
        env = {"EVAL_LLM_JUDGE_BASE_URL": url, "EVAL_LLM_JUDGE_NAME": "judge"}
        res = run_cli(["qa", "run", "--dataset", str(ds), "--videos", str(clips), "--output-dir",
                       str(tmp_path / "out"), "--vlm-cmd", vlm_cmd(), "--judge-max-tokens", "4096"], env)
    assert res.returncode == 3, res.stderr
    assert "Traceback" not in res.stderr
    summary = read_json(tmp_path / "out" / "summary.json")
    assert summary["counts"]["scored"] == 1 and summary["counts"]["judge_errors"] == 1
    assert summary["accuracy"] == 1.0
    (error,) = summary["errors"]
    assert error["id"] == "huge" and error["stage"] == "judge" and "outside 0-1" in error["error"]
