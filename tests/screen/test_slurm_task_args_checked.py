"""`slurm script` checks the task arguments after ``--`` against the command every task runs.

They went into the script unchecked: a misspelt option (``--item``), a missing ``--results`` or
a stray word wrote a script and exit 0, and every array task then failed the same way once the
queue let it start, on its node, with the error only in its Slurm output file.
"""

from __future__ import annotations

import pytest
from screen_helpers import cli


@pytest.mark.parametrize(("direct", "args", "named"), [
    (False, ["--items", "items/", "--results", "results", "--bogus-flag", "3"], "--bogus-flag"),
    (True, ["--items", "items/", "--results", "results", "--engine", "reference", "--no-such"], "--no-such"),
    (False, ["--items", "items/"], "--results"),
    (True, ["--results", "results", "--engine", "reference"], "--items"),
    (False, ["--items", "items/", "--results", "results", "stray"], "stray"),
    (True, ["--items", "items/", "--results"], "--results"),
])
def test_task_arguments_that_would_fail_every_task_are_refused(tmp_path, direct, args, named) -> None:
    script = tmp_path / "s.sbatch"
    r = cli("slurm", "script", "--step", "1", "--array", "2", *(["--direct", "--gpus-per-task", "0"] if direct else []),
            "--out", str(script), "--", *args, cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and named in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not script.exists()


def test_valid_task_arguments_still_write_the_script_before_the_paths_exist(tmp_path) -> None:
    """The items may arrive later (the script is written first): only the options are checked."""
    script = tmp_path / "s.sbatch"
    r = cli("slurm", "script", "--step", "2", "--array", "2", "--direct", "--gpus-per-task", "1", "--out", str(script),
            "--", "--items", "not/yet", "--results", "results", "--engine=openai", "--endpoint",
            "http://127.0.0.1:8001/v1", "--workers", "4", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert script.read_text().rstrip().endswith(
        "--items not/yet --results results --engine=openai --endpoint http://127.0.0.1:8001/v1 --workers 4")
