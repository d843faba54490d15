"""A screen given a sweep's results folder, or the sweep given a screen's, is refused in one line
naming the folder and what it holds (exit 2): the runs used to mix their rows and run logs into
one folder. New, empty and same-kind folders still run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run([sys.executable, "-m", "benchcheck", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def _screen(cwd: Path, results: str) -> subprocess.CompletedProcess[str]:
    return _run(cwd, "screen", "--items", "items", "--step", "1", "--results", results, "--engine", "reference",
                "--no-progress", "--limit", "3")


def _sweep(cwd: Path, results: str) -> subprocess.CompletedProcess[str]:
    return _run(cwd, "sweep", "run", "--items", "items", "--results", results, "--engine", "reference",
                "--conds", "v_blind", "--limit", "2", "--no-progress")


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Demo items, a screen's results folder (``pool``) and a sweep's (``sweep``), each a real run."""
    d = tmp_path_factory.mktemp("kinds")
    assert _run(d, "demo", "items", "--out", "items").returncode == 0
    r = _screen(d, "pool")
    assert r.returncode == 0 and (d / "pool" / "step1").is_dir(), r.stderr
    r = _sweep(d, "sweep")
    assert r.returncode == 0 and (d / "sweep" / "conditions_results.csv").is_file(), r.stdout + r.stderr
    return d


def _one_line(r: subprocess.CompletedProcess[str], *words: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and all(w in lines[0] for w in words), r.stderr


def test_screen_refuses_a_sweep_results_folder(ws: Path) -> None:
    _one_line(_screen(ws, "sweep"), "--results sweep", "sweep results folder", "conditions_results.csv")
    assert not (ws / "sweep" / "step1").exists()
    _one_line(_run(ws, "launch", "--step", "1", "--items", "items", "--results", "sweep", "--plan-only"),
              "--results sweep", "sweep results folder")


def test_the_sweep_refuses_a_screen_results_folder(ws: Path) -> None:
    before = sorted(p.name for p in (ws / "pool").iterdir())
    _one_line(_sweep(ws, "pool"), "--results pool", "screening results folder", "step1/")
    _one_line(_run(ws, "sweep", "dry-run", "--items", "items", "--results", "pool"), "--results pool", "step1/")
    _one_line(_run(ws, "sweep", "analyze", "--results", "pool", "--out", "an", "--no-plots"),
              "--results pool", "screening results folder")
    _one_line(_run(ws, "launch", "--sweep", "--items", "items", "--results", "pool", "--plan-only"),
              "--results pool", "step1/")
    assert sorted(p.name for p in (ws / "pool").iterdir()) == before
    assert not (ws / "an").exists()


def test_new_empty_and_same_kind_folders_still_run(ws: Path) -> None:
    assert _screen(ws, "pool").returncode == 0
    r = _sweep(ws, "sweep")
    assert r.returncode == 0, r.stderr
    (ws / "empty_a").mkdir()
    (ws / "empty_b").mkdir()
    assert _screen(ws, "empty_a").returncode == 0
    assert _sweep(ws, "empty_b").returncode == 0
    assert _run(ws, "sweep", "analyze", "--results", "sweep", "--out", "an", "--no-plots").returncode == 0
