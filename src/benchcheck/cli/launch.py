"""``benchcheck launch`` and ``benchcheck slurm script``: run a step at scale."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from benchcheck.cli.common import CliPath, FiniteFloatRange, checked_store, die, need_own_results
from benchcheck.defaults import (
    GPU_UTIL,
    INTRO_NAME,
    SMALL_GPU_MAX_SEQS,
    STEP_MAX_SEQS,
    STEP_PORT0,
    STEP_WORKERS,
    SWEEP_MAX_SEQS,
    SWEEP_PORT0,
    SWEEP_WORKERS_PER_ENDPOINT,
)

_common = [
    click.option("--items", "item_paths", multiple=True, required=True, type=CliPath(exists=True)),
    click.option("--results", type=CliPath(file_okay=False), required=True),
    click.option("--chain", default="1,2,3,4,5,6", show_default=True),
    click.option("--intro", default=INTRO_NAME, show_default=True),
    click.option("--frames", "frames_root", type=CliPath(), default=None, help="Frame cache."),
    click.option("--store", type=CliPath(), callback=checked_store, default=None,
                 help="Normalized store (frames on the fly)."),
    click.option("--keep", "keep_file", type=CliPath(), default=None, help="Step-0 kept list."),
    click.option("--bench", default=None, envvar="BENCH", show_envvar=True, help="Benchmarks A,B only."),
    click.option("--limit", type=click.IntRange(min=1), default=None),
    click.option("--columns", default=None),
]


class FirstPort(click.ParamType[int]):
    """``auto`` (or ``0``: each server gets a free port from the kernel, as ``--port 0`` does) or a
    first port, 1-65535; ``auto`` is read as ``AUTO_PORT``."""

    name = "auto|PORT"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        from benchcheck.launch.servers import AUTO_PORT, MAX_PORT

        text = str(value).strip()
        if text.lower() == "auto":
            return AUTO_PORT
        if not text.isdigit() or int(text) > MAX_PORT:
            self.fail(f"{value!r} is neither auto nor a port 0-{MAX_PORT}", param, ctx)
        return int(text)


F = TypeVar("F", bound=Callable[..., Any])
# launch's options that only screening steps read (--sweep refuses them).
_SCREENING_ONLY = {"step": "--step", "chain": "--chain", "intro": "--intro", "frames_root": "--frames",
                   "keep_file": "--keep", "shard": "--shard", "max_unit": "--max-unit"}


def common(f: F) -> F:
    """The item / results / filter options shared by launch and screen."""
    for opt in reversed(_common):
        f = opt(f)
    return f


@click.command("launch")
@click.option("--step", default=None, envvar="STEP", show_envvar=True,
              help="Screening step (1-6); not with --sweep (which ignores STEP).")
@click.option("--sweep", is_flag=True, help="The frames x pixels sweep's servers (ports 8011+i) and client.")
@click.option("--conds", default=None, envvar="CONDS", show_envvar=True,
              help="With --sweep: conditions or ladders (default: all 13).")
@click.option("--pilot", is_flag=True, envvar="PILOT", show_envvar=True,
              help="With --sweep: the pilot benchmarks only (PILOT=1).")
@click.option("--gpus", type=click.IntRange(min=1), default=None, envvar="NGPU", show_envvar=True,
              help="Servers on this host (default: every visible GPU, or 1).")
@click.option("--model", default=None, help="Checkpoint folder or hub name (default: the step's pinned model).")
@click.option("--revision", default=None)
@click.option("--served-model-name", default=None, help="Default: the hub name, or the folder's name.")
@click.option("--port0", type=FirstPort(), default=None, envvar="PORT0", show_envvar=True,
              help=f"First server port, server i on PORT0+i (default {STEP_PORT0}; --sweep: {SWEEP_PORT0}); "
                   "auto (or 0): each server a free port of its own, so launches on one host never collide.")
@click.option("--max-num-seqs", type=click.IntRange(min=1), default=None, envvar="MAX_SEQS", show_envvar=True,
              help=f"Default {STEP_MAX_SEQS} (steps); --sweep: {SWEEP_MAX_SEQS}, {SMALL_GPU_MAX_SEQS} on 32 GB GPUs.")
@click.option("--gpu-util", type=FiniteFloatRange(0, 1, min_open=True), default=None, envvar="GPU_UTIL",
              show_envvar=True,
              help=f"vLLM --gpu-memory-utilization (default {GPU_UTIL}).")
@click.option("--max-model-len", type=click.IntRange(min=1), default=None)
@click.option("--workers", type=click.IntRange(min=1), default=None, envvar="WORKERS", show_envvar=True,
              help=f"Requests in flight per server (default {STEP_WORKERS[1]}/{STEP_WORKERS[2]}/{STEP_WORKERS[3]} by "
                   f"step; --sweep: {SWEEP_WORKERS_PER_ENDPOINT} per GPU).")
@click.option("--python", "python_exe", default=None, envvar="PY", show_envvar=True,
              help="Python interpreter of the `benchcheck serve` servers and of the clients (default: this one).")
@click.option("--vllm", "vllm_cmd", default="vllm", show_default=True, envvar="VLLM", show_envvar=True,
              help="The vLLM command.")
@click.option("--logs", type=CliPath(), default="logs", show_default=True)
@click.option("--shard", default=None,
              help="This host's share of an array: auto (Slurm) or i/n, its servers split it (client shards i/n:j/m); "
                   "or a-b/N, its servers as ranks a-b of N on all hosts, a share per server (hosts of unequal size).")
@click.option("--max-unit", type=click.IntRange(min=1), default=20000, show_default=True,
              help="Items per shard unit, as `screen --max-unit`: a server whose client shard gets no unit idles, "
                   "so lower it when benchmarks are fewer than servers.")
@click.option("--server", type=click.Choice(["auto", "vllm", "benchcheck"]), default="auto", show_default=True)
@click.option("--server-timeout", type=FiniteFloatRange(min=0, min_open=True), default=900.0, show_default=True)
@click.option("--plan-only", is_flag=True)
@common
def launch(step: str | None, sweep: bool, conds: str | None, pilot: bool, gpus: int | None, model: str | None,
           revision: str | None, served_model_name: str | None,
           port0: int | None, max_num_seqs: int | None, gpu_util: float | None, max_model_len: int | None,
           workers: int | None, python_exe: str | None, vllm_cmd: str, logs: str, shard: str | None, max_unit: int,
           server: str,
           server_timeout: float, plan_only: bool,
           item_paths: tuple[str, ...], results: str, chain: str, intro: str, frames_root: str | None,
           store: str | None, keep_file: str | None, bench: str | None, limit: int | None,
           columns: str | None) -> None:
    """One inference server per GPU, one client shard per server, then the remaining work.

    Uses `vllm serve` when vLLM is installed, else `benchcheck serve`; without GPUs, N CPU servers.
    Logs: LOGS/vllm_s<STEP>_gpu<i>.log, LOGS/client_s<STEP>_gpu<i>.log, LOGS/launch_params.txt.

    The seeds' environment knobs are the defaults of the matching flags (a flag given wins):
    STEP, NGPU, WORKERS, PORT0, GPU_UTIL, PY, VLLM, MAX_SEQS, PILOT, BENCH, CONDS.
    launch_params.txt records the values used and whether each came from a flag, the
    environment or the default.

    With --sweep: the sweep's servers (docs/sweep.md) and one `benchcheck sweep run` over all of them.

    \b
    Example:
      benchcheck launch --step 1 --gpus 4 --items items/ --results results
      benchcheck launch --sweep --gpus 4 --items items/samples --store data/store --results sweep/results
    """
    import sys

    from benchcheck.cli.common import load_items_reporting
    from benchcheck.launch.cli_run import LaunchArgs, run_launch
    from benchcheck.launch.knobs import DEFAULT, ENV, ENV_OF, FLAG
    from benchcheck.screen.job import ShardJob

    ctx = click.get_current_context()
    label = {click.core.ParameterSource.COMMANDLINE: FLAG, click.core.ParameterSource.ENVIRONMENT: ENV}
    sources = {name: label.get(ctx.get_parameter_source(name) or click.core.ParameterSource.DEFAULT, DEFAULT)
               for name in ENV_OF}
    python = python_exe or sys.executable
    given = {name for name in ctx.params if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE}
    # A flag that cannot apply is refused (one line, exit 2), never dropped.
    screening_only = [flag for name, flag in _SCREENING_ONLY.items() if name in given]
    need_own_results(results, "sweep" if sweep else "screen")  # before any server starts
    if sweep:
        from benchcheck.launch.sweep_servers import SweepKnobs, launch_sweep

        if screening_only:
            die(f"launch --sweep: {', '.join(screening_only)} apply to screening steps only")
        settings = SweepKnobs(workers, gpu_util, python, vllm_cmd, sources)
        raise SystemExit(launch_sweep(gpus, model, revision, served_model_name, server, max_num_seqs, port0, logs,
                                      item_paths, results, store, bench, limit, columns, conds, pilot, click.echo,
                                      settings, max_model_len, plan_only, server_timeout))
    sweep_only = [flag for name, flag in (("conds", "--conds"), ("pilot", "--pilot")) if name in given]
    if sweep_only:
        die(f"launch: {', '.join(sweep_only)} apply with --sweep only")
    if step is None:
        die("give --step N (screening) or --sweep")
        return
    # Read here, not by the option's type: --sweep ignores a leftover STEP (a step-0 script's).
    number = int(step) if step.strip().isdigit() else 0
    if not 1 <= number <= 6:
        source = "STEP" if sources.get("step") == ENV else "--step"
        die(f"launch: {source}={step}: a screening step is 1-6 (--step, or the STEP variable)")
        return

    job = ShardJob(items=item_paths, results=results, step=number, chain=chain, intro=intro, frames_root=frames_root,
                   store=store, keep_file=keep_file, bench=bench, limit=limit, columns=columns, max_unit=max_unit)
    try:
        code = run_launch(LaunchArgs(number, gpus, model, revision, served_model_name,
                                     STEP_PORT0 if port0 is None else port0,
                                     max_num_seqs or STEP_MAX_SEQS, GPU_UTIL if gpu_util is None else gpu_util,
                                     max_model_len, workers, logs, shard,
                                     server, server_timeout, plan_only, job, python, vllm_cmd, sources),
                          load_items_reporting, click.echo)
    except (ValueError, RuntimeError) as e:
        die(str(e))
    raise SystemExit(code)


@click.group("slurm")
def slurm() -> None:
    """Slurm job arrays whose tasks each run their share of a step."""


@slurm.command("script", context_settings={"ignore_unknown_options": True})
@click.option("--step", type=click.IntRange(1, 6), required=True, help="Screening step (1-6).")
@click.option("--array", type=int, required=True, help="Number of array tasks.")
@click.option("--gpus-per-task", type=click.IntRange(min=0), default=1, show_default=True,
              help="GPUs per task (0: CPU tasks, no --gres; with --direct).")
@click.option("--direct", is_flag=True, help="Tasks run `benchcheck screen` (engine flags in ARGS), no servers.")
@click.option("--partition", default=None)
@click.option("--time", "time_limit", default=None)
@click.option("--cpus-per-task", type=click.IntRange(min=1), default=None)
@click.option("--logs", default="logs", show_default=True)
@click.option("--python", default="python3", show_default=True)
@click.option("--port0", type=FirstPort(), default="auto", show_default=True,
              help="Every task's `launch --port0`: auto, each server a free port of its own; or a first port N, "
                   "task k's servers on N + gpus-per-task * k and up.")
@click.option("--out", type=CliPath(dir_okay=False), default=None, help="Write the script here (default: stdout).")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def script(step: int, array: int, gpus_per_task: int, direct: bool, partition: str | None,
           time_limit: str | None, cpus_per_task: int | None, logs: str, python: str, port0: int,
           out: str | None, args: tuple[str, ...]) -> None:
    """Write an sbatch job-array script; ARGS (after --) go to every task's launch/screen command.

    \b
    Example:
      benchcheck slurm script --step 1 --array 8 --out step1.sbatch -- --items items/ --results results
    """
    import shlex
    from pathlib import Path

    from benchcheck.atomic import write_text_atomic
    from benchcheck.launch.slurm import SlurmJob, render_sbatch

    if array < 1:
        die("--array must be at least 1")
    ctx = click.get_current_context()
    if direct and ctx.get_parameter_source("port0") == click.core.ParameterSource.COMMANDLINE:
        die("--port0 with --direct: --direct tasks run `benchcheck screen` and start no servers")
    if not gpus_per_task and not direct:
        die("--gpus-per-task 0 needs --direct: without it each task runs `benchcheck launch`, which starts "
            "one server per GPU (--gpus at least 1)")
    try:
        text = render_sbatch(SlurmJob(step, array, gpus_per_task, tuple(args), direct, partition, time_limit,
                                      cpus_per_task, None, logs, python, port0=port0))
    except ValueError as e:
        die(str(e))
        return
    if (why := _task_args_problem(direct, args)) is not None:
        die(why)
    if out:
        write_text_atomic(out, text)
        Path(out).chmod(0o755)
        # Slurm opens #SBATCH --output before the script runs (its mkdir is too late) and fails a
        # task whose output folder is missing, silently: the folder exists once the script does.
        Path(logs).mkdir(parents=True, exist_ok=True)
        # The command to copy: quoted, so an --out with a space or a `$` submits this script.
        click.echo(f"wrote {out} ({logs}/ holds the tasks' output: submit from this folder): sbatch {shlex.quote(out)}")
    else:
        click.echo(text, nl=False)


def _task_args_problem(direct: bool, args: tuple[str, ...]) -> str | None:
    """Why the arguments after ``--`` would stop every task's command at its start, or None.

    Only the options are read (no value is converted): the paths may not exist yet where the
    script is written, but an unknown option, a missing value or a required option left out
    fails each task the same way, on its node, once the queue starts it."""
    from benchcheck.cli.screen import screen

    cmd = screen if direct else launch
    ctx = click.Context(cmd, info_name=f"benchcheck {cmd.name}")
    try:
        opts, extra, _ = cmd.make_parser(ctx).parse_args(list(args))
    except click.ClickException as e:
        return f"the arguments after -- would stop every task's `benchcheck {cmd.name}`: {e.format_message()}"
    if extra:
        return (f"the arguments after -- would stop every task's `benchcheck {cmd.name}`: unexpected argument "
                f"{extra[0]!r} (every value goes after its option)")
    own = {"step", "shard"} | (set() if direct else {"gpus", "logs", "port0"})
    for p in cmd.params:
        if isinstance(p, click.Option) and p.required and p.name not in opts and p.name not in own:
            return (f"the arguments after -- would stop every task's `benchcheck {cmd.name}`: "
                    f"{p.opts[0]} is required")
    return None


COMMANDS = [launch, slurm]
