"""A judge's JSON verdict with two disagreeing ``score`` keys is no verdict (a judge error).

Before, ``{"score": 0, "reasoning": "...", "score": 1}`` was read as 1 (``json.loads`` keeps the
last key), while two disagreeing ``SCORE:`` lines were already refused: a judge that revised its
mind mid-object had its item scored right, silently.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from qa_servers import qa_entry, read_json, run_cli, scripted_server, vlm_cmd


def test_disagreeing_score_keys_are_a_judge_error(tmp_path: Path, clips: Path,
                                                  write_dataset: Callable[[list[Any]], Path]) -> None:
    ds = write_dataset([qa_entry("dup", "Is it red? [say:no]"), qa_entry("same", "Is it blue? [say:yes]")])
    rules = [
        {"match": "Is it red", "reply": '{"score": 0, "reasoning": "wrong colour", "score": 1}'},
        {"match": "Is it blue", "reply": '{"score": 1, "reasoning": "same", "score": 1}'},
    ]
    with scripted_server(tmp_path, "judge", rules) as url:
        env = {"EVAL_LLM_JUDGE_BASE_URL": url, "EVAL_LLM_JUDGE_NAME": "judge", "EVAL_LLM_JUDGE_API_KEY": "k" * 20}
        res = run_cli(["qa", "run", "--dataset", str(ds), "--videos", str(clips), "--output-dir",
                       str(tmp_path / "out"), "--vlm-cmd", vlm_cmd(), "--judge-format", "json"], env)
    assert res.returncode == 3, res.stderr
    summary = read_json(tmp_path / "out" / "summary.json")
    assert summary["counts"]["scored"] == 1 and summary["counts"]["judge_errors"] == 1
    assert summary["accuracy"] == 1.0
    (error,) = summary["errors"]
    assert error["id"] == "dup" and "disagreeing 'score' keys" in error["error"]
    evaluator = read_json(tmp_path / "out" / "qa_evaluator_output.json")
    scores = {i["id"]: i["score"] for i in evaluator["eval_output_items"]}
    assert scores == {"dup": None, "same": 1.0}
