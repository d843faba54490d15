"""``benchcheck screen``: plan or run one screening step."""

from __future__ import annotations

import click

from benchcheck.cli.common import die, load_items_reporting


@click.command("screen")
@click.option("--items", "item_paths", multiple=True, required=True, type=click.Path(exists=True),
              help="Item files or folders (repeatable).")
@click.option("--step", type=int, required=True, help="Step number (1-6).")
@click.option("--results", type=click.Path(), required=True, help="Results folder (step<k>/ inside).")
@click.option("--engine", type=click.Choice(["hf", "openai", "scripted", "reference"]), default="hf", show_default=True)
@click.option("--model", default=None, help="Checkpoint folder or hub name (default: the step's pinned model).")
@click.option("--revision", default=None, help="Hub revision (default: the pinned one for the step's model).")
@click.option("--endpoint", "endpoints", multiple=True, help="OpenAI-compatible base URL (repeatable).")
@click.option("--api-key-env", default=None, help="Environment variable holding the endpoints' API key.")
@click.option("--device", default="auto", show_default=True, help="hf engine: cpu, cuda, auto.")
@click.option("--rules", default=None, type=click.Path(exists=True), help="scripted engine: rules file.")
@click.option("--chain", default="1,2,3,4,5,6", show_default=True, help="Order of the steps.")
@click.option("--intro", default="lmms-v1", show_default=True, help="Named set of prompt intros.")
@click.option("--frames", "frames_root", type=click.Path(), default=None, help="Frame cache (pool_frames).")
@click.option("--store", type=click.Path(), default=None, help="Normalized video store: extract frames on the fly.")
@click.option("--keep", "keep_file", type=click.Path(exists=True), default=None, help="Step-0 kept list.")
@click.option("--bench", default=None, help="Only these benchmarks: A,B.")
@click.option("--limit", type=int, default=None, help="At most N items per benchmark.")
@click.option("--workers", type=int, default=None, help="Engine calls in flight (default: 1 for hf, 32/16/8 served).")
@click.option("--batch-items", type=int, default=None, help="Items per engine call (default: 16 hf, 1 served).")
@click.option("--shard", default=None, help="auto (Slurm array) or i/n.")
@click.option("--max-unit", type=int, default=20000, show_default=True, help="Items per shard unit (SPEC).")
@click.option("--columns", default=None, help="Column map for CSV/Parquet items.")
@click.option("--plan-only", is_flag=True, help="Print REMAINING_TOTAL=<n> and the other counts; run nothing.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--gpus", "run_gpus", type=int, default=0, hidden=True, help="GPUs behind this shard (run_log).")
def screen(item_paths: tuple[str, ...], step: int, results: str, engine: str, model: str | None,
           revision: str | None, endpoints: tuple[str, ...], api_key_env: str | None, device: str,
           rules: str | None, chain: str, intro: str, frames_root: str | None, store: str | None,
           keep_file: str | None, bench: str | None, limit: int | None, workers: int | None,
           batch_items: int | None, shard: str | None, max_unit: int, columns: str | None, plan_only: bool,
           no_progress: bool, run_gpus: int) -> None:
    """Screen items at one step; rows go to RESULTS/step<k>/<bench>.jsonl (resumable).

    \b
    Example:
      benchcheck screen --items items/ --step 1 --results results --model tiny/ --plan-only
    """
    from benchcheck.screen.cli_run import ScreenArgs, run_screen

    args = ScreenArgs(item_paths, step, results, engine, model, revision, endpoints, api_key_env, device, rules,
                      chain, intro, frames_root, store, keep_file, bench, limit, workers, batch_items, shard,
                      columns, plan_only, not no_progress, max_unit, run_gpus)
    try:
        code = run_screen(args, load_items_reporting, click.echo)
    except ValueError as e:
        die(str(e))
    raise SystemExit(code)


COMMANDS = [screen]
