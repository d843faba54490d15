"""``qa judge`` finds the stored answer of an item whose question holds secret-shaped text.

``run_config.json`` stores the items masked (an ``hf_…`` token in a question is written ``***``),
and ``qa judge`` rebuilt each item from it: the answer key, a digest over the question, no
longer matched the row ``qa run`` had stored under the question as asked, so the item was
reported "never answered" (a VLM error, exit 3) and its answer was dropped from the accuracy.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from qa_servers import qa_entry, read_json, run_cli, scripted_server, vlm_cmd

TOKEN = "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ0123"


def test_rejudge_keeps_the_answer_of_a_question_with_a_secret_shaped_word(
        tmp_path: Path, clips: Path, write_dataset: Callable[[list[Any]], Path]) -> None:
    ds = write_dataset([qa_entry("tok", f"Does the sign read {TOKEN}? [say:yes]"),
                        qa_entry("plain", "Is it blue? [say:no]")])
    rules = [{"match": "Does the sign", "reply": '{"score": 1, "reasoning": "same"}'},
             {"match": "", "reply": '{"score": 0, "reasoning": "differs"}'}]
    out = tmp_path / "out"
    with scripted_server(tmp_path, "judge", rules) as url:
        env = {"EVAL_LLM_JUDGE_BASE_URL": url, "EVAL_LLM_JUDGE_NAME": "judge"}
        run = run_cli(["qa", "run", "--dataset", str(ds), "--videos", str(clips), "--output-dir", str(out),
                       "--vlm-cmd", vlm_cmd()], env)
        assert run.returncode == 0, run.stderr
        assert TOKEN not in (out / "run_config.json").read_text()  # still masked on disk
        rejudge = run_cli(["qa", "judge", "--output-dir", str(out)], env)
    assert rejudge.returncode == 0, rejudge.stderr
    summary = read_json(out / "summary.json")
    assert summary["counts"]["vlm_errors"] == 0 and summary["counts"]["scored"] == 2, summary["errors"]
    assert summary["accuracy"] == 0.5
    answers = {w["id"]: w["generated_answer"] for w in read_json(out / "workflow_output.json")}
    assert answers == {"tok": "yes", "plain": "no"}
