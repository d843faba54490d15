"""``benchcheck screen``: plan or run one screening step."""

from __future__ import annotations

import click

from benchcheck.cli.common import (
    CliPath,
    FiniteFloatRange,
    die,
    executor_options,
    load_items_reporting,
    need_engine_reads,
    need_key_variable,
    need_own_results,
)
from benchcheck.cli.videos import videos_option
from benchcheck.defaults import INTRO_NAME
from benchcheck.engines.registry import engine_names

# Which engines decide anything: the rest exist for tests and the demo.
ENGINE_HELP = ("Real decisions: openai (any vLLM / OpenAI-compatible --endpoint that returns log-probs) and "
               "hf (a local checkpoint, --model, on a GPU). For tests and the demo only, never for your "
               "benchmark's verdicts: scripted (answers from a --rules file), reference and reference-prior "
               "(rules for the demo's coloured shapes), and hf with a tiny random-weight model.")


@click.command("screen")
@click.option("--items", "item_paths", multiple=True, required=True, type=CliPath(exists=True),
              help="Item files or folders (repeatable).")
@click.option("--step", type=int, required=True, help="Step number (1-6).")
@click.option("--results", type=CliPath(file_okay=False), required=True, help="Results folder (step<k>/ inside).")
@click.option("--engine", type=click.Choice(engine_names()), default="hf", show_default=True,
              help=ENGINE_HELP)
@click.option("--model", default=None, help="Checkpoint folder or hub name (default: the step's pinned model).")
@click.option("--revision", default=None, help="Hub revision (default: the pinned one for the step's model).")
@click.option("--endpoint", "endpoints", multiple=True, help="OpenAI-compatible base URL (repeatable).")
@click.option("--api-key-env", default=None, help="Environment variable holding the endpoints' API key.")
@click.option("--device", default="auto", show_default=True, help="hf engine: cpu, cuda, auto.")
@click.option("--rules", default=None, type=CliPath(exists=True), help="scripted engine: rules file.")
@click.option("--hf-config", "hf_config", multiple=True, metavar="KEY=VALUE|FILE.json",
              help="hf engine: a knob of HFConfig (repeatable; ops=-swiglu,+pacing) or a JSON file of them "
                   "(docs/models_hf.md, Configuration). Its hash goes into every row and the run log.")
@click.option("--chain", default="1,2,3,4,5,6", show_default=True, help="Order of the steps.")
@click.option("--intro", default=INTRO_NAME, show_default=True, help="Named set of prompt intros.")
@click.option("--frames", "frames_root", type=CliPath(), default=None,
              help="Frame cache (pool_frames, from 'benchcheck frames extract --plan v32').")
@click.option("--store", type=CliPath(), default=None,
              help="Normalized video store: names the items' videos (index.jsonl); without --frames, frames "
                   "are extracted from it on the fly.")
@videos_option
@click.option("--keep", "keep_file", type=CliPath(exists=True), default=None, help="Step-0 kept list.")
@click.option("--bench", default=None, help="Only these benchmarks: A,B.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most N items per benchmark.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Requests in flight per --endpoint (default 32/16/8 by step); in-process: engine calls (2).")
@click.option("--batch-items", type=click.IntRange(min=1), default=None,
              help="Items per engine call (default: hf 64; step 2 256, step 3 144, steps 5-6 48; served 1).")
@click.option("--shard", default=None,
              help="auto (Slurm array), i/n, or i/n:j/m (share j of m of share i of n: a launch host's client).")
@click.option("--max-unit", type=click.IntRange(min=1), default=20000, show_default=True,
              help="Items per shard unit (benchcheck protocol sharding).")
@click.option("--columns", default=None, help="Column map for CSV/Parquet items.")
@click.option("--plan-only", is_flag=True, help="Print REMAINING_TOTAL=<n> and the other counts; run nothing.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--extra-perms", type=click.IntRange(min=0), default=0, show_default=True,
              help="Items near the threshold get N more option permutations, recorded as evidence for "
                   "`benchcheck audit` (extra_perms / extra_lp); the protocol's forwards still decide.")
@click.option("--extra-band", type=FiniteFloatRange(min=0.0), default=1.0, show_default=True,
              help="With --extra-perms: 'near' = margin within this many nats of log 2 (or one hit from flipping).")
@click.option("--letter-tokenizer", type=CliPath(exists=True, file_okay=False), default=None,
              help="openai engine: the served model's tokenizer folder; asks each server once whether it "
                   "takes logprob_token_ids and, where it does, records lp_exact (every letter variant's "
                   "exact log-prob) beside lp. The hf engine records lp_exact always.")
@executor_options
@click.option("--gpus", "run_gpus", type=int, default=0, hidden=True, help="GPUs behind this shard (run_log).")
def screen(item_paths: tuple[str, ...], step: int, results: str, engine: str, model: str | None,
           revision: str | None, endpoints: tuple[str, ...], api_key_env: str | None, device: str,
           rules: str | None, hf_config: tuple[str, ...], chain: str, intro: str, frames_root: str | None,
           store: str | None,
           videos_dir: str | None, keep_file: str | None, bench: str | None, limit: int | None, workers: int | None,
           batch_items: int | None, shard: str | None, max_unit: int, columns: str | None, plan_only: bool,
           no_progress: bool, extra_perms: int, extra_band: float, letter_tokenizer: str | None,
           executor: str, ray_address: str | None, run_gpus: int) -> None:
    """Screen items at one step; rows go to RESULTS/step<k>/<bench>.jsonl (resumable). A step that can
    run nothing says why per cause; exit 2 when what was asked cannot happen (an earlier step not run,
    no item reaching a video, a frames folder that does not exist).

    \b
    Example:
      benchcheck screen --items items/ --step 1 --results results --model tiny/ --plan-only
      benchcheck screen --items items/ --step 3 --results results --frames pool_frames --executor ray
    """
    from benchcheck.executors.registry import run_screen_job
    from benchcheck.screen.job import ShardJob

    need_engine_reads(engine, rules=rules, hf_config=hf_config, letter_tokenizer=letter_tokenizer)  # --plan-only too
    need_own_results(results, "screen")
    if not plan_only:
        need_key_variable(api_key_env, executor)
    job = ShardJob(items=item_paths, results=results, step=step, engine=engine, model=model, revision=revision,
                   endpoints=endpoints, api_key_env=api_key_env, device=device, rules=rules, hf_config=hf_config,
                   chain=chain,
                   intro=intro, frames_root=frames_root, store=store, videos=videos_dir, keep_file=keep_file,
                   bench=bench, limit=limit,
                   workers=workers, batch_items=batch_items, shard=shard, columns=columns, progress=not no_progress,
                   max_unit=max_unit, gpus=run_gpus, extra_perms=extra_perms, extra_band=extra_band,
                   letter_tokenizer=letter_tokenizer, executor=executor, ray_address=ray_address)
    try:
        code = run_screen_job(job, load_items_reporting, click.echo, plan_only=plan_only)
    except ValueError as e:
        die(str(e))
    raise SystemExit(code)


COMMANDS = [screen]
