"""The judge as a recording host: which headers and bodies reach it, the cache, the refusal hint."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from qa_servers import (
    RecordingHost,
    qa_entry,
    read_json,
    repeat_grader,
    run_cli,
    scripted_server,
    vlm_cmd,
)

from loopback import thread_server

SECRETS = {
    "NGC_API_KEY": "nvapi-ngc-secret-4242",
    "OPENAI_API_KEY": "sk-openai-secret-4242",
    "HF_TOKEN": "hf_token_secret_4242",
    "NVDATASET_API_KEY": "nvdataset-secret-4242",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-4242",
}
JUDGE_KEY = "judge-key-only-4242"


_GRADER = repeat_grader("judge-reported-v2")


def _run(dataset: Path, clips: Path, out: Path, env: dict[str, str], *extra: str) -> Any:
    return run_cli(["qa", "run", "--dataset", str(dataset), "--videos", str(clips), "--output-dir", str(out),
                    "--vlm-cmd", vlm_cmd(), *extra], env)


def test_only_the_judge_key_reaches_the_judge_host(tmp_path: Path, clips: Path,
                                                   write_dataset: Callable[[list[Any]], Path]) -> None:
    dataset = write_dataset([qa_entry("a", "Is it? [say:yes]"), qa_entry("leak", "Key? [leak]"),
                             qa_entry("crash", "Boom? [crash]"), qa_entry("b", "No? [say:no]")])
    host = RecordingHost("judge-reported-v2", _GRADER)
    out = tmp_path / "out"
    with thread_server(host.app()) as url:
        env = {**SECRETS, "EVAL_LLM_JUDGE_BASE_URL": url, "EVAL_LLM_JUDGE_NAME": "judge-x",
               "EVAL_LLM_JUDGE_API_KEY": JUDGE_KEY}
        res = _run(dataset, clips, out, env)
    assert res.returncode == 3  # the crash item
    assert len(host.chats()) == 3  # every answered item was judged; the crashed one was not
    assert all(c["temperature"] == 0 for c in host.chats())
    for r in host.requests:
        assert r.headers.get("Authorization") == f"Bearer {JUDGE_KEY}"
        seen = json.dumps(r.headers) + r.body.decode("utf-8", "replace")
        for name, value in SECRETS.items():
            assert value not in seen, f"{name} reached the judge host"
        assert seen.count(JUDGE_KEY) == 1, "the judge key goes in the Authorization header only"
    summary = read_json(out / "summary.json")
    assert summary["judge_model"] == "judge-reported-v2"
    assert summary["judge_model_requested"] == "judge-x"
    assert summary["accuracy"] == pytest.approx(1 / 3)
    every_output = "".join(p.read_text() for p in out.rglob("*") if p.is_file()) + res.stdout + res.stderr
    for value in [*SECRETS.values(), JUDGE_KEY]:
        assert value not in every_output


def test_judge_redirect_is_not_followed(tmp_path: Path, clips: Path,
                                        write_dataset: Callable[[list[Any]], Path]) -> None:
    """A judge host that redirects elsewhere: the key must not travel to the other host."""
    dataset = write_dataset([qa_entry("a", "Is it? [say:yes]")])
    other = RecordingHost("other", _GRADER)
    with thread_server(other.app()) as other_url:
        judge = RecordingHost("judge", _GRADER, redirect_to=other_url)
        with thread_server(judge.app()) as url:
            env = {**SECRETS, "EVAL_LLM_JUDGE_BASE_URL": url, "EVAL_LLM_JUDGE_NAME": "judge-x",
                   "EVAL_LLM_JUDGE_API_KEY": JUDGE_KEY}
            res = _run(dataset, clips, tmp_path / "out", env)
    assert res.returncode == 3
    assert judge.requests and not other.requests
    summary = read_json(tmp_path / "out" / "summary.json")
    assert summary["counts"]["judge_errors"] == 1 and summary["accuracy"] is None
    # The error names where the redirect pointed and that it is not followed (the user gives the final URL).
    (error,) = summary["errors"]
    assert error["stage"] == "judge" and "not followed" in error["error"], error
    assert "redirect" in error["error"] and f"{other_url}/v1/chat/completions" in error["error"], error


def test_rerun_and_qa_judge_reuse_cache(tmp_path: Path, clips: Path,
                                        write_dataset: Callable[[list[Any]], Path]) -> None:
    dataset = write_dataset([qa_entry(str(i), f"Q{i}? [say:{'yes' if i % 2 else 'no'}]") for i in range(4)])
    host = RecordingHost("judge-reported-v2", _GRADER)
    out = tmp_path / "out"
    calllog = tmp_path / "vlm_calls.txt"
    with thread_server(host.app()) as url:
        env = {"EVAL_LLM_JUDGE_BASE_URL": url, "EVAL_LLM_JUDGE_NAME": "judge-x", "QA_CALLLOG": str(calllog)}
        first = _run(dataset, clips, out, env)
        assert first.returncode == 0, first.stderr
        assert len(host.chats()) == 4 and len(calllog.read_text().splitlines()) == 4
        summary1 = read_json(out / "summary.json")

        rejudge = run_cli(["qa", "judge", "--output-dir", str(out)], env)
        assert rejudge.returncode == 0, rejudge.stderr
        assert len(host.chats()) == 4, "qa judge must reuse cached verdicts"
        summary2 = read_json(out / "summary.json")
        assert summary2["accuracy"] == summary1["accuracy"] == 0.5
        assert summary2["latency_s"] == summary1["latency_s"]

        rerun = _run(dataset, clips, out, env)
        assert rerun.returncode == 0
        assert len(calllog.read_text().splitlines()) == 4, "answered items are not asked again"
        assert len(host.chats()) == 4

        other = run_cli(["qa", "judge", "--output-dir", str(out)], {**env, "EVAL_LLM_JUDGE_NAME": "judge-y"})
        assert other.returncode == 0
        assert len(host.chats()) == 8, "another judge model is a cache miss"
        assert {c["model"] for c in host.chats()[4:]} == {"judge-y"}
        assert read_json(out / "summary.json")["judge_model_requested"] == "judge-y"


def test_changed_vlm_settings_ask_again(tmp_path: Path, clips: Path,
                                        write_dataset: Callable[[list[Any]], Path]) -> None:
    dataset = write_dataset([qa_entry("a", "Q? [say:yes]")])
    calllog = tmp_path / "calls.txt"
    env = {"QA_CALLLOG": str(calllog)}
    for frames in ("4", "4", "8"):
        res = _run(dataset, clips, tmp_path / "out", env, "--skip-judge", "--num-frames", frames)
        assert res.returncode == 0
    assert len(calllog.read_text().splitlines()) == 2


@pytest.mark.parametrize(("status", "message", "hinted"), [
    (403, "key_model_access_denied: this key cannot use judge-x", True),
    (400, "Invalid model name passed in model=judge-x", True),
    (404, "The model `judge-x` does not exist.", True),
    (400, "messages: bad field", False),
])
def test_refusal_on_every_item_hints_at_models(tmp_path: Path, clips: Path,
                                               write_dataset: Callable[[list[Any]], Path],
                                               status: int, message: str, hinted: bool) -> None:
    dataset = write_dataset([qa_entry("a", "Is it? [say:yes]"), qa_entry("b", "No? [say:no]")])
    rules = [{"match": "", "error": {"status": status, "message": message}}]
    out = tmp_path / "out"
    with scripted_server(tmp_path, "judge-x", rules) as url:
        res = _run(dataset, clips, out, {"EVAL_LLM_JUDGE_BASE_URL": url, "EVAL_LLM_JUDGE_NAME": "judge-x"})
    assert res.returncode == 3
    summary = read_json(out / "summary.json")
    assert summary["counts"]["judge_errors"] == 2 and summary["counts"]["vlm_errors"] == 0
    hint = summary["judge_hint"]
    if hinted:
        assert f"GET {url}/v1/models" in hint and "scripted:judge-x" in hint
        assert "EVAL_LLM_JUDGE_NAME" in hint and "GET" in res.stderr
    else:
        assert hint is None
    # The VLM answers are kept: only scoring was lost.
    assert [w["generated_answer"] for w in read_json(out / "workflow_output.json")] == ["yes", "no"]
