"""``benchcheck serve --host ""`` (an unset ``$HOST``) must not bind every interface, and
``--api-key ""`` (an unset ``$KEY``) must not serve without a key."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from loopback import free_port


@pytest.mark.parametrize(("flag", "value", "says", "started"), [
    # Without the check the server starts on 0.0.0.0 and runs until killed.
    ("--host", "", "every interface", "an empty --host started a server (on every interface)"),
    ("--host", " ", "every interface", "an empty --host started a server (on every interface)"),
    # Without the check the server starts and answers every /v1 route to anyone ("no API key").
    ("--api-key", "", "empty", "an empty --api-key started a server that takes no key"),
    ("--api-key", " ", "empty", "an empty --api-key started a server that takes no key"),
])
def test_an_empty_host_or_key_is_a_usage_error_not_an_open_server(tmp_path: Path, flag: str, value: str, says: str,
                                                                  started: str) -> None:
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"match": "", "reply": "ok"}]))
    cmd = [sys.executable, "-c", "from benchcheck.cli import main; main()", "serve", "--engine", "scripted",
           "--rules", str(rules), "--model", "judge", "--port", str(free_port()), flag, value]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail(started)
    assert proc.returncode == 2
    assert flag in proc.stderr and says in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("port", ["70000", "-1"])
def test_a_port_out_of_range_is_a_usage_error_not_a_traceback(tmp_path: Path, port: str) -> None:
    """``--port 70000`` (a typo) ended in an ``OverflowError`` traceback from ``bind``, after a log
    line saying the server was serving."""
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"match": "", "reply": "ok"}]))
    cmd = [sys.executable, "-c", "from benchcheck.cli import main; main()", "serve", "--engine", "scripted",
           "--rules", str(rules), "--model", "judge", "--port", port]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "serving" not in proc.stderr
    assert "--port" in proc.stderr and port in proc.stderr and "65535" in proc.stderr


def test_a_port_in_use_says_so_without_a_serving_line_before_it(tmp_path: Path) -> None:
    """The "serving on" line was logged before the bind, so a port in use read as a server that had
    started, then failed."""
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"match": "", "reply": "ok"}]))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cmd = [sys.executable, "-c", "from benchcheck.cli import main; main()", "serve", "--engine", "scripted",
               "--rules", str(rules), "--model", "judge", "--port", str(port)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert str(port) in proc.stderr and "Traceback" not in proc.stderr
    assert "serving" not in proc.stderr


def test_port_0_is_told_the_port_it_got(tmp_path: Path) -> None:
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"match": "", "reply": "ok"}]))
    cmd = [sys.executable, "-c", "from benchcheck.cli import main; main()", "serve", "--engine", "scripted",
           "--rules", str(rules), "--model", "judge", "--port", "0"]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        while line and "serving" not in line:
            line = proc.stderr.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)/v1", line)
        assert m and int(m.group(1)) > 0, line
        with urllib.request.urlopen(f"http://127.0.0.1:{m.group(1)}/v1/models", timeout=10) as r:
            assert json.loads(r.read())["data"][0]["id"].endswith("judge")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
