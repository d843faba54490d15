"""The command-line VLM runner: template splitting (no shell), output parsing and the watchdog
(real processes)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from qa_servers import qa_entry, read_json, run_cli

from benchcheck.masking import Masker
from benchcheck.qa.dataset import QAItem
from benchcheck.qa.errors import PreconditionError
from benchcheck.qa.proc import run_with_watchdog
from benchcheck.qa.vlm import VLMOptions, make_vlm
from benchcheck.qa.vlm_cmd import (
    CommandVLM,
    check_template,
    fill_template,
    parse_vlm_output,
    split_template,
)

_VALUES = {"video": "/d/a b.mp4", "num_frames": "8", "timeout": "5"}


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=60))
def test_each_placeholder_is_one_argument(question: str) -> None:
    words = split_template("vlm --q {question} --v {video} --n {num_frames}")
    argv = fill_template(words, {"question": question, **_VALUES})
    assert argv == ["vlm", "--q", question, "--v", "/d/a b.mp4", "--n", "8"]


def test_other_braces_are_kept() -> None:
    words = split_template("sh -c 'echo ${HOME}' {video} '{\"k\": 1}' {question}")
    argv = fill_template(words, {"question": "q", "video": "v", "num_frames": "1", "timeout": "1"})
    assert argv == ["sh", "-c", "echo ${HOME}", "v", '{"k": 1}', "q"]


def test_template_needs_video_and_question() -> None:
    check_template("x {video} {question}")
    with pytest.raises(ValueError, match=r"\{question\}"):
        check_template("x {video}")


@pytest.mark.parametrize("template", [
    'echo "Q: {question}" {video}',
    "vlm --question={question} {video}",
    "sh -c 'myvlm {video} {question}'",
    "vlm {video}{question}",
    "{video} {question}",
    'vlm "{question} {video}',  # unbalanced quote
    "",
])
def test_placeholder_inside_a_word_is_refused(template: str) -> None:
    with pytest.raises(ValueError, match="--vlm-cmd"):
        split_template(template)
    with pytest.raises(PreconditionError, match="--vlm-cmd"):
        make_vlm(VLMOptions(cmd=template), num_frames=1, timeout_s=5, watchdog_grace_s=1, concurrency=1,
                 redactor=Masker([]), warn=lambda _m: None)


def test_missing_program_is_a_precondition() -> None:
    with pytest.raises(ValueError, match="not found"):
        CommandVLM("/nonexistent/vlm-9f2 {video} {question}", 1, 5, 1, Masker([]))


@pytest.mark.parametrize("template", [
    'echo "{question}" {video}',  # the reviewer's template: quotes around a whole-word placeholder
    "echo {question} {video}",
    "sh -c 'echo \"$1\"' sh {question} {video}",
])
def test_question_is_never_run_by_a_shell(tmp_path: Path, template: str) -> None:
    """A question holding command substitutions and separators reaches the command verbatim; nothing
    in it is executed (the marker file would appear otherwise)."""
    marker = tmp_path / "pwned"
    question = f"x $(touch {marker}) `touch {marker}` y; touch {marker} && id -u | cat > {marker}"
    argv = CommandVLM(template, 1, 5, 1, Masker([])).command_for(_item(tmp_path, question))
    res = asyncio.run(run_with_watchdog(argv, 10))
    assert res.returncode == 0 and not res.killed
    assert not marker.exists()
    assert res.stdout.decode().startswith(question + "\n") or res.stdout.decode().startswith(question + " /")


def test_injection_through_the_cli_does_not_execute(tmp_path: Path, clips: Path) -> None:
    marker = tmp_path / "pwned"
    dataset = tmp_path / "d.json"
    dataset.write_text(json.dumps([qa_entry("a", f"x $(touch {marker}) y")]))
    # The reviewer's shape: the placeholder quoted as a whole word.
    script = "import json,sys; print(json.dumps({'answer': sys.argv[1]}))"
    template = f'{sys.executable} -c "{script}" "{{question}}" {{video}}'
    res = run_cli(["qa", "run", "--dataset", str(dataset), "--videos", str(clips), "--output-dir",
                   str(tmp_path / "out"), "--vlm-cmd", template, "--skip-judge"], {})
    assert res.returncode == 0, res.stderr
    assert not marker.exists()
    assert read_json(tmp_path / "out" / "workflow_output.json")[0]["generated_answer"] == f"x $(touch {marker}) y"
    bad = run_cli(["qa", "run", "--dataset", str(dataset), "--videos", str(clips), "--output-dir",
                   str(tmp_path / "out2"), "--vlm-cmd", 'echo "A: {question}" {video}', "--skip-judge"], {})
    assert bad.returncode == 2 and "placeholder inside it" in bad.stderr
    assert not marker.exists()


@pytest.mark.parametrize(("stdout", "answer", "model"), [
    ('{"answer": "yes", "model": "m1"}', "yes", "m1"),
    ('loading...\nwarming up\n{"answer": "no", "model": "m2"}\n', "no", "m2"),
    ('{\n  "answer": "pretty",\n  "model": "m3"\n}\n', "pretty", "m3"),
    ('{"answer": 3}', "3", None),
    ('{"answer": "a", "model": ""}', "a", None),
])
def test_parse_output(stdout: str, answer: str, model: str | None) -> None:
    assert parse_vlm_output(stdout) == (answer, model)


@pytest.mark.parametrize("stdout", ["", "yes", '{"model": "m"}', '{"answer": null}', '{"answer": ["a"]}', "[1]"])
def test_parse_output_refuses(stdout: str) -> None:
    with pytest.raises(ValueError):
        parse_vlm_output(stdout)


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"


def test_watchdog_kills_the_group_on_time(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    t0 = time.monotonic()
    res = asyncio.run(run_with_watchdog(["/bin/sh", "-c", f"sleep 60 & echo $! > {pidfile}; sleep 60"], 0.5))
    assert res.killed and res.returncode is None
    assert time.monotonic() - t0 < 5
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(pid)


def test_background_child_holding_pipes_does_not_stall(tmp_path: Path) -> None:
    """The main process answered and exited; a leftover child keeps stdout open."""
    t0 = time.monotonic()
    res = asyncio.run(run_with_watchdog(["/bin/sh", "-c", "sleep 30 & echo '{\"answer\": \"ok\"}'"], 20))
    assert not res.killed and res.returncode == 0
    assert time.monotonic() - t0 < 5
    assert parse_vlm_output(res.stdout.decode()) == ("ok", None)


def _item(tmp_path: Path, question: str) -> QAItem:
    video = tmp_path / "v.mp4"
    video.write_bytes(b"not really a video")
    return QAItem("i1", question, "gt", "v.mp4", video, ("qa",))


def test_exit_code_and_signal_are_errors(tmp_path: Path) -> None:
    red = Masker(["s3cr3t-value"])
    vlm = CommandVLM("sh -c 'echo token s3cr3t-value >&2; exit 7' {video} {question}", 1, 5, 1, red)
    ans = asyncio.run(vlm.answer(_item(tmp_path, "q")))
    assert ans.status == "error" and ans.error_kind == "exit"
    assert ans.error is not None and "exited 7" in ans.error and "s3cr3t" not in ans.error
    for template in ("sh -c 'kill -SEGV $$' {video} {question}",
                     "sh -c 'sh -c \"kill -SEGV \\$\\$\"; exit $?' {video} {question}"):
        ans = asyncio.run(CommandVLM(template, 1, 5, 1, red).answer(_item(tmp_path, "q")))
        assert ans.error is not None and "SIGSEGV" in ans.error, ans.error


def test_timeout_placeholder_and_env(tmp_path: Path) -> None:
    vlm = CommandVLM("sh -c 'printf \"{\\\"answer\\\": \\\"%s|%s\\\", \\\"model\\\": \\\"m\\\"}\" \"$1\" \"$2\"' "
                     "sh {timeout} {num_frames} {video} {question}", 16, 2.5, 1, Masker([]))
    ans = asyncio.run(vlm.answer(_item(tmp_path, "q")))
    assert (ans.status, ans.answer, ans.model) == ("ok", "2.5|16", "m")
    assert os.getpgrp() != 0
