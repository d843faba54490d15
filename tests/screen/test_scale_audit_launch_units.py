"""`launch --max-unit` splits benchmarks so that every server gets work (scale-audit).

A client shard works whole units (``ceil(n / 20000)`` parts of a benchmark). With fewer units
than servers, e.g. one benchmark of a few thousand items on a 4-GPU host, every server but one
sat idle while its client exited 0 having done nothing; `screen` had ``--max-unit`` to split finer,
`launch` (and so a Slurm array's tasks) had no way to pass it.
"""

from __future__ import annotations

import socket
from pathlib import Path

from screen_helpers import cli, ok_rows

from benchcheck.store import read_rows


def _port_block(n: int) -> int:
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = int(s.getsockname()[1])
        if p + n < 65535:
            return p
    raise RuntimeError("no free port block")


def test_every_server_gets_a_unit_with_max_unit(tmp_path: Path, tiny_model: Path) -> None:
    assert cli("demo", "items", "--out", str(tmp_path / "items")).returncode == 0
    res, logs = tmp_path / "res", tmp_path / "logs"
    r = cli("launch", "--step", "1", "--gpus", "2", "--port0", str(_port_block(2)), "--items", str(tmp_path / "items"),
            "--bench", "DemoNext", "--max-unit", "50", "--results", str(res), "--logs", str(logs),
            "--model", str(tiny_model), "--server", "benchcheck", "--server-timeout", "240",
            env={"CUDA_VISIBLE_DEVICES": ""}, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "REMAINING_TOTAL=0" in r.stdout
    assert len(ok_rows(res / "step1")) == 98  # one ok row per item, none twice
    runs = list(read_rows(res / "run_log.jsonl"))
    assert sorted(run["shard"] for run in runs) == [0, 1]
    assert all(run["ok"] > 0 for run in runs), runs  # neither server idled
    assert sorted(p.name for p in (res / "step1").glob("*.jsonl")) == ["DemoNext.p0.jsonl", "DemoNext.p1.jsonl"]


def test_sweep_refuses_max_unit(tmp_path: Path) -> None:
    store = tmp_path / "store"
    (store / "normalized").mkdir(parents=True)
    (store / "index.jsonl").write_text("")
    assert cli("demo", "items", "--out", str(tmp_path / "items")).returncode == 0
    r = cli("launch", "--sweep", "--max-unit", "50", "--store", str(store), "--items", str(tmp_path / "items"),
            "--results", str(tmp_path / "res"))
    assert r.returncode == 2 and "--max-unit" in r.stderr, r.stderr
