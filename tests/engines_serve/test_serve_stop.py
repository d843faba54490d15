"""How ``benchcheck serve`` stops. Ctrl-C, as every command: one line, exit 130, and soon: the
requests in progress are cut (their connections closed unanswered: a client retries a connection
error, where an error answer would count against its item) and an ``hf`` generation stops at its
next step. Before, Ctrl-C exited 0 without a word, after waiting up to aiohttp's one-minute drain
and then for the engine call's thread to end (the rest of a long generation). SIGTERM, how
``launch``, systemd and ``docker stop`` end a server, still drains: the request in progress is
answered, and the exit is 0."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from loopback import free_port

LONG = 30000  # new tokens: minutes of decoding on the CPU (a random-weight model never stops by itself)


def _serve(model: Path) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    p = subprocess.Popen([sys.executable, "-m", "benchcheck", "serve", "--engine", "hf", "--model", str(model),
                          "--device", "cpu", "--port", str(port)], stderr=subprocess.PIPE, text=True,
                         start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert p.stderr is not None
    seen = []
    while not seen or "serving" not in seen[-1]:
        line = p.stderr.readline()
        assert line, "".join(seen)
        seen.append(line)
    return p, f"http://127.0.0.1:{port}"


def _ask(url: str, model: Path, max_tokens: int, out: list[object]) -> None:
    body = json.dumps({"model": str(model), "messages": [{"role": "user", "content": "Tell a long story."}],
                       "max_tokens": max_tokens, "temperature": 0}).encode()
    req = urllib.request.Request(url + "/v1/chat/completions", body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            out.append((r.status, json.loads(r.read())))
    except Exception as e:  # the connection closed unanswered: what a cut request sees
        out.append(e)


def _in_progress(url: str, model: Path, max_tokens: int) -> tuple[threading.Thread, list[object]]:
    out: list[object] = []
    t = threading.Thread(target=_ask, args=(url, model, max_tokens, out), daemon=True)
    t.start()
    time.sleep(1.0)  # the request is read and its generation under way
    return t, out


def test_ctrl_c_cuts_a_long_generation_and_exits_130_in_one_line(tiny_model: Path) -> None:
    p, url = _serve(tiny_model)
    try:
        asker, out = _in_progress(url, tiny_model, LONG)
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        assert p.stderr is not None
        err = p.stderr.read()
        rc = p.wait(timeout=120)
        took = time.monotonic() - sent
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert rc == 130, err
    assert err.splitlines()[-1] == "serve: stopped by Ctrl-C", err
    assert "Traceback" not in err and "Error" not in err, err
    # the generation (minutes) was not waited for, nor aiohttp's one-minute drain
    assert took < 30, (took, err)
    asker.join(30)
    assert len(out) == 1 and isinstance(out[0], Exception), out  # cut: no answer, no error status


def test_sigterm_answers_the_request_in_progress_and_exits_0(tiny_model: Path) -> None:
    p, url = _serve(tiny_model)
    try:
        asker, out = _in_progress(url, tiny_model, 1000)  # seconds of decoding: in progress at SIGTERM
        p.send_signal(signal.SIGTERM)
        assert p.stderr is not None
        err = p.stderr.read()
        rc = p.wait(timeout=120)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert rc == 0, err
    assert "stopped by Ctrl-C" not in err
    asker.join(60)
    assert len(out) == 1 and isinstance(out[0], tuple) and out[0][0] == 200, out
