"""``pack`` stopped by a file it cannot read or write says so in one line naming the file, exits 1
and leaves no ``.partial``: it caught only ValueError, so a full disk (an error that names no
file) ended in a Python traceback, and a file removed or cut short by a run still writing the
folder gave a bare system message or a traceback."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import benchcheck.data.pack as pack_mod
from benchcheck.cli import main

ROOT = os.geteuid() == 0  # root reads a chmod 000 file: no permission is denied


def _folder(tmp: Path) -> Path:
    step = tmp / "res" / "step1"
    step.mkdir(parents=True)
    for bench in ("A", "B"):
        (step / f"{bench}.jsonl").write_text(json.dumps({"item_id": f"{bench}_0", "step": 1}) + "\n")
    # Incompressible, so the tarball passes a small file size limit.
    (step / "C.jsonl").write_text("".join(json.dumps({"item_id": f"C_{i}", "step": 1, "pad": os.urandom(64).hex()})
                                          + "\n" for i in range(2000)))
    (tmp / "logs").mkdir()
    (tmp / "logs" / "run.log").write_text("started\n")
    (tmp / "out").mkdir()
    return step


def _pack(tmp: Path, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "benchcheck", "pack", "--results", "res", "--logs", "logs",
                           "--out", "out/r.tar.gz"], cwd=tmp, capture_output=True, text=True, timeout=120, **kw)


def _one_line(rc: int, stderr: str, tmp: Path) -> str:
    assert rc == 1, stderr
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert [p.name for p in (tmp / "out").iterdir() if not p.name.startswith(".")] == []  # no .partial, no tarball
    return lines[0]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
def test_a_full_disk_is_one_line_naming_the_tarball(tmp_path: Path) -> None:
    _folder(tmp_path)
    (tmp_path / "out" / "r.tar.gz.partial").symlink_to("/dev/full")  # every write: ENOSPC
    r = _pack(tmp_path)
    assert _one_line(r.returncode, r.stderr, tmp_path) == "error: out/r.tar.gz: No space left on device (OSError)"


def test_a_tarball_past_the_file_size_limit_is_one_line_naming_it(tmp_path: Path) -> None:
    _folder(tmp_path)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, 64 << 10))

    r = _pack(tmp_path, preexec_fn=limit)
    assert _one_line(r.returncode, r.stderr, tmp_path) == "error: out/r.tar.gz: File too large (OSError)"


@pytest.mark.skipif(ROOT, reason="root reads a chmod 000 file")
@pytest.mark.parametrize("name", ["res/step1/B.jsonl", "logs/run.log"])
def test_an_unreadable_file_is_one_line_naming_it(tmp_path: Path, name: str) -> None:
    _folder(tmp_path)
    (tmp_path / name).chmod(0)
    r = _pack(tmp_path)
    line = _one_line(r.returncode, r.stderr, tmp_path)
    assert line == f"error: {(tmp_path / name).resolve()}: Permission denied (PermissionError)"


def _pack_in_process(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    monkeypatch.chdir(tmp)
    r = CliRunner().invoke(main, ["pack", "--results", "res", "--logs", "logs", "--out", "out/r.tar.gz"])
    assert not isinstance(r.exception, OSError), r.exception
    return r.exit_code, r.stderr


def test_a_result_file_removed_after_pack_listed_it_is_one_line_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    step = _folder(tmp_path)
    real = pack_mod.secrets_to_mask

    def then_removed() -> Any:  # runs after the results are listed, before the first is read
        (step / "B.jsonl").unlink()
        return real()

    monkeypatch.setattr(pack_mod, "secrets_to_mask", then_removed)
    line = _one_line(*_pack_in_process(tmp_path, monkeypatch), tmp_path)
    assert line == (f"error: {(step / 'B.jsonl').resolve()}: removed since pack listed it; pack again once no run "
                    "writes the results folder (FileNotFoundError)")


def test_a_result_file_cut_short_while_pack_reads_it_is_one_line_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    step = _folder(tmp_path)
    target, real_open = (step / "C.jsonl").resolve(), Path.open

    def cut_on_open(self: Path, *a: Any, **kw: Any) -> Any:  # a writer truncates it between the stat and the read
        if self == target and threading.current_thread() is threading.main_thread():  # the report reads it apart
            os.truncate(self, 100)
        return real_open(self, *a, **kw)

    monkeypatch.setattr(Path, "open", cut_on_open)
    line = _one_line(*_pack_in_process(tmp_path, monkeypatch), tmp_path)
    assert line == (f"error: {target}: shorter than when pack listed it; pack again once no run writes the results "
                    "folder (OSError)")
