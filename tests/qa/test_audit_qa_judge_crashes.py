"""Judge replies that crashed the whole judge stage are one item's judge error.

Before, a JSON verdict whose ``score`` is an integer too large for a float (``{"score":
1000...0}``, over 308 digits) raised ``OverflowError``, and a reply holding JSON nested past the
decoder's depth (``{"score": 1, "r": [[[[...]]]]}``, thousands of brackets: what a degenerate judge
repeating one token emits) raised ``RecursionError``: the stage died with a traceback, exit 1, and
no ``summary.json`` was written. Now the first is out of range like ``SCORE: 1e999`` and the
second a reply without a verdict (asked again): either way a judge error for that item after its
retries, and every other item is scored.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from qa_servers import qa_entry, read_json, run_cli, scripted_server, vlm_cmd

DEPTH = 3000  # past CPython's default recursion limit (1000)


@pytest.mark.parametrize(("reply", "says"), [
    ('{"score": 1' + "0" * 400 + ', "reasoning": "x"}', "outside 0-1"),
    ('{"score": 1, "r": ' + "[" * DEPTH + "]" * DEPTH + "}", "no verdict in 4 replies"),
], ids=["huge-integer-score", "deeply-nested-json"])
def test_a_reply_that_crashed_the_parser_is_a_judge_error(tmp_path: Path, clips: Path, reply: str, says: str,
                                                          write_dataset: Callable[[list[Any]], Path]) -> None:
    ds = write_dataset([qa_entry("bad", "Is it red? [say:no]"), qa_entry("fine", "Is it blue? [say:yes]")])
    rules = [{"match": "Is it red", "reply": reply},
             {"match": "Is it blue", "reply": '{"score": 1, "reasoning": "same"}'}]
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
    assert error["id"] == "bad" and error["stage"] == "judge" and says in error["error"]
