"""The report's loud label names a sweep made by something that is not a model.

A newcomer ran `sweep run --engine reference` (as the docs' flow shows) and `report --sweep`: the
sweep page showed the rule program's accuracies and verdict under a banner that named only the
screening steps, so a sweep made by the reference engine beside a real model's screening would
carry no label at all.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _bc(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC}
    proc = subprocess.run([sys.executable, "-m", "benchcheck", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_a_reference_engine_sweep_is_named_on_the_banner(tmp_path: Path) -> None:
    _bc(tmp_path, "init", "--example", "mine")
    _bc(tmp_path, "init", "--videos", "mine/videos", "--items", "mine/mybench.jsonl", "--out", "proj")
    _bc(tmp_path, "screen", "--step", "1", "--items", "proj/items", "--results", "proj/results",
        "--engine", "reference", "--no-progress")
    _bc(tmp_path, "sweep", "run", "--items", "proj/items", "--store", "proj/store", "--results",
        "proj/sweep/results", "--engine", "reference", "--conds", "v_blind,v_1")
    proc = _bc(tmp_path, "report", "--results", "proj/results", "--items", "proj/items", "--sweep", "proj/sweep",
               "--chain", "1", "--no-plots", "--no-progress", "--out", "proj/report")
    reference = [ln for ln in proc.stderr.splitlines() if "rule-based reference engine" in ln]
    assert len(reference) == 1 and reference[0].endswith("step 1; the sweep"), proc.stderr
    assert "the sweep" in (tmp_path / "proj/report/sweep.html").read_text(encoding="utf-8")
