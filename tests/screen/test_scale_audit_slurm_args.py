"""`slurm script` refuses task arguments that would override what it sets per task (scale-audit).

The arguments after ``--`` were appended after the script's own ``--step N --shard auto``; click
keeps an option's last value, so ``-- ... --shard 0/2`` made every array task work share 0 (share
1 never ran, the job still "succeeded") and ``-- ... --step 3`` ran step 3 in a job named s1.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from screen_helpers import cli, write_rules


def test_a_shard_after_dashdash_is_refused_not_run_by_every_task(tmp_path: Path) -> None:
    assert cli("demo", "items", "--out", str(tmp_path / "items")).returncode == 0
    rules = write_rules(tmp_path / "rules.json")
    script = tmp_path / "step1.sbatch"
    r = cli("slurm", "script", "--step", "1", "--array", "2", "--direct", "--gpus-per-task", "0",
            "--logs", str(tmp_path / "logs"), "--python", sys.executable, "--out", str(script), "--",
            "--items", str(tmp_path / "items"), "--results", str(tmp_path / "res"), "--engine", "scripted",
            "--rules", str(rules), "--bench", "DemoNext", "--max-unit", "10", "--shard", "0/2")
    if r.returncode == 0:  # what the array would have done: both tasks, one share
        for task in range(2):
            env = {**os.environ, "SLURM_ARRAY_TASK_ID": str(task), "SLURM_ARRAY_TASK_MIN": "0",
                   "SLURM_ARRAY_TASK_MAX": "1", "SLURM_ARRAY_TASK_COUNT": "2"}
            done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stderr
        pytest.fail("the script ran: its tasks all worked share 0/2 and left the other share undone")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "--shard" in r.stderr, r.stderr
    assert not script.exists()


@pytest.mark.parametrize(("direct", "extra"), [
    (True, ["--step", "3"]), (True, ["--shard=auto"]), (False, ["--gpus", "4"]), (False, ["--port0", "9000"]),
    (False, ["--logs=x"]),
])
def test_options_the_script_sets_are_refused_after_dashdash(direct: bool, extra: list[str]) -> None:
    r = cli("slurm", "script", "--step", "1", "--array", "2", *(["--direct"] if direct else []), "--",
            "--items", "items/", "--results", "results", *extra)
    assert r.returncode == 2 and extra[0].split("=")[0] in r.stderr, (r.stdout, r.stderr)


def test_other_task_arguments_still_pass_through() -> None:
    r = cli("slurm", "script", "--step", "1", "--array", "2", "--", "--items", "items/", "--results", "results",
            "--workers", "4", "--max-unit", "500")
    assert r.returncode == 0, r.stderr
    assert r.stdout.rstrip().endswith("--items items/ --results results --workers 4 --max-unit 500")


def test_direct_tasks_with_several_gpus_are_refused_unless_ray() -> None:
    """`--direct --gpus-per-task 4` asked Slurm for 4 GPUs a task whose one `screen` (the in-process
    hf engine) computes on one: three of every four allocated GPUs sat idle."""
    base = ("slurm", "script", "--step", "2", "--array", "2", "--direct", "--gpus-per-task", "4", "--",
            "--items", "items/", "--results", "results")
    r = cli(*base)
    assert r.returncode == 2 and "--gpus-per-task 4" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    ray = cli(*base, "--executor", "ray")
    assert ray.returncode == 0, ray.stderr
    assert "#SBATCH --gres=gpu:4" in ray.stdout and ray.stdout.rstrip().endswith("--executor ray")
    one = cli("slurm", "script", "--step", "2", "--array", "2", "--direct", "--gpus-per-task", "1", "--",
              "--items", "items/", "--results", "results")
    assert one.returncode == 0 and "#SBATCH --gres=gpu:1" in one.stdout
