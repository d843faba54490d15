"""An empty path on the command line (``--out "$OUTDIR"`` with the variable unset) is refused in one
line naming the option, exit 2: it used to mean the current folder, and a command wrote there."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from benchcheck.cli import main

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run([sys.executable, "-m", "benchcheck", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def screened(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Demo items screened at step 1 by the reference engine: a results folder audit and export take."""
    root = tmp_path_factory.mktemp("screened")
    assert _run(["demo", "items", "--out", "items"], root).returncode == 0
    r = _run(["screen", "--items", "items", "--step", "1", "--results", "results", "--engine", "reference",
              "--no-progress"], root)
    assert r.returncode == 0, r.stderr
    return root


@pytest.mark.parametrize("args", [
    ["demo", "items", "--out", ""],
    ["audit", "--results", "{root}/results", "--items", "{root}/items", "--out", ""],
    ["export", "--results", "{root}/results", "--items", "{root}/items", "--format", "parquet", "--out", ""],
])
def test_empty_out_is_refused_and_nothing_is_written(args: list[str], screened: Path, tmp_path: Path) -> None:
    r = _run([a.format(root=screened) for a in args], tmp_path)
    assert r.returncode == 2, r.stderr
    errors = [x for x in r.stderr.splitlines() if x.startswith("Error:")]
    assert len(errors) == 1 and "'--out'" in errors[0] and "empty path" in errors[0], r.stderr
    assert list(tmp_path.iterdir()) == []


def _path_params(cmd: click.Command = main, name: str = "benchcheck") -> Iterator[tuple[str, click.Parameter]]:
    if isinstance(cmd, click.Group):
        for sub, c in sorted(cmd.commands.items()):
            yield from _path_params(c, f"{name} {sub}")
    for p in cmd.params:
        if isinstance(p.type, click.Path):
            yield f"{name} {p.name}", p


def test_every_path_option_refuses_an_empty_value() -> None:
    """One rule for every command (demo run, sweep run/analyze, qa, ... take paths too): each path
    option and argument refuses ``""`` while parsing, before the command runs."""
    params = list(_path_params())
    assert len(params) > 50
    accepted = []
    for where, p in params:
        try:
            p.type.convert("", p, click.Context(main))
        except click.BadParameter as e:
            if "empty path" in e.message:
                continue
        accepted.append(where)
    assert accepted == []
