"""``data make-shards`` stopped by a file it cannot read or write says so in one line naming the
file, exit 1: it caught only ValueError, so a shard past the disk's room or the file size limit (an
error that names no file) ended in a Python traceback, and a source file cut short after the scan
in another."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import benchcheck.data.shards as shards_mod
from benchcheck.cli import main


def _source(tmp: Path) -> Path:
    src = tmp / "src"
    for vid in ("v1", "v2"):
        (src / vid).mkdir(parents=True)
        (src / vid / "frames.json").write_text("{}")
        (src / vid / "f0.jpg").write_bytes(os.urandom(200_000))
    return src


def _one_line(rc: int, stderr: str, out: Path) -> str:
    assert rc == 1, stderr
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert not out.exists() or not any(out.iterdir())  # no shard, no temporary file, no manifest
    return lines[0]


def test_a_shard_past_the_file_size_limit_is_one_line_naming_it(tmp_path: Path) -> None:
    _source(tmp_path)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))

    r = subprocess.run([sys.executable, "-m", "benchcheck", "data", "make-shards", "src", "--out", "shards"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120, preexec_fn=limit)
    line = _one_line(r.returncode, r.stderr, tmp_path / "shards")
    assert line == "error: shards/frames_000.tar: File too large (OSError)"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod 000 file")
def test_an_unreadable_source_file_is_one_line_naming_it(tmp_path: Path) -> None:
    src = _source(tmp_path)
    (src / "v2" / "f0.jpg").chmod(0)
    r = subprocess.run([sys.executable, "-m", "benchcheck", "data", "make-shards", "src", "--out", "shards"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    line = _one_line(r.returncode, r.stderr, tmp_path / "shards")
    assert line == "error: src/v2/f0.jpg: Permission denied (PermissionError)"


@pytest.mark.parametrize(("change", "what", "kind"), [
    (lambda p: p.unlink(), "removed", "FileNotFoundError"),
    (lambda p: os.truncate(p, 100), "shorter than when", "OSError")])
def test_a_source_file_changed_after_the_scan_is_one_line_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: Any, what: str, kind: str) -> None:
    src = _source(tmp_path)
    real = shards_mod.plan_shards

    def then_changed(*a: Any) -> Any:  # after the scan took each file's size, before the shard reads it
        change(src / "v2" / "f0.jpg")
        return real(*a)

    monkeypatch.setattr(shards_mod, "plan_shards", then_changed)
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["data", "make-shards", "src", "--out", "shards"])
    assert not isinstance(r.exception, OSError), r.exception
    line = _one_line(r.exit_code, r.stderr, tmp_path / "shards")
    assert line.startswith(f"error: src/v2/f0.jpg: {what}") and line.endswith(
        f"make the shards again once nothing writes the source folder ({kind})")
