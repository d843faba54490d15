"""Real servers on loopback for the serve / openai-engine tests: subprocesses of the
``benchcheck`` CLI, or an aiohttp app on a thread of the test process."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from benchcheck.engines.base import Failure, GenerateRequest, Generation, LetterScores, ScoreRequest
from benchcheck.engines.rules.scripted import ScriptedEngine
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


T = TypeVar("T")


async def until(ready: Callable[[], bool], timeout_s: float = 30.0) -> None:
    """Wait, on the event loop, until ``ready()``; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        assert time.monotonic() < deadline, "timed out waiting on the server"
        await asyncio.sleep(0.01)


class HeldEngine(ScriptedEngine):
    """The scripted engine, whose requests with ``hold`` in the prompt wait until ``ready()``: a
    test decides when such an engine call ends instead of racing a timer on a busy machine."""

    def __init__(self, rules: list[dict[str, Any]], hold: str, ready: Callable[[], bool],
                 name: str = "scripted") -> None:
        super().__init__(rules, name=name)
        self._hold = hold
        self._ready = ready

    async def _held(self, prompt: str, answer: Coroutine[Any, Any, T]) -> T:
        if self._hold in prompt:
            await until(self._ready)
        return await answer

    def score_each(self, reqs: Sequence[ScoreRequest]) -> list[Coroutine[Any, Any, LetterScores | Failure]]:
        return [self._held(r.prompt, a) for r, a in zip(reqs, super().score_each(reqs), strict=True)]

    def generate_each(self, reqs: Sequence[GenerateRequest]) -> list[Coroutine[Any, Any, Generation | Failure]]:
        return [self._held(r.prompt, a) for r, a in zip(reqs, super().generate_each(reqs), strict=True)]


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




def post_chat(url: str, body: dict[str, Any], key: str | None = None, timeout_s: float = 30.0
              ) -> tuple[int, dict[str, Any]]:
    """POST ``body`` to ``url``/v1/chat/completions (with a bearer ``key``): (status, JSON body),
    an error status's body included."""
    req = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
