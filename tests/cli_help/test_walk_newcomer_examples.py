"""The examples `benchcheck --help` and each `COMMAND --help` print work when typed in one folder.

`screen` and `sweep` refuse each other's results folder (exit 2), yet the help's sweep examples
wrote their rows to `--results results`, the folder its screen, assemble, report and export
examples fill: a newcomer typing them in order had `sweep run` refused as "a screening results
folder".
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click

from benchcheck.cli import main

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _helps(cmd: click.Command = main, path: str = "benchcheck") -> list[str]:
    out = [cmd.get_help(click.Context(cmd, info_name=path, terminal_width=200, max_content_width=200))]
    if isinstance(cmd, click.Group):
        for name, sub in sorted(cmd.commands.items()):
            out += _helps(sub, f"{path} {name}")
    return out


def _example_results() -> tuple[set[str], set[str]]:
    """The --results folders of the sweep's examples and of every other example."""
    text = "\n".join(_helps()).replace("\\\n", " ")
    sweep, other = set(), set()
    for line in text.splitlines():
        line = line.strip()
        m = re.search(r"--results (\S+)", line)
        if not line.startswith("benchcheck ") or m is None:
            continue
        is_sweep = line.startswith("benchcheck sweep ") or " --sweep " in f"{line} "
        (sweep if is_sweep else other).add(m.group(1).rstrip("/"))
    return sweep, other


def test_the_sweep_examples_name_a_folder_no_screen_example_fills() -> None:
    sweep, other = _example_results()
    assert sweep and other
    assert sweep & other == set()


def test_the_sweep_analyze_example_runs_beside_a_screen_results_folder(tmp_path: Path) -> None:
    _, other = _example_results()
    for folder in other:
        (tmp_path / folder / "step1").mkdir(parents=True, exist_ok=True)  # what the screen example writes
    helps = "\n".join(_helps())
    line = next(ln.strip() for ln in helps.splitlines() if ln.strip().startswith("benchcheck sweep analyze "))
    res = re.search(r"--results (\S+)", line)
    assert res is not None
    (tmp_path / res.group(1)).mkdir(parents=True, exist_ok=True)  # a sweep results folder, empty
    args = line.split()[1:]
    env = {**os.environ, "PYTHONPATH": SRC}
    proc = subprocess.run([sys.executable, "-m", "benchcheck", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert "a screening results folder" not in proc.stderr, proc.stderr
