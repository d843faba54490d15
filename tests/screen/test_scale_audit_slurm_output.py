"""The sbatch `--output` pattern names the folder the script creates, `%` in `--logs` included (scale-audit).

sbatch expands `%` sequences in `--output` (`%j` job id, `%x` job name, `%a` task index, `%%` a
percent sign). `--logs 'runs_%j'` went into the pattern as it was: Slurm would open
`runs_1234/...` while the script (and `--out`) created `runs_%j/`, and a task whose output
folder is missing fails without a word.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from screen_helpers import cli

_SLURM = {"A": "777", "a": "3", "j": "778", "x": "benchcheck-s1", "u": "me", "N": "node1"}


def _sbatch_expand(pattern: str) -> str:
    """sbatch's filename pattern rules (man sbatch, "filename pattern"), for the letters above."""
    return re.sub(r"%(%|[A-Za-z])", lambda m: "%" if m.group(1) == "%" else _SLURM.get(m.group(1), m.group(0)),
                  pattern)


@pytest.mark.parametrize("logs", ["runs_%j", "a%%b", "100% done", "plain"])
def test_output_pattern_lands_in_the_logs_folder(tmp_path: Path, logs: str) -> None:
    script = tmp_path / "s.sbatch"
    r = cli("slurm", "script", "--step", "1", "--array", "4", "--logs", logs, "--out", str(script), "--",
            "--items", "items/", "--results", "results", cwd=tmp_path)  # the relative logs folder lands here
    assert r.returncode == 0, r.stderr
    text = script.read_text()
    line = next(x for x in text.splitlines() if x.startswith("#SBATCH --output="))
    (value,) = shlex.split(line.removeprefix("#SBATCH --output="))  # sbatch's quoting is the shell's here
    out = _sbatch_expand(value)
    assert out == f"{logs}/slurm_s1_777_3.out", (line, out)
    assert f"mkdir -p {shlex.quote(logs)}" in text or f'mkdir -p "{logs}"' in text


def test_the_printed_sbatch_command_submits_the_script_written(tmp_path: Path) -> None:
    """`--out 'step 1.sbatch'` printed `sbatch step 1.sbatch`: pasted, sbatch was given two files."""
    name = str(tmp_path / "step 1 $HOME.sbatch")
    r = cli("slurm", "script", "--step", "1", "--array", "2", "--logs", str(tmp_path / "logs"), "--out", name,
            "--", "--items", "items/", "--results", "results")
    assert r.returncode == 0, r.stderr
    command = r.stdout.strip().rsplit("): ", 1)[1]
    assert shlex.split(command) == ["sbatch", name] and Path(name).is_file()
