"""`launch` reads its clients' preconditions before it starts a server.

A visual step without `--frames`/`--store`, or a step with nothing eligible (the earlier step
not run yet), started every server (with vLLM, minutes of model loading per GPU), then every
client stopped at once with exit 2, and `launch` printed only `client 0: exit 2 (log ...)`: the
reason was in the client's log.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from screen_helpers import cli
from test_screen_launch import free_port_block


@pytest.mark.parametrize(("step", "said"), [
    ("2", "--frames"),  # a visual step and no frames
    ("4", "step 4"),  # step 1 has not run: nothing is eligible yet
])
def test_a_client_precondition_stops_launch_before_any_server(tmp_path: Path, tiny_model: Path, step: str,
                                                              said: str) -> None:
    assert cli("demo", "items", "--out", str(tmp_path / "items")).returncode == 0
    logs = tmp_path / "logs"
    r = cli("launch", "--step", step, "--gpus", "1", "--port0", str(free_port_block(1)), "--items",
            str(tmp_path / "items"), "--results", str(tmp_path / "res"), "--model", str(tiny_model), "--logs",
            str(logs), "--server", "benchcheck", "--server-timeout", "120", timeout=300)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert said in r.stdout + r.stderr and "Traceback" not in r.stderr, (r.stdout, r.stderr)
    assert "healthy" not in r.stdout and not list(logs.glob("vllm_s*_gpu*.log")), r.stdout
