"""An sbatch job-array script whose tasks each run their share (`--shard auto`). Pure text."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from benchcheck.defaults import STEP_PORT0


@dataclass(frozen=True, slots=True)
class SlurmJob:
    step: int
    array: int
    gpus_per_task: int
    args: tuple[str, ...]  # passed to every task: --items ... --results ... (and engine flags if direct)
    direct: bool = False  # tasks run `benchcheck screen` themselves instead of `launch` (no servers)
    partition: str | None = None
    time_limit: str | None = None
    cpus_per_task: int | None = None
    job_name: str | None = None
    logs: str = "logs"
    python: str = "python3"
    extra_sbatch: Sequence[str] = ()


def render_sbatch(job: SlurmJob) -> str:
    """The script. Ranks come from the array variables (`slurm_task`), so `--array=1-N` works too.
    Each task writes its logs under its own folder and moves its ports by its array index so that
    two tasks on one node do not collide."""
    name = job.job_name or f"benchcheck-s{job.step}"
    lines = ["#!/usr/bin/env bash", f"#SBATCH --job-name={name}", f"#SBATCH --array=0-{job.array - 1}",
             f"#SBATCH --output={job.logs}/slurm_s{job.step}_%A_%a.out"]
    if job.gpus_per_task:
        lines.append(f"#SBATCH --gres=gpu:{job.gpus_per_task}")
    if job.cpus_per_task:
        lines.append(f"#SBATCH --cpus-per-task={job.cpus_per_task}")
    if job.partition:
        lines.append(f"#SBATCH --partition={job.partition}")
    if job.time_limit:
        lines.append(f"#SBATCH --time={job.time_limit}")
    lines += [f"#SBATCH {x}" for x in job.extra_sbatch]
    args = shlex.join(job.args)
    lines += ["set -euo pipefail", f'mkdir -p "{job.logs}"',
              'TASK_LOGS="' + job.logs + '/task_${SLURM_ARRAY_TASK_ID:-0}"']
    if job.direct:
        cmd = f"{job.python} -m benchcheck screen --step {job.step} --shard auto --no-progress {args}"
    else:
        cmd = (f"{job.python} -m benchcheck launch --step {job.step} --gpus {job.gpus_per_task} --shard auto "
               f'--logs "$TASK_LOGS" --port0 $(({STEP_PORT0} + 16 * (${{SLURM_ARRAY_TASK_ID:-0}} % 256))) {args}')
    lines += [cmd, ""]
    return "\n".join(lines)
