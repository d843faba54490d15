"""Hostile input 5: a secret whose value is an ordinary word (``DB_PASSWORD=answer``, ``=status``)
must not corrupt the QA outputs: JSON keys are never masked, and a value too short or too common
to be a secret is not masked in free text either; real secrets still are."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from qa_servers import qa_entry, read_json, vlm_cmd

from benchcheck.masking import Masker, could_be_secret, secret_values


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``benchcheck ARGS`` with exactly ``env`` plus PATH, HOME and this checkout's PYTHONPATH."""
    full = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "PYTHONPATH") if k in os.environ}
    return subprocess.run([sys.executable, "-m", "benchcheck", *args], capture_output=True, text=True,
                          env={**full, **env}, timeout=120)


@pytest.mark.parametrize(("value", "masked"), [
    ("answer", False), ("status", False), ("password", False), ("12345678", False), ("true", False),
    ("localhost", False), ("hunter2-x", True), ("sk-12345678", True), ("correcthorsebatterystaple", True),
    ("Abcdefgh1", True),
])
def test_the_rule(value: str, masked: bool) -> None:
    assert could_be_secret(value) is masked
    assert (value in secret_values({"DB_PASSWORD": value})) is masked


def test_keys_and_ordinary_words_stay() -> None:
    m = Masker.from_env({"DB_PASSWORD": "answer", "Q_TOKEN": "status", "NGC_API_KEY": "nvapi-secret-4242"})
    row = {"answer": "The answer is A", "status": "ok", "model": "m", "note": "key nvapi-secret-4242"}
    assert m.value(row) == {**row, "note": "key ***"}
    assert m.text('{"answer": "yes", "status": "ok"}') == '{"answer": "yes", "status": "ok"}'
    assert m.text("DB_PASSWORD=answer") == "DB_PASSWORD=***"  # the assignment still shows it is one


@pytest.mark.parametrize("word", ["answer", "status"])
def test_a_run_with_a_word_as_password_is_clean_and_resumes(word: str, tmp_path: Path, clips: Path,
                                                            write_dataset: Callable[[list[Any]], Path]) -> None:
    dataset = write_dataset([qa_entry("a", "Is there a status light? [say:yes]"),
                             qa_entry("b", "What is the answer? [say:the answer is 3]")])
    out = tmp_path / "out"
    calls = tmp_path / "calls.log"
    args = ["qa", "run", "--dataset", str(dataset), "--videos", str(clips), "--output-dir", str(out),
            "--vlm-cmd", vlm_cmd(), "--skip-judge"]
    env = {"DB_PASSWORD": word, "QA_CALLLOG": str(calls)}
    first = _run(args, env)
    assert first.returncode == 0, first.stderr
    summary = read_json(out / "summary.json")
    assert summary["counts"]["vlm_errors"] == 0 and summary["counts"]["errors"] == 0
    workflow = read_json(out / "workflow_output.json")
    got = {r["id"]: r["generated_answer"] for r in (workflow if isinstance(workflow, list) else workflow["items"])}
    assert got == {"a": "yes", "b": "the answer is 3"}
    rows = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
    assert all("status" in r and "***" not in json.dumps(r) for r in rows)
    again = _run(args, env)  # nothing is asked again
    assert again.returncode == 0, again.stderr
    assert len(calls.read_text().splitlines()) == 2
