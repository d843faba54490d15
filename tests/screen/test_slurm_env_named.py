"""`--shard auto` with an array variable that is not an integer names the variable.

It said ``error: invalid literal for int() with base 10: 'x'``: no word of which of the
array's variables (or of what option) held it.
"""

from __future__ import annotations

import pytest
from screen_helpers import cli


@pytest.mark.parametrize(("command", "env"), [
    ("screen", {"SLURM_ARRAY_TASK_ID": "x", "SLURM_ARRAY_TASK_COUNT": "2"}),
    ("screen", {"SLURM_ARRAY_TASK_ID": "", "SLURM_ARRAY_TASK_COUNT": "2"}),
    ("launch", {"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "2", "SLURM_ARRAY_TASK_MIN": "abc"}),
    ("launch", {"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_MAX": "3%"}),
])
def test_a_bad_array_variable_is_named(tmp_path, command, env) -> None:
    assert cli("demo", "items", "--out", str(tmp_path / "items")).returncode == 0
    extra = ["--engine", "reference"] if command == "screen" else []
    r = cli(command, "--step", "1", "--shard", "auto", "--items", str(tmp_path / "items"),
            "--results", str(tmp_path / "res"), "--plan-only", *extra, env=env)
    assert r.returncode == 2, (r.stdout, r.stderr)
    bad = next(k for k, v in env.items() if not v.isdigit())
    assert r.stderr.count("\n") == 1 and bad in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_empty_optional_variables_read_as_absent(tmp_path) -> None:
    assert cli("demo", "items", "--out", str(tmp_path / "items")).returncode == 0
    r = cli("screen", "--step", "1", "--shard", "auto", "--items", str(tmp_path / "items"), "--results",
            str(tmp_path / "res"), "--plan-only", "--engine", "reference",
            env={"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "2", "SLURM_ARRAY_TASK_STEP": ""})
    assert r.returncode == 0, r.stderr
