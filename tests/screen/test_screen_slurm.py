"""`slurm script` output, executed as the tasks of a job array on this machine."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from screen_helpers import cli, decisions, ok_rows, write_rules


def test_sbatch_script_tasks_cover_the_step_exactly_once(tmp_path: Path) -> None:
    assert cli("demo", "items", "--out", str(tmp_path / "items")).returncode == 0
    rules = write_rules(tmp_path / "rules.json")
    script = tmp_path / "step1.sbatch"
    r = cli("slurm", "script", "--step", "1", "--array", "3", "--direct", "--gpus-per-task", "0",
            "--logs", str(tmp_path / "logs"), "--python", sys.executable, "--out", str(script), "--",
            "--items", str(tmp_path / "items"), "--results", str(tmp_path / "res"), "--engine", "scripted",
            "--rules", str(rules), "--max-unit", "50")
    assert r.returncode == 0, r.stderr
    text = script.read_text()
    assert "#SBATCH --array=0-2" in text and "--shard auto" in text
    for task in range(3):
        env = {**os.environ, "SLURM_ARRAY_TASK_ID": str(task), "SLURM_ARRAY_TASK_MIN": "0",
               "SLURM_ARRAY_TASK_MAX": "2", "SLURM_ARRAY_TASK_COUNT": "3"}
        done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert f"shard {task}/3" in done.stdout
    assert len(ok_rows(tmp_path / "res" / "step1")) == 269
    single = tmp_path / "single"
    assert cli("screen", "--items", str(tmp_path / "items"), "--step", "1", "--results", str(single), "--engine",
               "scripted", "--rules", str(rules), "--no-progress").returncode == 0
    assert decisions(tmp_path / "res" / "step1") == decisions(single / "step1")


def test_launch_script_moves_ports_and_logs_per_task(tmp_path: Path) -> None:
    r = cli("slurm", "script", "--step", "2", "--array", "4", "--gpus-per-task", "4", "--partition", "gpu",
            "--time", "04:00:00", "--port0", "8001", "--", "--items", "items/", "--results", "results", "--frames",
            "frames/")
    assert r.returncode == 0
    assert "#SBATCH --gres=gpu:4" in r.stdout and "#SBATCH --partition=gpu" in r.stdout
    assert "launch --step 2 --gpus 4 --shard auto" in r.stdout
    assert "--port0 $((8001 + 4 * (${SLURM_ARRAY_TASK_ID:-0} % 4)))" in r.stdout
    assert 'TASK_LOGS="logs/task_${SLURM_ARRAY_JOB_ID:-$$}_${SLURM_ARRAY_TASK_ID:-0}"' in r.stdout


def _task_logs(script: str, env: dict[str, str]) -> str:
    """The folder a task of ``script`` gives launch as ``--logs``, as bash sets it."""
    line = next(x for x in script.splitlines() if x.startswith("TASK_LOGS="))
    return subprocess.run(["bash", "-c", f'set -u; {line}; echo "$TASK_LOGS"'], capture_output=True, text=True,
                          check=True, env={"PATH": os.environ["PATH"], **env}).stdout.strip()


def test_task_log_folders_of_two_arrays_differ() -> None:
    """Task k of every array wrote to LOGS/task_k: two arrays with the default --logs meeting on a
    node (or sharing the file system) replaced each other's client job files and mixed their logs."""
    script = cli("slurm", "script", "--step", "1", "--array", "2", "--", "--items", "items/", "--results", "r").stdout
    first = _task_logs(script, {"SLURM_ARRAY_JOB_ID": "100", "SLURM_ARRAY_TASK_ID": "1"})
    other = _task_logs(script, {"SLURM_ARRAY_JOB_ID": "200", "SLURM_ARRAY_TASK_ID": "1"})
    assert first == "logs/task_100_1" and other == "logs/task_200_1"
    assert _task_logs(script, {"SLURM_ARRAY_JOB_ID": "100", "SLURM_ARRAY_TASK_ID": "0"}) == "logs/task_100_0"
    by_hand = _task_logs(script, {})  # outside Slurm: the shell's pid stands for the job
    assert re.fullmatch(r"logs/task_\d+_0", by_hand), by_hand


def test_written_script_has_its_output_folder(tmp_path: Path) -> None:
    """Slurm opens `#SBATCH --output=LOGS/...` before the script's own `mkdir -p LOGS` runs, and a
    task whose output folder is missing fails without a word: `slurm script --out` as the docs show
    it (then `sbatch` from the same folder) left no output folder behind."""
    logs, script = tmp_path / "slurm_logs", tmp_path / "step1.sbatch"
    r = cli("slurm", "script", "--step", "1", "--array", "4", "--logs", str(logs), "--out", str(script), "--",
            "--items", "items/", "--results", "results")
    assert r.returncode == 0, r.stderr
    assert f"#SBATCH --output={logs}/slurm_s1_%A_%a.out" in script.read_text()
    assert logs.is_dir() and f"sbatch {script}" in r.stdout


def test_cpu_tasks_need_direct(tmp_path: Path) -> None:
    """`--gpus-per-task 0` without `--direct` wrote a script whose every task ran `launch --gpus 0`,
    a usage error on the node."""
    script = tmp_path / "s.sbatch"
    r = cli("slurm", "script", "--step", "1", "--array", "2", "--gpus-per-task", "0", "--logs", str(tmp_path / "l"),
            "--out", str(script), "--", "--items", "items/", "--results", "results")
    assert r.returncode == 2 and "--gpus-per-task 0 needs --direct" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not script.exists()


def test_out_that_is_a_folder_is_refused_naming_it(tmp_path: Path) -> None:
    """`--out DIR` (a folder) was exit 1 naming a temporary file beside it (`.DIR.<hex>.tmp -> DIR:
    Is a directory`), not the option."""
    r = cli("slurm", "script", "--step", "1", "--array", "2", "--out", str(tmp_path), "--",
            "--items", "items/", "--results", "results")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "--out" in r.stderr and ".tmp" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not list(tmp_path.parent.glob(f".{tmp_path.name}*"))
