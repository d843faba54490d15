"""An sbatch job-array script whose tasks each run their share (`--shard auto`). Pure text."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from benchcheck.launch.servers import AUTO_PORT, MAX_PORT, port0_advice


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
    # Every task's `launch --port0`: AUTO_PORT, or the first port of task 0 (`task_port0`).
    port0: int = AUTO_PORT


def sbatch_value(value: str) -> str:
    """``value`` as sbatch reads a ``#SBATCH`` directive: it splits on whitespace, groups with
    double quotes, escapes with a backslash and ends the line at an unescaped ``#``, so a value
    holding any of these is quoted and escaped (pure)."""
    if not re.search(r'[\s"\\#]', value):
        return value
    return '"' + re.sub(r'(["\\#])', r"\\\1", value) + '"'


def output_pattern(path: str) -> str:
    """``path`` as a literal part of an sbatch ``--output`` pattern, where ``%`` starts a
    replacement (``%j``, ``%x``, ``%a``...): each ``%`` doubled, so the task's output goes to the
    folder the script creates, not to a missing one that fails the task without a word (pure)."""
    return path.replace("%", "%%")


def shell_dq(value: str) -> str:
    """``value`` inside bash double quotes, taken literally (``$``, backquotes, ``"`` and ``\\``
    escaped), so a variable reference can follow it inside the same quotes (pure)."""
    return '"' + re.sub(r'([\\"$`])', r"\\\1", value) + '"'


def script_sets(direct: bool) -> dict[str, str]:
    """The options the script gives every task itself, and from what. The same option in ARGS
    would come last on the command line and win (click keeps the last value), so every task
    would run another step, the same share (``--shard 0/2``: half the work never runs), or one
    log folder and port range for all."""
    own = {"--step": "the --step given before --", "--shard": "--shard auto: each task its share"}
    if not direct:
        own |= {"--gpus": "from --gpus-per-task", "--logs": "a folder per task under --logs",
                "--port0": "give --port0 before --: auto, or a first port"}
    return own


def _ray(args: Sequence[str]) -> bool:
    """Whether the task arguments pick the Ray executor (one engine actor per GPU of the task)."""
    return "--executor=ray" in args or any(a == "--executor" and b == "ray" for a, b in pairwise(args))


def task_port0(array: int, gpus_per_task: int, port0: int = AUTO_PORT) -> str:
    """A launch task's ``--port0``: ``auto`` (each server binds a port the kernel picks), or the
    shell arithmetic by which task k's servers take the ``gpus_per_task`` ports from ``port0 +
    gpus_per_task * k``. A range per task keeps an array's own tasks apart, but not two arrays (a
    step-1 and a step-2 array, or two users') that meet on a node, nor an outgoing connection
    that holds a port of the range once it reaches the ephemeral ports; ``auto`` avoids both.
    The stride is the task's own server count: a fixed stride overlapped the next task's ports
    once a task had more servers than the stride, and a wrap below the array's size gave two tasks
    the same ports. Refused (``ValueError``) when the last task's ports would pass the highest TCP port."""
    if port0 == AUTO_PORT:
        return "auto"
    last = port0 + array * gpus_per_task - 1
    if last > MAX_PORT:
        # Every way out that fits: a lower first port, fewer tasks (none fits when even one task's
        # servers pass the highest port from this --port0, so that is not offered then), or auto.
        most = (MAX_PORT - port0 + 1) // gpus_per_task
        raise ValueError(f"--array {array} with --gpus-per-task {gpus_per_task}: the tasks' servers would need ports "
                         f"{port0}-{last}, past {MAX_PORT}"
                         + port0_advice(array * gpus_per_task, [f"at most {most} tasks of {gpus_per_task} GPUs"]
                                        if most else []))
    # The modulus keeps an edited --array (ids from 1, or a step) within the checked range.
    return f"$(({port0} + {gpus_per_task} * (${{SLURM_ARRAY_TASK_ID:-0}} % {array})))"


def render_sbatch(job: SlurmJob) -> str:
    """The script. Ranks come from the array variables (`slurm_task`), so `--array=1-N` works too.
    Each task writes its logs under its own folder and takes ports of its own (`task_port0`) so
    that two tasks on one node, of this array or another, do not collide. The folder is named by
    the array's job id as well as the task's: two arrays given one --logs (a step-1 and a step-2
    array, or the same step twice) had the same folder for task k, where one task's launch
    replaced the other's client job files and appended to its server and client logs. Run by
    hand, outside Slurm, the script's shell pid stands for the job id."""
    name = job.job_name or f"benchcheck-s{job.step}"
    if job.direct and job.gpus_per_task > 1 and not _ray(job.args):
        raise ValueError(f"--direct --gpus-per-task {job.gpus_per_task}: each task runs one `screen`, whose in-process "
                         "engine computes on one GPU, so the others would sit idle; use --gpus-per-task 1 and more "
                         "tasks, drop --direct (one server per GPU), or pass --executor ray after --")
    port0 = "" if job.direct else task_port0(job.array, job.gpus_per_task, job.port0)
    own = script_sets(job.direct)
    for a in job.args:
        opt = a.split("=", 1)[0]
        if opt in own:
            raise ValueError(f"{opt} in the arguments after --: the script sets it for every task ({own[opt]}); "
                             "leave it out")
    for what, value in (("--logs", job.logs), ("--python", job.python), ("--partition", job.partition),
                        ("--time", job.time_limit), ("job name", name)):
        if value is not None and ("\n" in value or "\r" in value):
            raise ValueError(f"{what} {value!r}: a line break cannot go into a one-line directive or command")
    lines = ["#!/usr/bin/env bash", f"#SBATCH --job-name={sbatch_value(name)}", f"#SBATCH --array=0-{job.array - 1}",
             f"#SBATCH --output={sbatch_value(f'{output_pattern(job.logs)}/slurm_s{job.step}_%A_%a.out')}"]
    if job.gpus_per_task:
        lines.append(f"#SBATCH --gres=gpu:{job.gpus_per_task}")
    if job.cpus_per_task:
        lines.append(f"#SBATCH --cpus-per-task={job.cpus_per_task}")
    if job.partition:
        lines.append(f"#SBATCH --partition={sbatch_value(job.partition)}")
    if job.time_limit:
        lines.append(f"#SBATCH --time={sbatch_value(job.time_limit)}")
    lines += [f"#SBATCH {x}" for x in job.extra_sbatch]
    args = shlex.join(job.args)
    python = shlex.quote(job.python)
    task = "${SLURM_ARRAY_JOB_ID:-$$}_${SLURM_ARRAY_TASK_ID:-0}"
    lines += ["set -euo pipefail", f"mkdir -p {shell_dq(job.logs)}",
              "TASK_LOGS=" + shell_dq(job.logs + "/task_")[:-1] + task + '"']
    if job.direct:
        cmd = f"{python} -m benchcheck screen --step {job.step} --shard auto --no-progress {args}"
    else:
        cmd = (f"{python} -m benchcheck launch --step {job.step} --gpus {job.gpus_per_task} --shard auto "
               f'--logs "$TASK_LOGS" --port0 {port0} {args}')
    lines += [cmd, ""]
    return "\n".join(lines)
