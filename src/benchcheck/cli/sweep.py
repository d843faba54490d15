"""``benchcheck sweep run|dry-run|analyze``: the frames x pixels sweep (SPEC section 5)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from benchcheck.cli.common import (
    SEED,
    CliPath,
    FiniteFloatRange,
    check_store,
    die,
    executor_options,
    load_items_reporting,
    need_engine_reads,
    need_key_variable,
    need_own_results,
)
from benchcheck.cli.videos import resolve_reporting
from benchcheck.defaults import SWEEP_WORKERS_PER_ENDPOINT
from benchcheck.engines.registry import engine_names
from benchcheck.video.plans import PROMPT_RESERVE, TOKEN_BUDGET

F = TypeVar("F", bound=Callable[..., Any])

_plan_opts = [
    click.option("--items", "item_paths", multiple=True, required=True, type=CliPath(exists=True),
                 help="Item files or folders (repeatable)."),
    click.option("--store", type=CliPath(file_okay=False), default=None,
                 help="Normalized video store (normalized/<id>/); `run` needs it to exist."),
    click.option("--videos", "videos_dir", type=CliPath(file_okay=False), default=None,
                 help="Folder the items' 'video' paths are relative to (paths never leave it)."),
    click.option("--results", type=CliPath(file_okay=False), required=True,
                 help="Results folder (conditions_results.csv)."),
    click.option("--logs", type=CliPath(), default=None, help="Run logs (default: RESULTS/logs)."),
    click.option("--data-logs", type=CliPath(), default=None,
                 help="Timing and failures (default: data/logs beside --logs when given, else RESULTS/data/logs)."),
    click.option("--conds", default=None, help="Conditions or ladder names, comma-separated (default: all 13)."),
    click.option("--bench", default=None, help="Only these benchmarks: A,B."),
    click.option("--pilot", is_flag=True, help="MVBench, LVBench, TimeScope (or the first three present)."),
    click.option("--limit", type=click.IntRange(min=1), default=None, help="At most N items per benchmark."),
    click.option("--columns", default=None, help="Column map for CSV/Parquet items."),
    click.option("--model", default=None, help="Hub name or checkpoint folder (default: Qwen3-VL-8B, pinned)."),
    click.option("--revision", default=None),
    click.option("--token-budget", type=click.IntRange(min=PROMPT_RESERVE + 1), default=TOKEN_BUDGET, show_default=True,
                 help="Prompt tokens the fps ladders may fill (the protocol's value: do not change)."),
    click.option("--max-images", type=click.IntRange(min=1), default=1024, show_default=True,
                 help="Images per request (the protocol's value: do not change)."),
]


def plan_options(f: F) -> F:
    for opt in reversed(_plan_opts):
        f = opt(f)
    return f


def log_dirs(results: str, logs: str | None, data_logs: str | None) -> tuple[Path, Path]:
    """(logs, data logs). Inside the results folder by default, so a run keeps everything in the
    folder it was given; with --logs given, the data logs go beside it (``logs/`` and
    ``data/logs/`` side by side: the layout of the launcher and of the returns tarball)."""
    log = Path(logs) if logs else Path(results) / "logs"
    data = Path(data_logs) if data_logs else (log.parent / "data" / "logs" if logs else Path(results) / "data" / "logs")
    return log, data


def _args(kw: dict[str, Any], engine: Any = None, **extra: Any) -> Any:
    from benchcheck.sweep.engine import SweepEngine
    from benchcheck.sweep.job import SweepArgs
    from benchcheck.sweep.results import SweepPaths

    loaded = load_items_reporting(kw["item_paths"], kw["columns"])
    items = resolve_reporting(loaded.items, kw["store"], kw.pop("videos_dir"))
    paths = SweepPaths.under(kw["results"], *log_dirs(kw["results"], kw["logs"], kw["data_logs"]))
    eng = engine or SweepEngine(model=kw["model"], revision=kw["revision"])
    return SweepArgs(items, kw["store"], paths, kw["conds"], kw["bench"], kw["pilot"], kw["limit"], eng,
                     token_budget=kw["token_budget"], max_images=kw["max_images"], **extra)


@click.group("sweep")
def sweep() -> None:
    """The frames x pixels sweep: resolution, frame-rate and frame-count ladders."""


@sweep.command("dry-run")
@plan_options
@click.option("--engine", type=click.Choice(engine_names()), default="hf", show_default=True,
              help="The engine the run will use: a rule program's rows are its own, never a model's.")
# Taken and unused, so that one engine string ($E) fits `run` and `dry-run`: a dry run sends nothing.
@click.option("--endpoint", "endpoints", multiple=True, help="As `run` takes it; a dry run sends no request.")
@click.option("--api-key-env", default=None, help="As `run` takes it; a dry run reads no key.")
@click.option("--device", default=None, help="As `run` takes it; a dry run loads no model.")
def dry_run_cmd(engine: str, endpoints: tuple[str, ...], api_key_env: str | None, device: str | None,
                **kw: Any) -> None:
    """Per benchmark x condition: todo / NA / reuse / failures and projected prompt tokens per item.

    \b
    Example:
      benchcheck sweep dry-run --items items/samples --store data/store --results sweep/results
    """
    from benchcheck.sweep.cli_run import dry_run
    from benchcheck.sweep.engine import SweepEngine

    need_own_results(kw["results"], "sweep")
    try:
        dry_run(_args(kw, SweepEngine(engine, model=kw["model"], revision=kw["revision"])), click.echo)
    except ValueError as e:
        die(str(e))


@sweep.command("run")
@plan_options
@click.option("--engine", type=click.Choice(engine_names()), default="hf", show_default=True)
@click.option("--endpoint", "endpoints", multiple=True, help="OpenAI-compatible base URL (repeatable; round-robin).")
@click.option("--api-key-env", default=None, help="Environment variable holding the endpoints' API key.")
@click.option("--device", default="auto", show_default=True, help="hf engine: cpu, cuda, auto.")
@click.option("--hf-config", "hf_config", multiple=True, metavar="KEY=VALUE|FILE.json",
              help="hf engine: a knob of HFConfig (repeatable; ops=-swiglu,+pacing) or a JSON file of them "
                   "(docs/models_hf.md, Configuration).")
@click.option("--rules", default=None, type=CliPath(exists=True), help="scripted engine: rules file.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help=f"Units in flight (default: {SWEEP_WORKERS_PER_ENDPOINT} per endpoint; hf: enough that each "
                   "frame decoder has 4 items to build, 64 at most).")
@click.option("--decode-workers", type=click.IntRange(min=0), default=None,
              help="Decoding processes (default: cores-1; 0: none).")
@click.option("--chunk", type=click.IntRange(min=1), default=None,
              help="Items per engine call (default 1; 8 for the in-process hf engine, whose calls share decode steps).")
@click.option("--max-model-len", type=click.IntRange(min=1), default=None,
              help="Declare the engine's context when it cannot report it (never lowers the budget).")
@click.option("--min-context", type=click.IntRange(min=1), default=65536, show_default=True,
              help="Stop when the engine's context is below this (site page \"The sweep\", Running). A lower "
                   "value is an explicit choice, recorded in logs/runner.log; the budget's own need is never lowered.")
@click.option("--no-progress", is_flag=True)
@executor_options
def run_cmd(engine: str, endpoints: tuple[str, ...], api_key_env: str | None, device: str,
            hf_config: tuple[str, ...], rules: str | None,
            workers: int | None, decode_workers: int | None, chunk: int | None, max_model_len: int | None,
            min_context: int, no_progress: bool, executor: str, ray_address: str | None, **kw: Any) -> None:
    """Run the missing (bench, item, condition) rows; existing CSV rows are skipped (resumable).

    \b
    Example:
      benchcheck sweep run --items items/samples --store data/store --results sweep/results \\
        --engine openai --endpoint http://127.0.0.1:8011/v1 --endpoint http://127.0.0.1:8012/v1 --pilot
      benchcheck sweep run --items items/samples --store data/store --results sweep/results --executor ray
    """
    from benchcheck.executors.registry import run_sweep_job
    from benchcheck.sweep.engine import SweepEngine, endpoints_list
    from benchcheck.sweep.job import PreconditionError

    need_engine_reads(engine, rules=rules, hf_config=hf_config)
    need_key_variable(api_key_env, executor)
    need_own_results(kw["results"], "sweep")  # before the executor's refusal and the store's check
    check_store(kw["store"])  # here, not by the shared option: dry-run plans before the store is made
    eps = endpoints_list(endpoints)
    from benchcheck.executors.registry import executor as lookup
    from benchcheck.sweep.job import SweepArgs
    from benchcheck.sweep.results import SweepPaths

    try:  # a refused option before the items are read (one line, exit 2)
        why = lookup(executor).refusal("sweep", SweepArgs((), kw["store"], SweepPaths.under(kw["results"]),
                                                          decode_workers=decode_workers, executor=executor,
                                                          ray_address=ray_address))
    except ValueError as e:
        why = str(e)
    if why:
        die(why)
    opts = SweepEngine(engine, kw["model"], kw["revision"], eps, api_key_env, device, rules, hf_config=hf_config,
                       concurrency=workers or 6 * max(1, len(eps)))
    try:
        args = _args(kw, opts, workers=workers, decode_workers=decode_workers, chunk=chunk,
                     max_model_len=max_model_len, min_context=min_context, progress=not no_progress,
                     executor=executor, ray_address=ray_address)
        summary = run_sweep_job(args, click.echo)
    except PreconditionError as e:
        die(str(e))
    except ValueError as e:
        die(str(e))
    if summary.aborted:
        raise SystemExit(3)
    from benchcheck.sweep.cli_run import run_outcome
    from benchcheck.sweep.outcome import outcome_line

    done = run_outcome(args)
    line = outcome_line(done, args.paths)
    if done.exit_code:
        die(line, done.exit_code)
    if line:
        click.echo(line)


@sweep.command("analyze")
@click.option("--results", type=CliPath(exists=True, file_okay=False), required=True,
              help="Results folder (conditions_results.csv).")
@click.option("--out", type=CliPath(file_okay=False), required=True, help="Output folder (CSV, Markdown, PNG plots).")
@click.option("--n-perm", "--n-boot", "n_perm", type=click.IntRange(min=1), default=2000, show_default=True,
              help="Permutation replicates of each effect's test.")
@click.option("--seed", type=SEED, default=0, show_default=True)
@click.option("--alpha", type=FiniteFloatRange(0, 1, min_open=True, max_open=True), default=0.05, show_default=True,
              help="Family-wise level over the two effects (each is tested at alpha/2); intervals at 1-alpha.")
@click.option("--margin", type=FiniteFloatRange(0, 1, min_open=True), default=0.05, show_default=True,
              help="Equivalence margin: 'neither' needs both effects' intervals inside (-margin, +margin).")
@click.option("--min-videos", type=click.IntRange(min=2), default=10, show_default=True,
              help="Fewer videos behind an effect: undetermined.")
@click.option("--min-items", type=click.IntRange(min=1), default=20, show_default=True,
              help="Fewer items behind an effect: undetermined.")
@click.option("--no-plots", is_flag=True)
@click.option("--data-logs", type=CliPath(file_okay=False), default=None,
              help="The runs' failures.jsonl folder, as `run` took it (default: RESULTS/data/logs); read only to "
                   "name failures not yet in the CSV.")
def analyze_cmd(results: str, out: str, n_perm: int, seed: int, alpha: float, margin: float, min_videos: int,
                min_items: int, no_plots: bool, data_logs: str | None) -> None:
    """Accuracy with video-clustered intervals, pixels and frames effects, and the verdict per benchmark.

    \b
    Example:
      benchcheck sweep analyze --results sweep/results --out sweep/analysis
    """
    from pathlib import Path

    from benchcheck.sweep.analysis import Settings
    from benchcheck.sweep.report import write_analysis
    from benchcheck.sweep.results import CSV_NAME, SweepPaths, condition_models, stale_keys
    from benchcheck.sweep.state import unsynced

    need_own_results(results, "sweep")
    settings = Settings(n_perm=n_perm, seed=seed, alpha=alpha, margin=margin, min_videos=min_videos,
                        min_items=min_items)
    try:
        # Counted from the CSV alone, as every reader counts (docs/sweep.md, "Not yet in the CSV"):
        # what the folder's own records hold beyond it is named, not counted.
        where = SweepPaths.under(results, *log_dirs(results, None, data_logs))
        behind = unsynced(where).line(where)
        if behind:
            click.echo(f"warning: {behind}", err=True)
        paths, analysis = write_analysis(Path(results), Path(out), settings, plots=not no_plots)
    except ValueError as e:
        die(str(e))
    for line in analysis.unparsed_warnings() + analysis.error_warnings():
        click.echo(f"warning: {line}", err=True)
    stale = stale_keys(Path(results) / CSV_NAME)
    if stale:
        b, i, c = min(stale)
        click.echo(f"warning: {len(stale)} cells have rows of an earlier spec only and are left out of the analysis "
                   f"(first: {b} {i} {c}); `sweep dry-run` lists them as stale, `sweep run` redoes them", err=True)
    models = condition_models(Path(results))
    if len(set(models.values())) > 1:
        by = ", ".join(f"{c}: {n}" + (f"@{r}" if r else "") for c, (n, r) in sorted(models.items()))
        click.echo(f"warning: the conditions' last runs used different models ({by}): an effect between two "
                   "of them compares models, not frames or pixels", err=True)
    for name, p in paths.items():
        click.echo(f"{name}: {p}")


COMMANDS = [sweep]
