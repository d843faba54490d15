"""The ``--vlm-cmd`` child: nothing of it outlives its item, its answer survives a child holding
stdout, and it never sees the judge's or any secret-named variable (real processes)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from qa_servers import alive, qa_entry, read_json, run_cli

from benchcheck.masking import child_environment
from benchcheck.qa.proc import run_with_watchdog


def _leaver(tmp: Path) -> str:
    """A shell script that answers and exits, leaving behind: a setsid child holding stdout, a
    double-forked setsid orphan, and a setsid child that also cleared its environment."""
    return (f"setsid sh -c 'echo $$ > {tmp}/p1; exec sleep 300' & "
            f"(setsid sh -c 'echo $$ > {tmp}/p2; exec sleep 300' &) ; "
            f"env -i setsid sh -c 'echo $$ > {tmp}/p3; exec sleep 300' & "
            "sleep 0.6; echo '{\"answer\": \"kept\", \"model\": \"m\"}'")


def _pids(tmp: Path) -> list[int]:
    return [int((tmp / f"p{i}").read_text()) for i in (1, 2, 3)]


def _wait_gone(pids: list[int], within_s: float = 3.0) -> list[int]:
    deadline = time.monotonic() + within_s
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def test_setsid_children_holding_stdout_keep_the_answer_and_die(tmp_path: Path) -> None:
    """In-process (no subreaper: the test process must not adopt orphans): the process-table
    search. The subreaper path is `qa run`'s, below."""
    t0 = time.monotonic()
    res = asyncio.run(run_with_watchdog(["/bin/sh", "-c", _leaver(tmp_path)], 30))
    assert time.monotonic() - t0 < 10
    assert not res.killed and res.returncode == 0
    assert b'{"answer": "kept", "model": "m"}' in res.stdout
    pids = _pids(tmp_path)
    assert _wait_gone(pids, 0.5) == [], "a process of the item outlived it"


def test_watchdog_kills_setsid_children_too(tmp_path: Path) -> None:
    script = f"setsid sh -c 'echo $$ > {tmp_path}/p1; exec sleep 300' & sleep 300"
    t0 = time.monotonic()
    res = asyncio.run(run_with_watchdog(["/bin/sh", "-c", script], 0.8))
    assert res.killed and time.monotonic() - t0 < 5
    assert _wait_gone([int((tmp_path / "p1").read_text())], 0.5) == []


SUBREAPER_RUN = """
import asyncio, sys
from benchcheck.qa import proc
assert proc.enable_subreaper() and proc._CHILDREN_FILES
res = asyncio.run(proc.run_with_watchdog(["/bin/sh", "-c", sys.argv[1]], 30))
sys.stdout.buffer.write(res.stdout)
"""


def test_subreaper_path_in_its_own_process(tmp_path: Path) -> None:
    """As `qa run` runs it: a subreaper, orphans found among its children by their token."""
    import subprocess

    res = subprocess.run([sys.executable, "-c", SUBREAPER_RUN, _leaver(tmp_path)], capture_output=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    assert b'"answer": "kept"' in res.stdout and b"Event loop is closed" not in res.stderr
    assert _wait_gone(_pids(tmp_path)) == []


def test_through_the_cli_no_orphan_no_event_loop_noise(tmp_path: Path, clips: Path,
                                                       write_dataset: Callable[[list[Any]], Path]) -> None:
    ds = write_dataset([qa_entry("a", "Is it?")])
    out = tmp_path / "out"
    template = f"sh -c {json.dumps(_leaver(tmp_path))} sh {{video}} {{question}}"
    res = run_cli(["qa", "run", "--dataset", str(ds), "--videos", str(clips), "--output-dir", str(out),
                   "--vlm-cmd", template, "--skip-judge", "--timeout", "20"], {}, timeout_s=60)
    assert res.returncode == 0, res.stderr
    assert "Event loop is closed" not in res.stderr and "Traceback" not in res.stderr
    assert read_json(out / "workflow_output.json")[0]["generated_answer"] == "kept"
    assert _wait_gone(_pids(tmp_path)) == []


SECRET_ENV = {"EVAL_LLM_JUDGE_API_KEY": "judge-key-9876543", "EVAL_LLM_JUDGE_BASE_URL": "http://127.0.0.1:9",
              "EVAL_LLM_JUDGE_NAME": "judge-x", "OPENAI_API_KEY": "sk-openai-9876543", "HF_TOKEN": "hf_tok_9876543",
              "NGC_API_KEY": "nvapi-9876543", "DB_PASSWORD": "hunter2-9876543", "APP_SECRET": "app-secret-987654",
              "AWS_SECRET_ACCESS_KEY": "aws-9876543", "MYVLM_CONFIG": "/etc/myvlm.yaml",
              "TOKENIZERS_PARALLELISM": "false"}


def test_the_child_environment_has_no_secrets_unless_passed() -> None:
    env = child_environment({**SECRET_ENV, "PATH": "/bin"}, keep=["NGC_API_KEY"])
    assert sorted(env) == ["MYVLM_CONFIG", "NGC_API_KEY", "PATH", "TOKENIZERS_PARALLELISM"]


def test_a_command_that_prints_its_environment(tmp_path: Path, clips: Path,
                                               write_dataset: Callable[[list[Any]], Path]) -> None:
    ds = write_dataset([qa_entry("a", "Env?")])
    script = "import json,os; print(json.dumps({'answer': json.dumps(sorted(os.environ))}))"
    template = f"{sys.executable} -c \"{script}\" {{video}} {{question}}"
    out = tmp_path / "out"
    res = run_cli(["qa", "run", "--dataset", str(ds), "--videos", str(clips), "--output-dir", str(out),
                   "--vlm-cmd", template, "--skip-judge", "--vlm-env", "NGC_API_KEY"], SECRET_ENV)
    assert res.returncode == 0, res.stderr
    names = set(json.loads(read_json(out / "workflow_output.json")[0]["generated_answer"]))
    assert {"MYVLM_CONFIG", "TOKENIZERS_PARALLELISM", "NGC_API_KEY", "PATH", "HOME"} <= names
    leaked = names & (set(SECRET_ENV) - {"MYVLM_CONFIG", "TOKENIZERS_PARALLELISM", "NGC_API_KEY"})
    assert not leaked
    assert read_json(out / "summary.json")["settings"]["vlm_env_passed"] == ["NGC_API_KEY"]


def test_vlm_env_is_documented_and_checked(tmp_path: Path, clips: Path,
                                           write_dataset: Callable[[list[Any]], Path]) -> None:
    helptext = run_cli(["qa", "run", "--help"], {}).stdout
    assert "--vlm-env" in helptext and "EVAL_LLM_JUDGE_" in helptext and "*_API_KEY" in helptext
    ds = write_dataset([qa_entry("a", "q")])
    res = run_cli(["qa", "run", "--dataset", str(ds), "--videos", str(clips), "--output-dir", str(tmp_path / "o"),
                   "--vlm-cmd", "echo {video} {question}", "--skip-judge", "--vlm-env", "QA_UNSET_VAR_X"], {})
    assert res.returncode == 2 and "QA_UNSET_VAR_X" in res.stderr


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "HF_TOKEN", "X_SECRET", "MY_PASSWORD_FILE", "VLM_KEY"])
def test_secret_names(name: str) -> None:
    assert child_environment({name: "v"}) == {}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the exec wrapper is Linux's")
def test_latency_starts_at_the_commands_exec_not_the_wrappers_start() -> None:
    """The item's latency is the command's: the exec wrapper's own interpreter start (a fresh
    Python importing ctypes, 15-40 ms) was counted in every item's latency_s."""
    import subprocess

    wrapper = []
    for _ in range(5):
        t = time.monotonic()
        subprocess.run([sys.executable, "-I", "-S", "-c", "import ctypes"], check=True)
        wrapper.append(time.monotonic() - t)
    runs = [asyncio.run(run_with_watchdog(["/bin/true"], 10)) for _ in range(5)]
    assert all(r.returncode == 0 and not r.killed for r in runs)
    # /bin/true from exec to exit is a millisecond or two; with the wrapper counted, at least
    # one interpreter start.
    assert min(r.elapsed_s for r in runs) < 0.5 * min(wrapper), ([r.elapsed_s for r in runs], wrapper)


def test_a_run_cancelled_while_its_command_starts_ends_it_and_leaves_no_transport(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Ctrl-C or SIGTERM cancels the items in flight; one whose command was still starting (the
    # wrapper's exec handshake) left the command running and its transport open, closed only by
    # the garbage collector after the loop had ended: "RuntimeError: Event loop is closed" on
    # stderr after the run's "interrupted:" line (a rare failure of the qa signal test).
    import gc

    from benchcheck.qa import proc

    real = proc._read_until_exec

    def slow(fd: int) -> tuple[bytes, float]:
        got = real(fd)
        time.sleep(1.0)  # the handshake still pending when the task is cancelled
        return got

    monkeypatch.setattr(proc, "_read_until_exec", slow)
    pidfile = tmp_path / "pid"
    noise: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: noise.append(f"{u.exc_type.__name__}: {u.exc_value}"))

    async def main() -> None:
        task = asyncio.create_task(run_with_watchdog(
            [sys.executable, "-c", f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); "
                                   "time.sleep(60)"], 100.0))
        deadline = time.monotonic() + 10
        while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError as e:
            kept.append(e)  # as the CLI's KeyboardInterrupt keeps the frames until the loop is gone

    kept: list[BaseException] = []
    asyncio.run(main())
    assert len(kept) == 1
    kept.clear()
    gc.collect()
    assert _wait_gone([int(pidfile.read_text())]) == [], "the command outlived its cancelled run"
    assert noise == []
