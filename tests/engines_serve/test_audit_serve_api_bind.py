"""``benchcheck serve --host ""`` (an unset ``$HOST``) must not bind every interface, and
``--api-key ""`` (an unset ``$KEY``) must not serve without a key."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loopback import free_port


@pytest.mark.parametrize("host", ["", " "])
def test_an_empty_host_is_a_usage_error_not_every_interface(tmp_path: Path, host: str) -> None:
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"match": "", "reply": "ok"}]))
    cmd = [sys.executable, "-c", "from benchcheck.cli import main; main()", "serve", "--engine", "scripted",
           "--rules", str(rules), "--model", "judge", "--port", str(free_port()), "--host", host]
    try:
        # Without the check the server starts on 0.0.0.0 and runs until killed.
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("an empty --host started a server (on every interface)")
    assert proc.returncode == 2
    assert "--host" in proc.stderr and "every interface" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("key", ["", " "])
def test_an_empty_api_key_is_a_usage_error_not_a_server_without_one(tmp_path: Path, key: str) -> None:
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"match": "", "reply": "ok"}]))
    cmd = [sys.executable, "-c", "from benchcheck.cli import main; main()", "serve", "--engine", "scripted",
           "--rules", str(rules), "--model", "judge", "--port", str(free_port()), "--api-key", key]
    try:
        # Without the check the server starts and answers every /v1 route to anyone ("no API key").
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("an empty --api-key started a server that takes no key")
    assert proc.returncode == 2
    assert "--api-key" in proc.stderr and "empty" in proc.stderr
    assert "Traceback" not in proc.stderr
