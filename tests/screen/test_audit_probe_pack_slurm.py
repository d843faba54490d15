"""`slurm script` with paths that hold spaces, quotes, `$` and `#`: the written script, run by
bash as an array task, must use exactly those paths, and its `#SBATCH` lines must read back as
sbatch splits them (whitespace, double quotes, backslash escapes, `#` comments)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from screen_helpers import cli, ok_rows, write_rules


def sbatch_args(line: str) -> list[str]:
    """A `#SBATCH` line's arguments as sbatch's directive parser reads them."""
    out, cur, quoted, esc, has = [], "", False, False, False
    for ch in line[len("#SBATCH"):]:
        if esc:
            cur, esc, has = cur + ch, False, True
        elif ch == "\\":
            esc = True
        elif ch == '"':
            quoted, has = not quoted, True
        elif ch == "#":
            break
        elif ch.isspace() and not quoted:
            if has:
                out.append(cur)
            cur, has = "", False
        else:
            cur, has = cur + ch, True
    if has:
        out.append(cur)
    return out


def test_script_with_spaces_and_dollars_in_paths_runs_on_those_paths(tmp_path: Path) -> None:
    """`--python "/opt/my py/bin/python"` went into the script unquoted (bash ran `/opt/my`), and a
    `--logs` folder with `$` or `"` was expanded by bash in `mkdir`/`TASK_LOGS`, so the task's logs
    went elsewhere than the folder `--out` created; `#SBATCH --output=my logs/...` was cut at the
    space by sbatch."""
    base = tmp_path / "my dir"
    base.mkdir()
    (base / "py bin").mkdir()
    py = base / "py bin" / "python"
    py.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')  # a venv's python copied by a symlink loses the venv
    py.chmod(0o755)
    assert cli("demo", "items", "--out", str(base / "items")).returncode == 0
    rules = write_rules(base / "rules.json")
    logs = str(base / 'logs $HOME "q" #1')
    script = base / "step1 job.sbatch"
    r = cli("slurm", "script", "--step", "1", "--array", "1", "--direct", "--gpus-per-task", "0",
            "--logs", logs, "--python", str(py), "--partition", "gpu #a", "--out", str(script), "--",
            "--items", str(base / "items"), "--results", str(base / "res"), "--engine", "scripted",
            "--rules", str(rules))
    assert r.returncode == 0, r.stderr
    text = script.read_text()
    directives = {a.split("=", 1)[0]: a.split("=", 1)[1]
                  for line in text.splitlines() if line.startswith("#SBATCH") for a in sbatch_args(line)}
    assert directives["--output"] == f"{logs}/slurm_s1_%A_%a.out"
    assert directives["--partition"] == "gpu #a"
    env = {**os.environ, "SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "0",
           "SLURM_ARRAY_TASK_COUNT": "1"}
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert ok_rows(base / "res" / "step1")
    assert sorted(p.name for p in base.iterdir() if p.name.startswith("logs")) == [Path(logs).name]
    assert not re.search(r"^logs ", "\n".join(os.listdir(tmp_path)))


def test_line_break_in_a_path_is_refused(tmp_path: Path) -> None:
    r = cli("slurm", "script", "--step", "1", "--array", "1", "--logs", "a\nb", "--", "--items", "i",
            "--results", "r")
    assert r.returncode == 2 and "--logs" in r.stderr and "line break" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
