"""A verdict cached for an item whose question holds secret-shaped text is found again.

``qa run`` keyed a verdict by the question as asked, ``qa judge`` by the question read back from
``run_config.json``, where it is stored masked: each missed the other's verdict and paid the
judge again for it (the score was right; the call was not free).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from qa_servers import RecordingHost, qa_entry, read_json, repeat_grader, run_cli, vlm_cmd

from loopback import thread_server

HF_WORD = "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ0123"
SK_WORD = "sk-" + "abcdefghijklmnopqrstuvwx"  # masked as the value of OPENAI_API_KEY
_GRADER = repeat_grader("judge-v2")


def _dataset(write_dataset: Callable[[list[Any]], Path]) -> Path:
    return write_dataset([qa_entry("hf", f"Does the sign read {HF_WORD}? [say:yes]"),
                          qa_entry("sk", f"Is {SK_WORD} on the screen? [say:no]", ground_truth="no"),
                          qa_entry("plain", "Is it blue? [say:yes]")])


def _run(dataset: Path, clips: Path, out: Path, env: dict[str, str], *extra: str) -> Any:
    return run_cli(["qa", "run", "--dataset", str(dataset), "--videos", str(clips), "--output-dir", str(out),
                    "--vlm-cmd", vlm_cmd(), *extra], env)


def _env(url: str) -> dict[str, str]:
    return {"EVAL_LLM_JUDGE_BASE_URL": url, "EVAL_LLM_JUDGE_NAME": "judge-x", "OPENAI_API_KEY": SK_WORD}


def test_qa_judge_reuses_the_verdicts_of_qa_run(tmp_path: Path, clips: Path,
                                                write_dataset: Callable[[list[Any]], Path]) -> None:
    dataset, out = _dataset(write_dataset), tmp_path / "out"
    host = RecordingHost("judge-v2", _GRADER)
    with thread_server(host.app()) as url:
        run = _run(dataset, clips, out, _env(url))
        assert run.returncode == 0, run.stderr
        assert len(host.chats()) == 3, "one judge call per item"
        assert HF_WORD not in (out / "run_config.json").read_text()
        assert SK_WORD not in (out / "run_config.json").read_text()
        for _ in range(2):
            rejudge = run_cli(["qa", "judge", "--output-dir", str(out)], _env(url))
            assert rejudge.returncode == 0, rejudge.stderr
            assert len(host.chats()) == 3, "qa judge asked again for a verdict qa run had cached"
            assert "judge: 0 calls, 3 verdicts from the cache" in rejudge.stdout + rejudge.stderr
    summary = read_json(out / "summary.json")
    assert summary["counts"]["scored"] == 3 and summary["accuracy"] == 1.0


def test_a_rerun_reuses_the_verdicts_of_qa_judge(tmp_path: Path, clips: Path,
                                                 write_dataset: Callable[[list[Any]], Path]) -> None:
    dataset, out = _dataset(write_dataset), tmp_path / "out"
    host = RecordingHost("judge-v2", _GRADER)
    with thread_server(host.app()) as url:
        latency_only = _run(dataset, clips, out, _env(url), "--skip-judge")
        assert latency_only.returncode == 0, latency_only.stderr
        assert host.chats() == []
        first = run_cli(["qa", "judge", "--output-dir", str(out)], _env(url))
        assert first.returncode == 0, first.stderr
        assert len(host.chats()) == 3, "one judge call per item"
        second = run_cli(["qa", "judge", "--output-dir", str(out)], _env(url))
        assert second.returncode == 0, second.stderr
        assert len(host.chats()) == 3, "a second qa judge makes no judge call"
        rerun = _run(dataset, clips, out, _env(url))
        assert rerun.returncode == 0, rerun.stderr
        assert len(host.chats()) == 3, "the rerun asked again for a verdict qa judge had cached"
    summary = read_json(out / "summary.json")
    assert summary["counts"]["scored"] == 3 and summary["accuracy"] == 1.0
