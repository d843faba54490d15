"""Crash safety: ``qa run`` killed at any moment, then rerun, gives the uninterrupted result."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from qa_servers import qa_entry, read_json, vlm_cmd

from benchcheck.qa.state import ANSWERS


def _cmd(dataset: Path, clips: Path, out: Path) -> list[str]:
    return [sys.executable, "-c", "from benchcheck.cli import main; main()", "qa", "run", "--dataset", str(dataset),
            "--videos", str(clips), "--output-dir", str(out), "--vlm-cmd", vlm_cmd(), "--skip-judge"]


def _stable(out: Path) -> list[dict[str, Any]]:
    return [{k: w[k] for k in ("id", "generated_answer", "status")} for w in read_json(out / "workflow_output.json")]


def _slow_run(tmp_path: Path, clips: Path, write_dataset: Callable[[list[Any]], Path],
              ) -> tuple[Path, Path, dict[str, str], Path, subprocess.Popen[bytes]]:
    """A run of 8 slow items started in its own session, each VLM call logged: (dataset, call
    log, environment, output folder, process)."""
    dataset = write_dataset([qa_entry(str(i), f"Q{i}? [slow] [say:a{i}]") for i in range(8)])
    calllog = tmp_path / "calls.txt"
    env = {**os.environ, "QA_CALLLOG": str(calllog)}
    out = tmp_path / "out"
    proc = subprocess.Popen(_cmd(dataset, clips, out), env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return dataset, calllog, env, out, proc


def test_killed_run_resumes_without_duplicates(tmp_path: Path, clips: Path,
                                               write_dataset: Callable[[list[Any]], Path]) -> None:
    dataset, calllog, env, out, proc = _slow_run(tmp_path, clips, write_dataset)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        answers = out / ANSWERS
        if answers.exists() and len(answers.read_text().splitlines()) >= 3:
            break
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    answered = len((out / ANSWERS).read_text().splitlines())
    assert 3 <= answered < 8, "the kill should land mid-run"
    assert not (out / "summary.json").exists()

    rerun = subprocess.run(_cmd(dataset, clips, out), env=env, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    reference = tmp_path / "ref"
    subprocess.run(_cmd(dataset, clips, reference), env={**os.environ}, capture_output=True, timeout=120, check=True)
    assert _stable(out) == _stable(reference)
    assert read_json(out / "summary.json")["counts"] == read_json(reference / "summary.json")["counts"]
    # Each item was asked once, except at most the one in flight when the run was killed.
    asked = [json.loads(line) for line in calllog.read_text().splitlines()]
    assert len(set(asked)) == 8 and len(asked) <= 9
    rows = [json.loads(line) for line in (out / ANSWERS).read_text().splitlines()]
    assert len({r["item_id"] for r in rows}) == 8 and len(rows) == 8


def test_two_runs_on_one_folder_ask_each_item_once(tmp_path: Path, clips: Path,
                                                   write_dataset: Callable[[list[Any]], Path]) -> None:
    """A second ``qa run`` started on a folder another live run is writing stops before it asks
    anything (exit 2, naming the holder); the first run's results are those of a run alone."""
    dataset, calllog, env, out, first = _slow_run(tmp_path, clips, write_dataset)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (out / ANSWERS).exists():
            time.sleep(0.02)
        second = subprocess.run(_cmd(dataset, clips, out), env=env, capture_output=True, text=True, timeout=120)
        assert first.wait(timeout=120) == 0
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    assert second.returncode == 2, second.stderr
    assert "another `benchcheck qa` run is writing it" in second.stderr and f"pid={first.pid}" in second.stderr
    asked = calllog.read_text().splitlines()
    assert len(asked) == len(set(asked)) == 8
    rows = [json.loads(line) for line in (out / ANSWERS).read_text().splitlines()]
    assert len(rows) == 8 and all(r["status"] == "ok" for r in rows)
    assert read_json(out / "summary.json")["counts"]["unjudged"] == 8  # --skip-judge: answered, not scored
