"""Real servers on loopback for the serve / openai-engine tests: subprocesses of the
``benchcheck`` CLI, or an aiohttp app on a thread of the test process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from loopback import free_port, wait_health

SCRIPTED_RULES = [
    {"match": "capital of France", "reply": "Paris"},
    {"match": "flaky429", "error": {"status": 429, "message": "rate limited"}, "times": 2},
    {"match": "flaky503", "error": {"status": 503, "message": "warming up"}, "times": 2},
    {"match": "once400", "error": {"status": 400, "message": "bad field"}, "times": 1},
    {"match": "always500", "error": {"status": 500, "message": "broken"}},
    {"match": "forbidden", "error": {"status": 403, "message": "no access"}},
    {"match": "hang", "delay_s": 30.0},
    {"match": "slowish", "delay_s": 0.4},
    {"match": "Question:", "letters": {"A": -0.25, "B": -2.0, " C": -3.5, "(D": -5.0}},
    {"match": "", "reply": "fallback", "letters": {"A": -1.0, "B": -1.0}},
]






@contextmanager
def cli_server(*args: str, log: Path | None = None) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``benchcheck serve ARGS --port <free>`` as a subprocess; yields (base URL, process)."""
    port = free_port()
    cmd = [sys.executable, "-c", "from benchcheck.cli import main; main()", "serve", *args, "--port", str(port)]
    out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_health(url, proc)
        yield url, proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        if log:
            out.close()  # type: ignore[union-attr]


