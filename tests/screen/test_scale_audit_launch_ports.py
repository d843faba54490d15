"""`launch` refuses a --port0 whose last server port is past 65535 (scale-audit).

Server i listens on ``--port0 + i``; ``--port0 65535 --gpus 2`` ended in an ``OverflowError``
traceback from ``bind`` (after the first server had been started), for steps and ``--sweep`` alike.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from screen_helpers import cli


@pytest.mark.parametrize("sweep", [False, True])
def test_ports_past_65535_are_one_line_refusals(tmp_path: Path, sweep: bool) -> None:
    assert cli("demo", "items", "--out", str(tmp_path / "items")).returncode == 0
    store = tmp_path / "store"
    (store / "normalized").mkdir(parents=True)
    (store / "index.jsonl").write_text("")
    what = ["--sweep", "--store", str(store)] if sweep else ["--step", "1"]
    r = cli("launch", *what, "--items", str(tmp_path / "items"), "--results", str(tmp_path / "res"),
            "--gpus", "2", "--port0", "65535", "--server", "benchcheck", "--model", str(tmp_path / "none"),
            "--logs", str(tmp_path / "logs"), "--server-timeout", "20",
            env={"CUDA_VISIBLE_DEVICES": "", "PATH": os.environ.get("PATH", "")}, timeout=120)
    assert r.returncode == 2, (r.stdout, r.stderr)
    out = r.stdout + r.stderr
    assert "Traceback" not in out and "65536" in out and "--port0" in out, out
    assert not (tmp_path / "logs" / "launch_params.txt").exists()
