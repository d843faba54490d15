"""A killed ``assemble`` leaves no database copies behind for good (audit-crash).

``pool.duckdb`` is built in ``.pool.duckdb.<pid>-<tag>.tmp`` (and its ``.wal``) and renamed; a
SIGKILL before the rename left those files in the results folder forever, each as large as the
database, one more per kill. The next ``assemble`` now removes the ones whose writer is dead and
leaves a live writer's alone.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from screen_helpers import cli, write_rules


def test_assemble_removes_a_killed_builds_temp_database(tmp_path: Path) -> None:
    assert cli("demo", "items", "--out", str(tmp_path / "items")).returncode == 0
    rules = write_rules(tmp_path / "rules.json")
    res = tmp_path / "res"
    r = cli("screen", "--items", str(tmp_path / "items"), "--step", "1", "--results", str(res), "--engine",
            "scripted", "--rules", str(rules), "--no-progress")
    assert r.returncode == 0, r.stderr
    gone = subprocess.Popen([sys.executable, "-c", "pass"])  # a writer that has exited
    gone.wait()
    dead = [res / f".pool.duckdb.{gone.pid}-0123abcd.tmp", res / f".pool.duckdb.{gone.pid}-0123abcd.tmp.wal"]
    live = res / f".pool.duckdb.{os.getpid()}-89abcdef.tmp"  # a writer still at work (this test)
    for p in [*dead, live]:
        p.write_bytes(b"half a database")
    r = cli("assemble", "--items", str(tmp_path / "items"), "--results", str(res))
    assert r.returncode == 0, r.stderr
    assert (res / "pool.duckdb").is_file()
    assert [p.name for p in dead if p.exists()] == []
    assert live.exists()
