"""``benchcheck qa run`` end to end: a real command-line VLM, a scripted judge behind
``benchcheck serve``, real clips; the run's exit code and output files are checked."""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from qa_servers import alive, qa_entry, read_json, run_cli, scripted_server, vlm_cmd

JUDGE_RULES: list[dict[str, Any]] = [
    {"match": "Candidate answer: yes",
     "reply": '{"score": 1, "reasoning": "The candidate says yes, as the reference does."}'},
    {"match": "Candidate answer: 2\\b",
     "reply": "<think>Reference says 3 people; maybe 1 point? No.</think>Counts differ: 2 vs 3.\nSCORE: 0"},
    {"match": "Candidate answer: partly",
     "reply": '```json\n{"score": 0.5, "reasoning": "Half of the events are named."}\n```'},
    {"match": "Candidate answer: nonumber", "reply": "I cannot grade this answer, the reference says 1."},
    {"match": "Candidate answer: flaky", "error": {"status": 503, "message": "warming up"}, "times": 2},
    {"match": "Candidate answer: flaky", "reply": '{"score": 1, "reasoning": "Right after the retries."}'},
    {"match": "Candidate answer: busy", "error": {"status": 429, "message": "rate limited"}, "times": 1},
    {"match": "Candidate answer: busy", "reply": "Right once the rate limit passed.\nSCORE: 1"},
]


def _dataset(write: Callable[[list[Any]], Path]) -> Path:
    return write([
        qa_entry("yes-1", "Is there a car? [say:yes]", "yes"),
        qa_entry("count-2", "How many people? [say:2]", "3", video="sub/b.mp4"),
        qa_entry("partial-3", "What happens? [say:partly]", "a man walks in and sits down"),
        qa_entry("hang-4", "Where is it? [hang]", "a kitchen"),
        qa_entry("crash-5", "Who is it? [crash]", "a man"),
        qa_entry("nonumber-6", "When? [say:nonumber]", "at 00:05"),
        qa_entry("report-7", "Summarize the clip", "a report", methods=["report"]),
        qa_entry("nogt-8", "Anything? [say:yes]", None),
        {"id": "plain-9", "query": "Unmarked", "ground_truth": "x", "video": "a.mp4"},
    ])


def _judge_env(url: str, name: str = "judge-x") -> dict[str, str]:
    return {"EVAL_LLM_JUDGE_BASE_URL": url, "EVAL_LLM_JUDGE_NAME": name}


def test_hanging_item_ends_on_time_others_scored(tmp_path: Path, clips: Path,
                                                 write_dataset: Callable[[list[Any]], Path]) -> None:
    dataset = _dataset(write_dataset)
    out = tmp_path / "out"
    pidfile = tmp_path / "grandchild.pid"
    env = {"QA_PIDFILE": str(pidfile), "NGC_API_KEY": "ngc-secret-value-0123"}
    with scripted_server(tmp_path, "judge-x", JUDGE_RULES) as judge_url:
        res = run_cli(["qa", "run", "--dataset", str(dataset), "--videos", str(clips), "--output-dir", str(out),
                       "--vlm-cmd", vlm_cmd(), "--num-frames", "4", "--timeout", "1", "--watchdog-grace", "1",
                       "--concurrency", "2"], {**env, **_judge_env(judge_url)})
    assert res.returncode == 3, res.stderr
    # The hanging command sleeps 120 s; the watchdog ends it at 1 + 1 s.
    assert res.wall_s < 30
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild), "the watchdog must kill the whole process group"

    summary = read_json(out / "summary.json")
    counts = summary["counts"]
    assert (counts["selected"], counts["scored"], counts["vlm_errors"], counts["judge_errors"]) == (6, 3, 2, 1)
    assert counts["skipped_by_reason"] == {"no_evaluation_method": 1, "no_text_ground_truth": 1, "not_qa": 1}
    assert summary["accuracy"] == pytest.approx((1 + 0 + 0.5) / 3)
    errors = {e["id"]: e for e in summary["errors"]}
    assert set(errors) == {"hang-4", "crash-5", "nonumber-6"}
    assert errors["hang-4"]["kind"] == "watchdog" and "watchdog" in errors["hang-4"]["error"]
    assert "exited 4" in errors["crash-5"]["error"] and "ngc-secret-value" not in errors["crash-5"]["error"]
    assert errors["nonumber-6"]["stage"] == "judge" and "no verdict in 4 replies" in errors["nonumber-6"]["error"]
    assert summary["model_served"] == "fake-vlm-1"
    assert summary["judge_model"] == "scripted:judge-x"
    assert summary["exit_code"] == 3

    # Latency statistics over the four items whose VLM call succeeded, not the killed one.
    lat = read_json(out / "latency_summary.json")
    ok = [r["latency_s"] for r in lat["items"] if r["status"] == "ok"]
    assert len(ok) == 4 and summary["latency_s"]["n"] == 4
    killed = next(r for r in lat["items"] if r["id"] == "hang-4")
    assert 1.9 < killed["latency_s"] < 10
    for q in (50, 90, 95, 99):
        assert summary["latency_s"][f"p{q}"] == pytest.approx(float(np.percentile(ok, q)))
    assert summary["latency_s"]["max"] < killed["latency_s"]

    evaluator = read_json(out / "qa_evaluator_output.json")
    assert evaluator["average_score"] == pytest.approx(0.5)
    scores = {i["id"]: i["score"] for i in evaluator["eval_output_items"]}
    assert scores == {"yes-1": 1.0, "count-2": 0.0, "partial-3": 0.5, "hang-4": None, "crash-5": None,
                      "nonumber-6": None}
    reasoning = {i["id"]: i["reasoning"] for i in evaluator["eval_output_items"]}
    assert "<think>" not in reasoning["count-2"] and "Counts differ" in reasoning["count-2"]

    workflow = {w["id"]: w for w in read_json(out / "workflow_output.json")}
    assert workflow["yes-1"]["generated_answer"] == "yes" and workflow["yes-1"]["answer"] == "yes"
    assert workflow["hang-4"]["generated_answer"] is None and workflow["hang-4"]["status"] == "error"

    rows = list(csv.DictReader(io.StringIO((out / "summary.csv").read_text())))
    assert len(rows) == 1 and rows[0]["model_served"] == "fake-vlm-1" and rows[0]["exit_code"] == "3"
    assert float(rows[0]["accuracy"]) == pytest.approx(0.5)
    for p in (p for p in out.rglob("*") if p.is_file()):  # the lease file included
        assert "ngc-secret-value" not in p.read_text(), p.name


def test_all_ok_exits_zero_after_judge_retries(tmp_path: Path, clips: Path,
                                               write_dataset: Callable[[list[Any]], Path]) -> None:
    dataset = write_dataset([qa_entry("a", "Is it raining? [say:yes]", "yes"),
                             qa_entry("b", "Is it flaky? [say:flaky]", "yes", video="sub/b.mp4"),
                             qa_entry("c", "Is it busy? [say:busy]", "yes")])
    out = tmp_path / "out"
    with scripted_server(tmp_path, "judge-x", JUDGE_RULES) as judge_url:
        res = run_cli(["qa", "run", "--dataset", str(dataset), "--videos", str(clips), "--output-dir", str(out),
                       "--vlm-cmd", vlm_cmd()], _judge_env(judge_url))
    assert res.returncode == 0, res.stderr
    summary = read_json(out / "summary.json")
    assert summary["accuracy"] == 1.0 and summary["counts"]["errors"] == 0
    assert res.stdout.strip() == str(out / "summary.json")


def test_skip_judge_needs_no_judge(tmp_path: Path, clips: Path,
                                   write_dataset: Callable[[list[Any]], Path]) -> None:
    dataset = write_dataset([qa_entry("a", "Is it? [say:yes]"), qa_entry("b", "Slow? [slow]")])
    out = tmp_path / "out"
    res = run_cli(["qa", "run", "--dataset", str(dataset), "--videos", str(clips), "--output-dir", str(out),
                   "--vlm-cmd", vlm_cmd(), "--skip-judge"], {})
    assert res.returncode == 0, res.stderr
    summary = read_json(out / "summary.json")
    assert summary["accuracy"] is None and summary["judge_model"] is None
    assert summary["counts"]["unjudged"] == 2 and summary["latency_s"]["n"] == 2
    assert summary["latency_s"]["max"] >= 0.3


def test_command_errors_are_items_not_the_run(tmp_path: Path, clips: Path,
                                              write_dataset: Callable[[list[Any]], Path]) -> None:
    """Bad stdout, a missing clip and shell metacharacters in a question: each costs one item."""
    marker = tmp_path / "pwned"
    question = f"it's \"$(touch {marker})\" `touch {marker}`; touch {marker} [echo]"
    dataset = write_dataset([qa_entry("garbage", "Say? [garbage]"), qa_entry("missing", "Where? [say:x]",
                             video="nope.mp4"), qa_entry("quoted", question), qa_entry("folder", "Where? [say:x]",
                             video="sub")])
    out = tmp_path / "out"
    res = run_cli(["qa", "run", "--dataset", str(dataset), "--videos", str(clips), "--output-dir", str(out),
                   "--vlm-cmd", vlm_cmd(), "--skip-judge", "--limit", "4"], {})
    assert res.returncode == 3
    assert not marker.exists()
    workflow = {w["id"]: w for w in read_json(out / "workflow_output.json")}
    assert workflow["quoted"]["generated_answer"] == question
    assert workflow["garbage"]["error_kind"] == "bad_output" and "no JSON" in workflow["garbage"]["error"]
    assert workflow["missing"]["error_kind"] == "video" and "nope.mp4" in workflow["missing"]["error"]
    assert workflow["folder"]["error"] == "video sub is a folder, not a video file"


def test_limit_selects_first_items(tmp_path: Path, clips: Path,
                                   write_dataset: Callable[[list[Any]], Path]) -> None:
    dataset = write_dataset([qa_entry(str(i), f"Q{i}? [say:yes]") for i in range(5)])
    out = tmp_path / "out"
    res = run_cli(["qa", "run", "--dataset", str(dataset), "--videos", str(clips), "--output-dir", str(out),
                   "--vlm-cmd", vlm_cmd(), "--skip-judge", "--limit", "2"], {})
    assert res.returncode == 0, res.stderr
    summary = read_json(out / "summary.json")
    assert summary["counts"]["selected"] == 2 and summary["counts"]["not_selected_by_limit"] == 3
    assert [w["id"] for w in read_json(out / "workflow_output.json")] == ["0", "1"]


@pytest.mark.parametrize("command", ["run", "judge"])
def test_help_has_an_example(command: str) -> None:
    res = run_cli(["qa", command, "--help"], {})
    assert res.returncode == 0 and f"benchcheck qa {command} --" in res.stdout
