"""``benchcheck task run JOB``: run a shard job file (what ``launch`` starts per client shard)."""

from __future__ import annotations

import click

from benchcheck.cli.common import CliPath, die, load_items_reporting


@click.group("task", hidden=True)
def task() -> None:
    """Shard job files written by `launch` (one per client process)."""


@task.command("run")
@click.argument("job_file", type=CliPath(exists=True, dir_okay=False, allow_dash=True))
@click.option("--plan-only", is_flag=True, help="Print the plan of the job's step; run nothing.")
def run(job_file: str, plan_only: bool) -> None:
    """Run one shard job: its units through run_task, rows to the job's results folder.

    JOB_FILE is a job file, or - to read the job from stdin (how launch starts its clients).

    \b
    Example:
      benchcheck task run logs/client_s1_gpu0.job.json
    """
    from benchcheck.executors.registry import run_screen_job
    from benchcheck.screen.job import ShardJob

    try:
        code = run_screen_job(ShardJob.read(job_file), load_items_reporting, click.echo, plan_only=plan_only)
    except ValueError as e:
        die(str(e))
    raise SystemExit(code)


COMMANDS = [task]
