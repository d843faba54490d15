"""A judge reply holding JSON nested past the decoder's depth is no verdict, not a crash.

Before, a reply such as ``{"score": 1, "r": [[[[...]]]]}`` (thousands of brackets, what a
degenerate judge repeating one token emits) raised ``RecursionError`` in the parser: the whole
judge stage died with a traceback, exit 1, and no ``summary.json`` was written. It is now a reply
without a verdict: asked again, then a judge error for that item; the other items are scored.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from qa_servers import qa_entry, read_json, run_cli, scripted_server, vlm_cmd

DEPTH = 3000  # past CPython's default recursion limit (1000)


def test_deeply_nested_judge_reply_is_a_judge_error_not_a_crash(
        tmp_path: Path, clips: Path, write_dataset: Callable[[list[Any]], Path]) -> None:
    ds = write_dataset([qa_entry("deep", "Is it red? [say:no]"), qa_entry("fine", "Is it blue? [say:yes]")])
    rules = [
        {"match": "Is it red", "reply": '{"score": 1, "r": ' + "[" * DEPTH + "]" * DEPTH + "}"},
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
    assert error["id"] == "deep" and error["stage"] == "judge" and "no verdict in 4 replies" in error["error"]
